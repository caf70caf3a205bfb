package rooms

import (
	"context"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// SemanticIDs runs the semantic half of read_memory alone; exact forces a sequential scan
// (the ground truth recall is measured against).
func (s *Service) SemanticIDs(ctx context.Context, sc tenancy.Scope, query string, n int, exact bool) ([]uuid.UUID, error) {
	e := s.embedder()
	qvec := s.queryVector(ctx, e, query)
	if qvec == nil {
		return nil, nil
	}
	var ids []uuid.UUID
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		if exact {
			if _, err := tx.Exec(ctx, "SELECT set_config('enable_indexscan', 'off', true), set_config('enable_bitmapscan', 'off', true)"); err != nil {
				return err
			}
		}
		res, err := s.semanticAll(ctx, tx, sc, e, qvec, filter{tags: []string{}}, n)
		for _, r := range res {
			ids = append(ids, r.id)
		}
		return err
	})
	return ids, err
}

// LexicalSQL is read_memory's lexical query.
const LexicalSQL = lexicalSQL

// ParseCursor exposes get_messages' cursor parsing to its fuzz test.
var ParseCursor = parseCursor

// EmbedderRunning reports whether write_memory leaves its vector to RunEmbedder.
func (s *Service) EmbedderRunning() bool { return s.embeds.running.Load() }
