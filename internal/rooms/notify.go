package rooms

import (
	"context"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
)

// RoomChannel is the Postgres notification channel on which a room's id is announced
// after new messages (posts, memory cards, task cards) are committed in it. Every
// replica's dashboard listens to it and fetches what is new through this service; the
// payload carries no content, so nothing crosses a tenant through the channel.
const RoomChannel = "rr_room"

// roomChanged announces the room after tx commits (never if it rolls back), from
// RunNotifier rather than in tx (pg.Announcer says why). A Service built without New
// announces nothing.
func (s *Service) roomChanged(tx *pg.Tx, projectID uuid.UUID) {
	s.notes.AfterCommit(tx, projectID)
}

// RunNotifier sends one NOTIFY per room for the rooms written since the previous batch,
// until ctx ends.
func (s *Service) RunNotifier(ctx context.Context) {
	s.notes.Run(ctx, s.DB, s.log(), RoomChannel, func(ctx context.Context, tx *pg.Tx, ids []uuid.UUID) error {
		return s.Q.RoomNotifyChanged(ctx, tx, ids)
	})
}
