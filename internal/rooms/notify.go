package rooms

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
)

// RoomChannel is the Postgres notification channel on which a room's id is announced
// after new messages (posts, memory cards, task cards) are committed in it. Every
// replica's dashboard listens to it and fetches what is new through this service; the
// payload carries no content, so nothing crosses a tenant through the channel.
const RoomChannel = "rr_room"

// roomNotes collects the rooms whose messages were committed since the last NOTIFY. A
// set, not a queue: a busy room is announced once per batch, and nothing is dropped
// however fast rooms are written.
type roomNotes struct {
	mu      sync.Mutex
	pending map[uuid.UUID]struct{}
	signal  chan struct{} // capacity 1: "something is pending"
}

func newRoomNotes() *roomNotes {
	return &roomNotes{pending: map[uuid.UUID]struct{}{}, signal: make(chan struct{}, 1)}
}

func (n *roomNotes) add(ids ...uuid.UUID) {
	n.mu.Lock()
	for _, id := range ids {
		n.pending[id] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *roomNotes) take() []uuid.UUID {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	clear(n.pending)
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

// roomChanged announces the room after tx commits (never if it rolls back). The NOTIFY
// is not sent in tx: Postgres holds one cluster-wide lock from a notifying transaction's
// pre-commit to the end of its commit, so notifying writers would commit one at a time.
// RunNotifier sends it. A Service built without New announces nothing.
func (s *Service) roomChanged(tx *pg.Tx, projectID uuid.UUID) {
	if s.notes == nil {
		return
	}
	tx.AfterCommit(func() { s.notes.add(projectID) })
}

// RunNotifier sends one NOTIFY per room for the rooms written since the previous batch,
// until ctx ends. A batch that fails (the database is unreachable) is kept and retried a
// second later; a note lost with the process costs a dashboard one live update, which
// its next reconnect or the room's next message brings.
func (s *Service) RunNotifier(ctx context.Context) {
	if s.notes == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.notes.signal:
		}
		ids := s.notes.take()
		if len(ids) == 0 {
			continue
		}
		err := s.DB.Operator(ctx, func(tx *pg.Tx) error { return s.Q.RoomNotifyChanged(ctx, tx, ids) })
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.log().Warn("rooms: could not announce new room messages; retrying", "rooms", len(ids), "error", err.Error())
		s.notes.add(ids...)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
