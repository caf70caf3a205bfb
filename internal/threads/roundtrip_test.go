package threads_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/threads"
)

// A send is two round trips (the recipients' lookup with BEGIN and the tenant; the
// inserts and the wake with the COMMIT) and so is a reply after its two reads (the
// thread, its recipients): the thread's touch returns nothing anyone reads and travels
// with the inserts. The wake is checked too, so a count cannot be reached by skipping it.
func TestWriteRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	trips := func(t *testing.T, call func() error) int64 {
		t.Helper()
		before := e.d.RoundTrips()
		if err := call(); err != nil {
			t.Fatal(err)
		}
		return e.d.RoundTrips() - before
	}
	var sent threads.SendResult
	t.Run("send is two round trips", func(t *testing.T) {
		n := trips(t, func() (err error) {
			sent, err = e.svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"backend"}, Subject: "Plan", Body: "first"})
			return err
		})
		if n != 2 {
			t.Fatalf("%d round trips, want 2", n)
		}
	})
	t.Run("reply is three round trips and touches its thread", func(t *testing.T) {
		tid := uuid.MustParse(sent.ThreadID)
		e.exec(t, "UPDATE thread SET last_message_at = now() - interval '1 hour' WHERE id = $1", tid)
		queued := len(e.waker.queued)
		if n := trips(t, func() error {
			_, err := e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "second", NeedsHuman: false})
			return err
		}); n != 3 {
			t.Fatalf("%d round trips, want 3 (thread; recipients; touch, inserts and wake with the COMMIT)", n)
		}
		if e.count(t, "SELECT count(*) FROM thread WHERE id = $1 AND last_message_at > now() - interval '1 minute'", tid) != 1 {
			t.Fatal("the reply did not touch its thread")
		}
		if len(e.waker.queued) != queued+1 {
			t.Fatal("the reply queued no wake")
		}
	})
}
