package dashboard

import (
	"net/http"
	"strings"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/web"
)

// The desk's pages for people under /app/desk/ (docs/dashboard.md, "Desk"), beside the
// reports (desk.go): inboxes and who may see them, saved replies, CSV import. Everyone in
// the workspace reads what the desk shows them; owners and admins change things through
// the desk service (internal/desk/people.go), each change audited and shown on the
// object's page. An id of another workspace answers 404 like one that does not exist.

// DeskPrefix is the desk pages' route prefix.
const DeskPrefix = Prefix + "desk"

// deskCtx is a request on the desk pages: who acts, in which workspace.
type deskCtx struct {
	w    http.ResponseWriter
	r    *http.Request
	sess web.Session
	m    desk.Member
	ws   desk.Workspace
	orgQ string
}

// deskPageView is what the desk pages' template gets (view.DeskPage).
type deskPageView struct {
	Page      string // inboxes, inbox, replies, reply, import, imported
	OrgQ      string
	Workspace desk.Workspace
	CanChange bool
	Fields    map[string]string // field → message, shown beside the field
	Form      map[string]string // what was posted, to fill the form again

	Inboxes []desk.PeopleInbox
	Inbox   *desk.InboxAccess
	Replies []desk.SavedReply
	Reply   *desk.SavedReply
	Preview *importPreview
	Limits  deskLimits
}

// deskLimits are the bounds the forms state, from the constants the desk checks.
type deskLimits struct {
	Title, Body, ImportRows, ImportMB, Chunk int
}

// deskMember resolves the person's workspace (?org= when it is one of theirs) and their
// role in it, as the desk sees it: a deactivated member gets the desk's refusal.
func (h *Handler) deskMember(w http.ResponseWriter, r *http.Request, sess web.Session) (deskCtx, bool) {
	a, ok := h.orgActor(w, r, sess, "Desk", "You do not belong to any workspace.")
	if !ok {
		return deskCtx{}, false
	}
	ws, ok := h.deskWorkspace(w, r, sess, a)
	if !ok {
		return deskCtx{}, false
	}
	return deskCtx{w: w, r: r, sess: sess, orgQ: a.orgQ, ws: ws,
		m: desk.Member{OrgID: a.a.OrgID, UserID: sess.Person.ID, Name: sess.Person.Name, Role: ws.Role}}, true
}

// deskWorkspace reads the workspace of the organisation a acts for as the desk sees the
// person, on every request: a deactivated member gets the desk's refusal (403) on every
// desk page, as their tokens get it on every call.
func (h *Handler) deskWorkspace(w http.ResponseWriter, r *http.Request, sess web.Session, a adminCtx) (desk.Workspace, bool) {
	ws, err := h.deps.Desk.PeopleWorkspace(r.Context(), a.a.OrgID, sess.Person.ID)
	if e, isApp := apperr.As(err); isApp && e.Code == apperr.Forbidden {
		h.message(w, http.StatusForbidden, &sess, "Desk", e.Message)
		return desk.Workspace{}, false
	}
	if err != nil {
		h.unavailable(w, r, &sess, "desk workspace", err)
		return desk.Workspace{}, false
	}
	return ws, true
}

// url is a desk page's address, keeping the organisation acted for, with a notice's key.
func (c deskCtx) url(path, notice string) string { return pageURL(DeskPrefix+path, c.orgQ, notice) }

// deskView starts a desk page's view.
func (c deskCtx) view(title, page string) view {
	return view{Title: title, Person: c.sess.Person, CSRF: c.sess.CSRF(), Notice: pageNotices[c.r.URL.Query().Get("notice")], OrgName: c.ws.Name,
		DeskPage: &deskPageView{Page: page, OrgQ: c.orgQ, Workspace: c.ws, CanChange: c.m.Role == desk.RoleOwner || c.m.Role == desk.RoleAdmin,
			Fields: map[string]string{}, Form: map[string]string{},
			Limits: deskLimits{Title: desk.MaxSavedReplyTitle, Body: desk.MaxSavedReplyBody, ImportRows: desk.MaxImportRows,
				ImportMB: desk.MaxImportBytes >> 20, Chunk: desk.ImportProgressEvery}}}
}

// deskHistory reads a workspace object's history for its page.
func (h *Handler) deskHistory(c deskCtx, v *view, kind, id, what string) error {
	var err error
	v.History, err = h.history(c.r, pg.Tenant{OrgID: c.m.OrgID}, audit.Object{OrgID: c.m.OrgID, Kind: kind, ID: id}, what, c.ws.Timezone)
	return err
}

// deskRefused answers a refused change: fields beside their fields (again, 400, what was
// posted kept), a refusal (403), 404 for an object that is not the workspace's.
func (h *Handler) deskRefused(c deskCtx, err error, again func(status int, pre *deskPageView, msg string)) {
	e, isApp := apperr.As(err)
	switch {
	case desk.Fields(err) != nil:
		pre := &deskPageView{Fields: desk.Fields(err), Form: map[string]string{}}
		for k, vals := range c.r.PostForm {
			if k != "csrf" {
				pre.Form[k] = strings.Join(vals, "\n")
			}
		}
		again(http.StatusBadRequest, pre, "Please correct the fields marked below; nothing was saved.")
	case isApp && e.Code == apperr.NotFound:
		h.notFound(c.w, &c.sess)
	case isApp && e.Code == apperr.Forbidden:
		h.message(c.w, http.StatusForbidden, &c.sess, "Desk", e.Message)
	default:
		h.unavailable(c.w, c.r, &c.sess, "desk", err)
	}
}

// deskShow renders a desk page, or answers the error that loading it met.
func (h *Handler) deskShow(c deskCtx, status int, v view, err error) {
	if err != nil {
		h.deskRefused(c, err, func(int, *deskPageView, string) { h.unavailable(c.w, c.r, &c.sess, "desk", err) })
		return
	}
	h.render(c.w, status, "deskpages", v)
}

// withPre carries a refused form's fields, values and message into a page's view.
func withPre(v view, pre *deskPageView, msg string) view {
	if pre != nil {
		v.DeskPage.Fields, v.DeskPage.Form = pre.Fields, pre.Form
		v.Error, v.Notice = msg, ""
	}
	return v
}

// serveDeskPages routes /app/desk/… (the reports apart, desk.go).
func (h *Handler) serveDeskPages(w http.ResponseWriter, r *http.Request, sess web.Session, rest []string) {
	c, ok := h.deskMember(w, r, sess)
	if !ok {
		return
	}
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	n := len(rest)
	switch {
	case (n == 0 || n == 1 && rest[0] == "inboxes") && get:
		h.deskInboxes(c)
	case n == 2 && rest[0] == "inboxes" && get:
		h.deskInbox(c, rest[1], http.StatusOK, nil, "")
	case n == 3 && rest[0] == "inboxes" && rest[2] == "access" && post:
		h.deskInboxAccess(c, rest[1])
	case n == 1 && rest[0] == "replies" && get:
		h.deskReplies(c, http.StatusOK, nil, "")
	case n == 1 && rest[0] == "replies" && post:
		h.deskReplyCreate(c)
	case n == 2 && rest[0] == "replies" && get:
		h.deskReply(c, rest[1], http.StatusOK, nil, "")
	case n == 2 && rest[0] == "replies" && post:
		h.deskReplyEdit(c, rest[1])
	case n == 1 && rest[0] == "import" && get:
		h.deskImportForm(c, http.StatusOK, nil, "")
	default:
		h.notFound(w, &sess)
	}
}
