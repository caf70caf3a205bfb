package dashboard

import (
	"net/http"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
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
