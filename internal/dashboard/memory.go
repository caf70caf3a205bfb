package dashboard

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// memorySearchLimit is how many entries the Memory tab's search shows, as many as
// read_memory's default would twice over.
const memorySearchLimit = 20

// searchMemory is the Memory tab's search: exactly read_memory's (semantic and lexical,
// fused, with its threshold, its category and tag filters and its visibility rules),
// then the company filter, which read_memory does not have. With a company chosen the
// search asks for read_memory's largest answer (rooms.MaxMemoryLimit) so that the filter
// has entries to keep; the order stays read_memory's.
func (h *Handler) searchMemory(r *http.Request, sc tenancy.Scope, f memoryFilterView) ([]rooms.MemoryEntry, error) {
	in := rooms.ReadMemoryInput{Query: f.Query, Limit: memorySearchLimit, Category: f.Category}
	if f.Tag != "" {
		in.Tags = []string{f.Tag}
	}
	org, byOrg := uuid.Parse(f.Org)
	if byOrg == nil {
		in.Limit = rooms.MaxMemoryLimit
	}
	res, err := h.deps.Rooms.ReadMemory(r.Context(), sc, in)
	if err != nil || byOrg != nil {
		return res.Entries, err
	}
	var out []rooms.MemoryEntry
	for _, e := range res.Entries {
		if e.OrgID == org && len(out) < memorySearchLimit {
			out = append(out, e)
		}
	}
	return out, nil
}
