package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
)

// MaxAnswerBatch bounds the answers one transaction stores (one UPDATE each, pipelined).
const MaxAnswerBatch = 64

// answers stores the answers of concurrent keyed writes together: the answers that
// arrive while one transaction is storing others wait for it to end, and the first of
// them then stores all that waited in one transaction per agent, each UPDATE pipelined
// with the COMMIT. So 32 concurrent writers pay a few transactions for their answers
// instead of 32 (each a round trip, BEGIN, the tenant settings and a commit), while a
// lone writer waits for nobody: with no transaction in progress it stores its answer at
// once. Every caller still returns only once its own answer is committed (or failed), so
// a client never holds an answer whose replay is not stored yet. The zero value is ready.
type answers struct {
	mu      sync.Mutex
	waiting []*answer
	writing bool // a caller is storing a batch; the next waiting one is handed the turn
}

// answer is one keyed call's answer, waiting to be stored.
type answer struct {
	tenant    pg.Tenant
	principal string
	key       string
	response  json.RawMessage
	at        time.Time
	done      chan error    // its batch's result (buffered: the writer never waits)
	turn      chan struct{} // this caller stores the next batch (buffered)
}

// store returns once a's answer is stored, storing it (and those waiting with it) itself
// when no other caller is storing a batch, or when the one that was hands it the turn.
func (q *answers) store(ctx context.Context, s *Store, a *answer) error {
	a.done = make(chan error, 1)
	a.turn = make(chan struct{}, 1)
	q.mu.Lock()
	q.waiting = append(q.waiting, a)
	if q.writing {
		q.mu.Unlock()
		select {
		case err := <-a.done:
			return err
		case <-a.turn:
		}
	} else {
		q.writing = true
		q.mu.Unlock()
	}
	// This caller's answer is the first waiting (it was handed the turn) or the only one
	// (nobody was writing), so the batch taken from the front holds it.
	q.mu.Lock()
	n := min(len(q.waiting), MaxAnswerBatch)
	batch := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	q.mu.Unlock()
	s.writeAnswers(ctx, batch)
	q.mu.Lock()
	if len(q.waiting) > 0 {
		q.waiting[0].turn <- struct{}{}
	} else {
		q.writing = false
		q.waiting = nil
	}
	q.mu.Unlock()
	return <-a.done
}

// writeAnswers stores a batch, one transaction per agent (the key's row-level security
// tenant), the agents' transactions concurrently, and tells every answer its result.
func (s *Store) writeAnswers(ctx context.Context, batch []*answer) {
	type agentKey struct{ org, agent uuid.UUID }
	groups := map[agentKey][]*answer{}
	for _, a := range batch {
		k := agentKey{a.tenant.OrgID, a.tenant.AgentID}
		groups[k] = append(groups[k], a)
	}
	// The answers outlive their requests (a client that hung up is the one that will
	// retry, and its retry needs the answer): the writer's cancellation does not apply,
	// nor does its request's database budget, which its tool may have spent and which
	// must never decide the other callers' answers in the batch: the save has its own.
	ctx = pg.WithBudget(pg.WithoutClaim(context.WithoutCancel(ctx)), saveTimeout)
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.writeAgentAnswers(ctx, group)
			for _, a := range group {
				a.done <- err
			}
		}()
	}
	wg.Wait()
}

// writeAgentAnswers stores one agent's answers in one transaction, in one round trip.
func (s *Store) writeAgentAnswers(ctx context.Context, group []*answer) error {
	tenant := group[0].tenant
	err := s.DB.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		return tx.Pipeline(func() error {
			for _, a := range group {
				at := a.at
				if err := s.Q.IdempotencyKeySaveAnswer(ctx, tx, db.IdempotencyKeySaveAnswerParams{Response: a.response, AnsweredAt: &at,
					OrgID: tenant.OrgID, AgentID: tenant.AgentID, Principal: a.principal, Key: a.key}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("idempotency: save %d answers: %w", len(group), err)
	}
	return nil
}
