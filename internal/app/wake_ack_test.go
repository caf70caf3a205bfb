package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/testfix"
)

// ackScene is the ack tests' setting: architect writes to backend in project
// escalations, and backend's pager polls for its wake.
type ackScene struct {
	s                            *server
	arch, back, archKey, backKey string
}

// sentMessage is what send and reply answer.
type sentMessage struct {
	ThreadID  string `json:"threadId"`
	MessageID string `json:"messageId"`
}

func newAckScene(t *testing.T) *ackScene {
	s := startServer(t)
	return &ackScene{s: s, arch: s.threadsURL("escalations", "architect"), back: s.threadsURL("escalations", "backend"),
		archKey: s.key("acme/architect"), backKey: s.key("acme/backend")}
}

// send starts a thread from architect to backend.
func (a *ackScene) send(t *testing.T) sentMessage {
	t.Helper()
	return a.call(t, "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy plan", "body": "Review the rollback path."})
}

// reply adds architect's second message to the thread.
func (a *ackScene) reply(t *testing.T, threadID string) sentMessage {
	t.Helper()
	return a.call(t, "reply", map[string]any{"threadId": threadID, "body": "And the migration order."})
}

func (a *ackScene) call(t *testing.T, tool string, args map[string]any) sentMessage {
	t.Helper()
	r := callTool(t, a.arch, a.archKey, tool, args)
	var m sentMessage
	if err := json.Unmarshal([]byte(r.text), &m); err != nil || m.MessageID == "" {
		t.Fatalf("%s: %s", tool, r.body)
	}
	return m
}

// poll makes backend online (it calls whoami) and lets its pager poll: the poll folds
// what was sent into one pending wake and holds it, because backend is online.
func (a *ackScene) poll(t *testing.T) {
	t.Helper()
	callTool(t, a.back, a.backKey, "whoami", nil)
	if status, _ := a.s.nextWake(t, http.DefaultClient, a.backKey); status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("pager poll: %d", status)
	}
}

// twoInOneWake sends backend a thread of two messages and lets the pager fold them into
// one pending wake.
func (a *ackScene) twoInOneWake(t *testing.T) (sent, replied sentMessage) {
	t.Helper()
	sent = a.send(t)
	replied = a.reply(t, sent.ThreadID)
	a.poll(t)
	return sent, replied
}

func (a *ackScene) ack(t *testing.T, messageID string) {
	t.Helper()
	if r := callTool(t, a.back, a.backKey, "ack", map[string]any{"messageId": messageID}); r.isErr {
		t.Fatalf("ack: %s", r.body)
	}
}

// wake reads backend's newest wake: its status, its count and the share of threadID.
func (a *ackScene) wake(t *testing.T, threadID string) (status string, count, share int) {
	t.Helper()
	asOwner(t, a.s, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT w.status, w.count, COALESCE((w.thread_counts->>$1::text)::int, 0) FROM wake w
			JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
			WHERE m.part = 'backend' ORDER BY w.created_at DESC LIMIT 1`, threadID).Scan(&status, &count, &share)
	})
	return status, count, share
}

// grantUrgent gives the architect's part the urgent capability.
func (a *ackScene) grantUrgent(t *testing.T) {
	t.Helper()
	ownerExec(t, a.s, `UPDATE membership SET capabilities = '{urgent}' WHERE part = 'architect'`)
}

// urgent reads whether backend's newest wake is urgent.
func (a *ackScene) urgent(t *testing.T) (urgent bool) {
	t.Helper()
	asOwner(t, a.s, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT w.urgent FROM wake w
			JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
			WHERE m.part = 'backend' ORDER BY w.created_at DESC LIMIT 1`).Scan(&urgent)
	})
	return urgent
}

// TestAckingTheUrgentMessageEndsTheWakesUrgency: a wake is urgent (it passes a spent
// budget) on account of its urgent message; once the part has acked that message, what is
// left of the wake is not urgent, and waits for the budget like any other.
func TestAckingTheUrgentMessageEndsTheWakesUrgency(t *testing.T) {
	t.Parallel()
	a := newAckScene(t)
	a.grantUrgent(t)
	urgent := a.call(t, "send", map[string]any{"to": []string{"backend"}, "subject": "Prod is down", "body": "Roll back now.", "urgent": true})
	first := a.reply(t, urgent.ThreadID)
	a.reply(t, urgent.ThreadID)
	a.poll(t)
	if !a.urgent(t) {
		t.Fatal("the wake of an urgent message is not urgent")
	}
	t.Run("acking another message keeps the wake urgent", func(t *testing.T) {
		a.ack(t, first.MessageID)
		if st, n, _ := a.wake(t, urgent.ThreadID); st != "pending" || n != 2 || !a.urgent(t) {
			t.Fatalf("the wake is %s with %d, urgent %v; want pending with 2, urgent", st, n, a.urgent(t))
		}
	})
	t.Run("acking the urgent message ends the urgency", func(t *testing.T) {
		a.ack(t, urgent.MessageID)
		if st, n, _ := a.wake(t, urgent.ThreadID); st != "pending" || n != 1 || a.urgent(t) {
			t.Fatalf("the wake is %s with %d, urgent %v; want pending with 1, not urgent", st, n, a.urgent(t))
		}
	})
}

// TestClosingTheUrgentThreadEndsTheWakesUrgency: closing a thread takes its share out of
// the part's pending wake; when that thread held the urgent message, the rest (ordinary
// work of another thread) must not go on passing a spent budget on its account, as after
// acking it.
func TestClosingTheUrgentThreadEndsTheWakesUrgency(t *testing.T) {
	t.Parallel()
	a := newAckScene(t)
	a.grantUrgent(t)
	plain := a.send(t)
	urgent := a.call(t, "send", map[string]any{"to": []string{"backend"}, "subject": "Prod is down", "body": "Roll back now.", "urgent": true})
	a.poll(t)
	if !a.urgent(t) {
		t.Fatal("the wake of an urgent message is not urgent")
	}
	if r := callTool(t, a.arch, a.archKey, "close", map[string]any{"threadId": urgent.ThreadID}); r.isErr {
		t.Fatalf("close: %s", r.body)
	}
	if st, n, share := a.wake(t, plain.ThreadID); st != "pending" || n != 1 || share != 1 || a.urgent(t) {
		t.Fatalf("the wake is %s with %d (the plain thread's share %d), urgent %v; want pending with 1, not urgent", st, n, share, a.urgent(t))
	}
}

// TestAckWithdrawsTheMessageFromPendingWakes: a part that acks what it was sent is not
// nudged about it afterwards, and is not charged budget for it: acking (like closing)
// takes the acked messages out of the wakes not delivered yet.
func TestAckWithdrawsTheMessageFromPendingWakes(t *testing.T) {
	t.Parallel()
	a := newAckScene(t)
	sent, replied := a.twoInOneWake(t)
	if st, n, _ := a.wake(t, sent.ThreadID); st != "pending" || n != 2 {
		t.Fatalf("before any ack: %s with %d", st, n)
	}
	// The steps run in order, each on the wake the one before it left.
	for _, step := range []struct {
		name, ack, status string
		count             int
	}{
		{"acking one message takes it out of the pending wake", sent.MessageID, "pending", 1},
		{"acking the same message again changes nothing", sent.MessageID, "pending", 1},
		{"acking the last one cancels the wake", replied.MessageID, "canceled", 0},
	} {
		t.Run(step.name, func(t *testing.T) {
			a.ack(t, step.ack)
			if st, n, _ := a.wake(t, sent.ThreadID); st != step.status || n != step.count {
				t.Fatalf("the wake is %s with %d, want %s with %d", st, n, step.status, step.count)
			}
		})
	}
}

// TestAckingTheNewestKeepsTheWakeForAnOlderMessage: a part that acks the newest message of
// a thread (the inbox lists newest first) is still woken for the older one it has not
// read. The wake begins at its first message, which must count as unread in the recount.
func TestAckingTheNewestKeepsTheWakeForAnOlderMessage(t *testing.T) {
	t.Parallel()
	a := newAckScene(t)
	sent, replied := a.twoInOneWake(t)
	a.ack(t, replied.MessageID)
	if status, count, _ := a.wake(t, sent.ThreadID); status != "pending" || count != 1 {
		t.Fatalf("after acking the newest of two: the wake is %s with %d, want pending with 1 (the first is unread)", status, count)
	}
}

// TestAckWhileAFoldHoldsTheWake: an ack whose recount waits for a fold of the same wake
// (the pager's claim or the sweep, folding a newer message in) recounts what the fold
// left, so the wake's count stays the sum of its shares and nothing folded is dropped.
func TestAckWhileAFoldHoldsTheWake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newAckScene(t)
	s, back, backKey := a.s, a.back, a.backKey
	first := a.send(t)
	a.poll(t) // folds the first message and holds the wake
	second := a.reply(t, first.ThreadID)

	// A fold of the reply, held open: it moves the reply's event into the wake.
	fold := testfix.Holder(t, s.dbURL)
	if _, err := fold.Exec(ctx, `DELETE FROM wake_event WHERE item_id = $1`, second.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := fold.Exec(ctx, `UPDATE wake SET count = count + 1,
		thread_counts = jsonb_set(thread_counts, ARRAY[$1::text], ((thread_counts->>$1::text)::int + 1)::text::jsonb)
		WHERE status = 'pending' AND jsonb_exists(thread_counts, $1::text)`, first.ThreadID); err != nil {
		t.Fatal(err)
	}

	// The ack runs beside the test's goroutine, which must not fail from there.
	type result struct {
		status int
		body   string
		err    error
	}
	acked := make(chan result, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, back, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ack","arguments":{"messageId":"`+first.MessageID+`"}}}`))
		if err != nil {
			acked <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Agent-Key", backKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			acked <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		acked <- result{status: resp.StatusCode, body: string(body), err: err}
	}()
	// The ack is waiting for the fold's lock on the wake before the fold commits.
	testfix.AwaitLockWaitersAt(t, s.dbURL, 1, nil)
	if err := fold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-acked; r.err != nil || r.status != http.StatusOK || strings.Contains(r.body, `"isError":true`) {
		t.Fatalf("ack: %d %s %v", r.status, r.body, r.err)
	}
	if status, count, share := a.wake(t, first.ThreadID); status != "pending" || count != 1 || share != 1 {
		t.Fatalf("after the ack and the fold: %s with count %d and the thread's share %d, want pending with 1 and 1 (the reply)", status, count, share)
	}
}
