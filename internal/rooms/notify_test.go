package rooms_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/rooms"
)

// TestRoomMessagesAreAnnounced: every replica's dashboard learns of a room's new messages
// from a NOTIFY on rooms.RoomChannel carrying the room's id, sent by the service's
// notifier once the writer has committed; a write that never commits announces nothing.
func TestRoomMessagesAreAnnounced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A bound for a broken notifier, not a speed assertion: a notification arrives in
	// milliseconds.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+rooms.RoomChannel); err != nil {
		t.Fatal(err)
	}
	go e.svc.RunNotifier(ctx)
	next := func(t *testing.T) string {
		t.Helper()
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no announcement: %v", err)
		}
		if n.Channel != rooms.RoomChannel {
			t.Fatalf("announced on %q", n.Channel)
		}
		return n.Payload
	}

	t.Run("a committed post announces its room", func(t *testing.T) {
		if _, err := e.svc.PostMessage(ctx, e.scope("architect", e.one), "hello"); err != nil {
			t.Fatal(err)
		}
		if got := next(t); got != e.one.String() {
			t.Fatalf("announced %s, want room one %s", got, e.one)
		}
	})
	t.Run("a refused post announces nothing", func(t *testing.T) {
		// A blank post is refused before anything commits; the next announcement is the
		// later post's room.
		if _, err := e.svc.PostMessage(ctx, e.scope("architect", e.one), "   "); err == nil {
			t.Fatal("a blank post was accepted")
		}
		if _, err := e.svc.PostMessage(ctx, e.scope("architect", e.two), "hello two"); err != nil {
			t.Fatal(err)
		}
		if got := next(t); got != e.two.String() {
			t.Fatalf("announced %s, want room two %s", got, e.two)
		}
	})
}
