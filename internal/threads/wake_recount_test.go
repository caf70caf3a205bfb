package threads_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/wake"
)

// stepClock is a clock a test sets.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestAckKeepsTheNudgeOfAMessageThatCommittedLate: a message is stamped before its
// transaction runs, so it may commit after a newer one and be folded into a wake that
// began after its stamp. Acking the newer message recounted only the messages since the
// wake began: the wake was canceled while the older message sat unread, and no nudge
// ever came for it.
func TestAckKeepsTheNudgeOfAMessageThatCommittedLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	clk := &stepClock{t: time.Now().UTC()}
	ws := wake.New(wake.Deps{DB: e.d, Q: db.New(), Now: clk.Now, Log: slog.New(slog.DiscardHandler)})
	svc := threads.New(threads.Deps{DB: e.d, Now: clk.Now, Knowledge: e.know, Waker: ws, Secrets: e.know.Detector})
	fold := func() {
		t.Helper()
		if _, err := ws.Coalesce(ctx, clk.Now(), false); err != nil {
			t.Fatal(err)
		}
	}
	base := clk.Now()
	sent, err := svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"backend", "frontend"}, Subject: "Rollout", Body: "First."})
	if err != nil {
		t.Fatal(err)
	}
	fold()
	if _, err := svc.Ack(ctx, e.sc("backend"), sent.MessageID); err != nil {
		t.Fatal(err)
	}
	// P, stamped at +10 s, begins backend's next wake.
	clk.Set(base.Add(10 * time.Second))
	p, err := svc.Reply(ctx, e.sc("architect"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "P, the newer message."})
	if err != nil {
		t.Fatal(err)
	}
	fold()
	// Q, stamped at +5 s, commits only now and joins that wake.
	clk.Set(base.Add(5 * time.Second))
	if _, err := svc.Reply(ctx, e.sc("frontend"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "Q, older, committed late."}); err != nil {
		t.Fatal(err)
	}
	clk.Set(base.Add(11 * time.Second))
	fold()
	if _, err := svc.Ack(ctx, e.sc("backend"), p.MessageID); err != nil {
		t.Fatal(err)
	}
	var n int
	var st string
	if err := e.d.Operator(ctx, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, `SELECT count, status FROM wake WHERE member_id = $1 ORDER BY updated_at DESC LIMIT 1`, e.sc("backend").MemberID).Scan(&n, &st)
	}); err != nil {
		t.Fatal(err)
	}
	if st != "pending" || n != 1 {
		t.Fatalf("backend's wake is %s with %d after acking P, want pending with 1: Q is unread", st, n)
	}
}
