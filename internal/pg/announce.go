package pg

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Announcer collects the projects whose rows a service committed and announces them on a
// Postgres notification channel from Run, in batches, after the writers' transactions:
// Postgres holds one cluster-wide lock from a notifying transaction's pre-commit to the
// end of its commit, so writers that sent the NOTIFY themselves would commit one at a
// time. A set, not a queue: a busy project is announced once per batch, and nothing is
// dropped however fast projects are written. The payload is the project id only, so
// nothing of a tenant crosses the channel; listeners read what changed through the
// services, under their own scope.
type Announcer struct {
	mu      sync.Mutex
	pending map[uuid.UUID]struct{}
	signal  chan struct{} // capacity 1: "something is pending"
}

// NewAnnouncer builds an empty set.
func NewAnnouncer() *Announcer {
	return &Announcer{pending: map[uuid.UUID]struct{}{}, signal: make(chan struct{}, 1)}
}

// Add marks projects as changed now.
func (a *Announcer) Add(ids ...uuid.UUID) {
	a.mu.Lock()
	for _, id := range ids {
		a.pending[id] = struct{}{}
	}
	a.mu.Unlock()
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

// AfterCommit marks the project as changed once tx commits (never if it rolls back). A
// nil Announcer announces nothing.
func (a *Announcer) AfterCommit(tx *Tx, projectID uuid.UUID) {
	if a == nil {
		return
	}
	tx.AfterCommit(func() { a.Add(projectID) })
}

func (a *Announcer) take() []uuid.UUID {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	clear(a.pending)
	slices.SortFunc(ids, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
	return ids
}

// Run sends the projects changed since the previous batch with notify (one NOTIFY per
// project, in an operator transaction), until ctx ends. A batch that fails (the database
// is unreachable) is kept and retried a second later; a note lost with the process costs
// a dashboard one live update, which its next reconnect or the project's next change
// brings. what names the channel in the log.
func (a *Announcer) Run(ctx context.Context, d *DB, log *slog.Logger, what string, notify func(ctx context.Context, tx *Tx, ids []uuid.UUID) error) {
	if a == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.signal:
		}
		ids := a.take()
		if len(ids) == 0 {
			continue
		}
		err := d.Operator(ctx, func(tx *Tx) error { return notify(ctx, tx, ids) })
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("could not announce changed projects; retrying", "channel", what, "projects", len(ids), "error", err.Error())
		a.Add(ids...)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
