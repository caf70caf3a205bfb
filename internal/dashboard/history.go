package dashboard

import (
	"context"
	"net/http"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// History is what the "history" template shows: an object's audit trail. A page shows
// it with {{with .History}}{{template "history" .}}{{end}} after setting view.History
// with Handler.history.
type History struct {
	What     string // "this agent", shown in the caption
	Anchor   string // unique on the page, for the heading's id
	Timezone string // the viewer's
	Max      int
	Entries  []audit.Entry
	// ObjectAnchor (a tab's history of many objects) prefixes an entry's object id to
	// link to its card: "task-" links to #task-<id>.
	ObjectAnchor string
}

// history reads an object's trail under the reader's tenant (a room page's
// Scope.Tenant(), an organisation page's pg.Tenant{OrgID: …}).
func (h *Handler) history(r *http.Request, t pg.Tenant, o audit.Object, what, tz string) (*History, error) {
	rows, err := h.deps.Audit.History(r.Context(), t, o)
	if err != nil {
		return nil, err
	}
	return &History{What: what, Anchor: o.Kind, Timezone: tz, Max: audit.MaxHistory, Entries: rows}, nil
}

// tabHistory reads the history of a room tab's objects of one kind (every task's on the
// Tasks tab) in one statement, each entry linking to its card (#<anchor><id>).
func (h *Handler) tabHistory(r *http.Request, sc tenancy.Scope, kind, anchor, what string) (*History, error) {
	rows, err := h.deps.Audit.ProjectHistory(r.Context(), sc.Tenant(), sc.HostOrgID, sc.ProjectID, kind)
	if err != nil {
		return nil, err
	}
	return &History{What: what, Anchor: kind, Timezone: sc.Person.Timezone, Max: audit.MaxHistory, Entries: rows, ObjectAnchor: anchor}, nil
}

// intendInRoom asks the rooms or knowledge service called with the returned context to
// record the person's change of an object in the room (owned by its host) in the
// transaction of the change (audit.RecordIntended).
func intendInRoom(ctx context.Context, sc tenancy.Scope, kind, id, action string, detail map[string]string) context.Context {
	return audit.Intend(ctx, audit.Event{Actor: audit.Actor{OrgID: sc.OrgID, UserID: sc.Person.UserID, Name: sc.Person.Name},
		OrgID: sc.HostOrgID, ProjectID: sc.ProjectID, Kind: kind, ObjectID: id, Action: action, Detail: detail})
}
