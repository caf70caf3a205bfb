package rooms

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	pgvector "github.com/pgvector/pgvector-go"
	"golang.org/x/sync/semaphore"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// SemanticIDs runs the semantic half of read_memory alone; exact runs it as an exact scan
// of the full vectors (the ground truth recall is measured against) instead of the index.
func (s *Service) SemanticIDs(ctx context.Context, sc tenancy.Scope, query string, n int, exact bool) ([]uuid.UUID, error) {
	e := s.embedder()
	qvec := s.queryVector(ctx, e, query)
	if qvec == nil {
		return nil, nil
	}
	search := s.semanticAll
	if exact {
		search = s.semanticExact
	}
	var ids []uuid.UUID
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		res, err := search(ctx, tx, sc, e, qvec, filter{tags: []string{}}, n)
		for _, r := range res {
			ids = append(ids, r.id)
		}
		return err
	})
	return ids, err
}

// SemanticPlan is the plan of the semantic half's indexed statement for the service's
// embedder, explained as the request role in sc's tenant with the search's settings; ""
// when that embedder has no index or the query no vector.
func (s *Service) SemanticPlan(ctx context.Context, sc tenancy.Scope, query string, n int) (string, error) {
	e := s.embedder()
	ix, ok := hnswIndexed(e.Name())
	qvec := s.queryVector(ctx, e, query)
	if !ok || len(qvec) != ix.dim {
		return "", nil
	}
	var plan []string
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		hnswSettings(tx, ix, n)
		rows, err := tx.Query(ctx, "EXPLAIN "+semanticIndexedSQL(e.Name(), ix), sc.ProjectID, sc.OrgID, nil, []string{}, pgvector.NewVector(qvec), n)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var line string
			err := r.Scan(&line)
			return line[:min(len(line), 160)], err // the query vector's text is long
		})
		return err
	})
	return strings.Join(plan, "\n"), err
}

// LexicalSQL is read_memory's lexical query.
const LexicalSQL = lexicalSQL

// ParseCursor exposes get_messages' cursor parsing to its fuzz test.
var ParseCursor = parseCursor

// EmbedderRunning reports whether write_memory leaves its vector to RunEmbedder.
func (s *Service) EmbedderRunning() bool { return s.embeds.running.Load() }

// Parked is how many entries of embedder the embedding backlog holds parked.
func (s *Service) Parked(embedder string) int {
	s.parked.mu.Lock()
	defer s.parked.mu.Unlock()
	return len(s.parked.entries[embedder])
}

// SetDownloadBudget replaces the process's download budget (MaxDownloadBytes).
func (s *Service) SetDownloadBudget(n int64) { s.downloads = semaphore.NewWeighted(n) }
