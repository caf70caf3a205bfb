package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

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
