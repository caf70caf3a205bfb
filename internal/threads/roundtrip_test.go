package threads_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/threads"
)

// A send is two round trips (the recipients' lookup with BEGIN and the tenant; the
// inserts and the wake with the COMMIT) and so is a reply after its two reads (the
// thread, its recipients): the thread's touch returns nothing anyone reads and travels
// with the inserts. The wake is checked too, so a count cannot be reached by skipping it.
// Each runs one transaction, so Citus adds citusTxTrips (see wantTrips).
func TestWriteRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	trips := func(t *testing.T, call func() error) int64 { t.Helper(); return roundTrips(t, e, call) }
	var sent threads.SendResult
	t.Run("send is two round trips", func(t *testing.T) {
		n := trips(t, func() (err error) {
			sent, err = e.svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"backend"}, Subject: "Plan", Body: "first"})
			return err
		})
		if want := wantTrips(e, 2); n != want {
			t.Fatalf("%d round trips, want %d", n, want)
		}
	})
	t.Run("reply is three round trips and touches its thread", func(t *testing.T) {
		tid := uuid.MustParse(sent.ThreadID)
		e.exec(t, "UPDATE thread SET last_message_at = now() - interval '1 hour' WHERE id = $1", tid)
		queued := len(e.waker.queued)
		if n, want := trips(t, func() error {
			_, err := e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "second", NeedsHuman: false})
			return err
		}), wantTrips(e, 3); n != want {
			t.Fatalf("%d round trips, want %d (thread; recipients; touch, inserts and wake with the COMMIT)", n, want)
		}
		if e.count(t, "SELECT count(*) FROM thread WHERE id = $1 AND last_message_at > now() - interval '1 minute'", tid) != 1 {
			t.Fatal("the reply did not touch its thread")
		}
		if len(e.waker.queued) != queued+1 {
			t.Fatal("the reply queued no wake")
		}
	})
}

// Every read tool is one round trip (BEGIN, the tenant and the COMMIT travel with its
// one statement); show was three for an open thread (the thread, its messages, the parts
// composing) and two for a closed one. What each answers is checked with it. Each runs one
// transaction, so Citus adds citusTxTrips (see wantTrips).
func TestReadRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	trips := func(t *testing.T, call func() error) int64 { t.Helper(); return roundTrips(t, e, call) }
	open := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "Open one", Body: "first"})
	if _, err := e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: open.ThreadID, Body: "second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Event(ctx, e.sc("backend"), threads.EventInput{Type: "composing", Detail: json.RawMessage(`{"threadId":"` + open.ThreadID + `"}`)}); err != nil {
		t.Fatal(err)
	}
	closed := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "Closed one", Body: "only"})
	e.exec(t, "INSERT INTO composing (project_id, thread_id, member_id, expires_at) SELECT project_id, $1, id, now() + interval '1 minute' FROM membership WHERE part = 'backend'", uuid.MustParse(closed.ThreadID))
	if _, err := e.svc.Close(ctx, e.sc("architect"), threads.CloseInput{ThreadID: closed.ThreadID}); err != nil {
		t.Fatal(err)
	}

	t.Run("show of an open thread is one round trip with its messages in order and who composes", func(t *testing.T) {
		var s threads.ShowResult
		if n, want := trips(t, func() (err error) { s, err = e.svc.Show(ctx, e.sc("architect"), open.ThreadID); return err }), wantTrips(e, 1); n != want {
			t.Fatalf("%d round trips, want %d", n, want)
		}
		if s.Thread.ID != open.ThreadID || s.Thread.Subject != "Open one" || s.Thread.Status != threads.StatusOpen ||
			len(s.Messages) != 2 || s.Messages[0].Body != "first" || s.Messages[1].Body != "second" || s.Messages[1].From != "backend" ||
			len(s.Composing) != 1 || s.Composing[0] != "backend" {
			t.Fatalf("show: %+v", s)
		}
	})
	t.Run("show of a closed thread is one round trip and lists nobody composing", func(t *testing.T) {
		var s threads.ShowResult
		if n, want := trips(t, func() (err error) { s, err = e.svc.Show(ctx, e.sc("architect"), closed.ThreadID); return err }), wantTrips(e, 1); n != want {
			t.Fatalf("%d round trips, want %d", n, want)
		}
		if s.Thread.Status != threads.StatusClosed || len(s.Messages) != 1 || s.Messages[0].ID != closed.MessageID || s.Composing != nil {
			t.Fatalf("show: %+v", s)
		}
	})
	t.Run("show of no such thread is one round trip and not found", func(t *testing.T) {
		before := e.d.RoundTrips()
		_, err := e.svc.Show(ctx, e.sc("architect"), uuid.NewString())
		if a, ok := apperr.As(err); !ok || a.Reason != threads.ReasonThreadNotFound {
			t.Fatalf("err %v, want %s", err, threads.ReasonThreadNotFound)
		}
		if n, want := e.d.RoundTrips()-before, wantTrips(e, 1); n != want {
			t.Fatalf("%d round trips, want %d", n, want)
		}
	})
	t.Run("inbox, threads and roster are one round trip each", func(t *testing.T) {
		for name, call := range map[string]func() error{
			"inbox":   func() error { _, err := e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{}); return err },
			"threads": func() error { _, err := e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{}); return err },
			"roster":  func() error { _, err := e.svc.Roster(ctx, e.sc("backend")); return err },
		} {
			if n, want := trips(t, call), wantTrips(e, 1); n != want {
				t.Errorf("%s: %d round trips, want %d", name, n, want)
			}
		}
	})
}

// citusTxTrips is what a transaction costs on Citus beyond plain PostgreSQL's count: its
// BEGIN (with the statement timeout) and its tenant's SET LOCAL settings are
// simple-protocol statements sent ahead of the pipeline, one round trip each, where plain
// PostgreSQL pipelines both with the first statement (internal/pg counts the same for one
// transaction; docs/scale.md): the settings must be SET LOCAL there, which Citus replays
// on the workers where the policies are checked, and SET takes no parameters to pipeline.
const citusTxTrips = 2

// wantTrips is the round trips a call of one transaction must take: plain PostgreSQL's
// count, plus citusTxTrips on Citus. The plain count is never loosened: a round trip
// added on the request path shows on both.
func wantTrips(e *env, plain int64) int64 {
	if e.d.Citus() {
		return plain + citusTxTrips
	}
	return plain
}

// roundTrips counts the round trips call makes; it must succeed.
func roundTrips(t *testing.T, e *env, call func() error) int64 {
	t.Helper()
	before := e.d.RoundTrips()
	if err := call(); err != nil {
		t.Fatal(err)
	}
	return e.d.RoundTrips() - before
}
