package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
)

// TestAckWithdrawsTheMessageFromPendingWakes: a part that acks what it was sent is not
// nudged about it afterwards, and is not charged budget for it: acking (like closing)
// takes the acked messages out of the wakes not delivered yet.
func TestAckWithdrawsTheMessageFromPendingWakes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	arch, back := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend")
	archKey, backKey := s.key("acme/architect"), s.key("acme/backend")
	d := openSeeded(t, s)

	first := callTool(t, arch, archKey, "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy plan", "body": "Review the rollback path."})
	var sent struct {
		ThreadID  string `json:"threadId"`
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal([]byte(first.text), &sent); err != nil || sent.ThreadID == "" {
		t.Fatalf("send: %s", first.body)
	}
	second := callTool(t, arch, archKey, "reply", map[string]any{"threadId": sent.ThreadID, "body": "And the migration order."})
	var replied struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal([]byte(second.text), &replied); err != nil || replied.MessageID == "" {
		t.Fatalf("reply: %s", second.body)
	}
	// backend's pager polls: the two messages are folded into one pending wake, which is
	// held, not handed out, because backend is online (it just called whoami).
	callTool(t, back, backKey, "whoami", nil)
	if status, _ := s.nextWake(t, http.DefaultClient, backKey); status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("pager poll: %d", status)
	}
	wake := func() (status string, count int) {
		t.Helper()
		err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT w.status, w.count FROM wake w
				JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
				WHERE m.part = 'backend' ORDER BY w.created_at DESC LIMIT 1`).Scan(&status, &count)
		})
		if err != nil {
			t.Fatal(err)
		}
		return status, count
	}
	if st, n := wake(); st != "pending" || n != 2 {
		t.Fatalf("before any ack: %s with %d", st, n)
	}
	ack := func(id string) {
		t.Helper()
		if a := callTool(t, back, backKey, "ack", map[string]any{"messageId": id}); a.isErr {
			t.Fatalf("ack: %s", a.body)
		}
	}
	t.Run("acking one message takes it out of the pending wake", func(t *testing.T) {
		ack(sent.MessageID)
		if st, n := wake(); st != "pending" || n != 1 {
			t.Fatalf("after one ack: %s with %d", st, n)
		}
	})
	t.Run("acking the same message again changes nothing", func(t *testing.T) {
		ack(sent.MessageID)
		if st, n := wake(); st != "pending" || n != 1 {
			t.Fatalf("after a repeated ack: %s with %d", st, n)
		}
	})
	t.Run("acking the last one cancels the wake", func(t *testing.T) {
		ack(replied.MessageID)
		if st, n := wake(); st != "canceled" || n != 0 {
			t.Fatalf("after the last ack: %s with %d", st, n)
		}
	})
}

// TestAckingTheNewestKeepsTheWakeForAnOlderMessage: a part that acks the newest message of
// a thread (the inbox lists newest first) is still woken for the older one it has not
// read. The wake begins at its first message, which must count as unread in the recount.
func TestAckingTheNewestKeepsTheWakeForAnOlderMessage(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	arch, back := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend")
	archKey, backKey := s.key("acme/architect"), s.key("acme/backend")
	d := openSeeded(t, s)

	var sent, replied struct {
		ThreadID  string `json:"threadId"`
		MessageID string `json:"messageId"`
	}
	first := callTool(t, arch, archKey, "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy plan", "body": "Review the rollback path."})
	if err := json.Unmarshal([]byte(first.text), &sent); err != nil || sent.MessageID == "" {
		t.Fatalf("send: %s", first.body)
	}
	second := callTool(t, arch, archKey, "reply", map[string]any{"threadId": sent.ThreadID, "body": "And the migration order."})
	if err := json.Unmarshal([]byte(second.text), &replied); err != nil || replied.MessageID == "" {
		t.Fatalf("reply: %s", second.body)
	}
	callTool(t, back, backKey, "whoami", nil) // online: the pager's poll folds the wake and holds it
	if status, _ := s.nextWake(t, http.DefaultClient, backKey); status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("pager poll: %d", status)
	}
	if a := callTool(t, back, backKey, "ack", map[string]any{"messageId": replied.MessageID}); a.isErr {
		t.Fatalf("ack: %s", a.body)
	}
	var status string
	var count int
	err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT w.status, w.count FROM wake w
			JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
			WHERE m.part = 'backend' ORDER BY w.created_at DESC LIMIT 1`).Scan(&status, &count)
	})
	if err != nil {
		t.Fatal(err)
	}
	if status != "pending" || count != 1 {
		t.Fatalf("after acking the newest of two: the wake is %s with %d, want pending with 1 (the first is unread)", status, count)
	}
}

// TestAckWhileAFoldHoldsTheWake: an ack whose recount waits for a fold of the same wake
// (the pager's claim or the sweep, folding a newer message in) recounts what the fold
// left, so the wake's count stays the sum of its shares and nothing folded is dropped.
func TestAckWhileAFoldHoldsTheWake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startServer(t)
	arch, back := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend")
	archKey, backKey := s.key("acme/architect"), s.key("acme/backend")

	var first, second struct {
		ThreadID  string `json:"threadId"`
		MessageID string `json:"messageId"`
	}
	a := callTool(t, arch, archKey, "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy plan", "body": "Review the rollback path."})
	if err := json.Unmarshal([]byte(a.text), &first); err != nil || first.MessageID == "" {
		t.Fatalf("send: %s", a.body)
	}
	callTool(t, back, backKey, "whoami", nil) // online: the poll folds the first message and holds the wake
	if status, _ := s.nextWake(t, http.DefaultClient, backKey); status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("pager poll: %d", status)
	}
	b := callTool(t, arch, archKey, "reply", map[string]any{"threadId": first.ThreadID, "body": "And the migration order."})
	if err := json.Unmarshal([]byte(b.text), &second); err != nil || second.MessageID == "" {
		t.Fatalf("reply: %s", b.body)
	}

	// A fold of the reply, held open: it moves the reply's event into the wake.
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fold.Rollback(ctx) //nolint:errcheck // a no-op once committed
	if _, err := fold.Exec(ctx, `DELETE FROM wake_event WHERE item_id = $1`, second.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := fold.Exec(ctx, `UPDATE wake SET count = count + 1,
		thread_counts = jsonb_set(thread_counts, ARRAY[$1::text], to_jsonb((thread_counts->>$1::text)::int + 1))
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
	for deadline := time.Now().Add(generous); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ack never waited for the fold")
		}
	}
	if err := fold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-acked; r.err != nil || r.status != http.StatusOK || strings.Contains(r.body, `"isError":true`) {
		t.Fatalf("ack: %d %s %v", r.status, r.body, r.err)
	}
	var status string
	var count, share int
	if err := conn.QueryRow(ctx, `SELECT w.status, w.count, COALESCE((w.thread_counts->>$1::text)::int, 0) FROM wake w
		JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
		WHERE m.part = 'backend' ORDER BY w.created_at DESC LIMIT 1`, first.ThreadID).Scan(&status, &count, &share); err != nil {
		t.Fatal(err)
	}
	if status != "pending" || count != 1 || share != 1 {
		t.Fatalf("after the ack and the fold: %s with count %d and the thread's share %d, want pending with 1 and 1 (the reply)", status, count, share)
	}
}
