package dashboard

import (
	"net/http"
	"slices"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/wake"
	"github.com/relayroom/relayroom/internal/web"
)

// A wake's page, /app/projects/{id}/wakes/{wake} (docs/dashboard.md): where a dead wake
// on Needs you leads. It shows the part and its agent, the attempts and the last delivery
// error, and the threads that asked for the wake; a person who may see it sends it again
// (Retry), and the agent's own company's owners and admins get a link to the agent's
// admin page, where its webhook is set.

// wakeView is what the wake page adds to projectView.
type wakeView struct {
	wake.PersonWake
	// AgentAdmin is the agent's company admin page, for its owners and admins only.
	AgentAdmin string
}

// wakeNotices are the wake page's notices after a form (?notice=).
var wakeNotices = map[string]string{"retried": "The wake was sent again: it is pending, and its agent is woken as for a new one."}

func (h *Handler) wakePage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, idText string, status int, errMsg string) {
	id, ok := h.pathID(w, &sess, idText)
	if !ok {
		return
	}
	v := h.projectPage(r, sess, sc, "roster", "Wake")
	v.Error, v.Notice = errMsg, wakeNotices[r.URL.Query().Get("notice")]
	wk, err := h.deps.Wake.WakeForPeople(r.Context(), sc, id)
	if err == nil {
		v.Project.Wake = &wakeView{PersonWake: wk}
		if wk.AgentOrgID == sc.OrgID && slices.Contains([]string{"owner", "admin"}, sc.Person.Role) {
			v.Project.Wake.AgentAdmin = Prefix + "admin/agents/" + wk.AgentID.String() + "?org=" + sc.OrgID.String()
		}
		v.History, err = h.history(r, sc.Tenant(), audit.Object{OrgID: sc.HostOrgID, Kind: audit.KindWake, ID: id.String()}, "this wake", sc.Person.Timezone)
	}
	if err != nil {
		h.serviceError(w, r, sess, "wake", err, "wake", v)
		return
	}
	h.render(w, status, "wake", v)
}

func (h *Handler) retryWake(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, idText string) {
	id, ok := h.pathID(w, &sess, idText)
	if !ok {
		return
	}
	ctx := intendInRoom(r.Context(), sc, audit.KindWake, id.String(), "retried", nil)
	err := h.deps.Wake.RetryByPerson(ctx, sc, id)
	if !h.formDone(w, r, sess, "retry wake", err, func(status int, msg string) { h.wakePage(w, r, sess, sc, idText, status, msg) }) {
		return
	}
	http.Redirect(w, r, pageURL(projectURL(sc.ProjectID, "wakes/"+id.String()), orgQuery(r, sc.OrgID), "retried"), http.StatusSeeOther)
}
