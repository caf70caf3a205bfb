package tenancy

import (
	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
)

// NewResolver builds the resolver on database, with its scope cache (ScopeCacheTTL).
func NewResolver(database *pg.DB) *Resolver {
	return &Resolver{DB: database, Q: db.New(), cache: newScopeCache(ScopeCacheTTL)}
}
