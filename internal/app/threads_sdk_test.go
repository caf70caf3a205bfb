package app_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/knowledge"
)

// TestGoSDKClientDrivesEveryThreadsTool walks two agents through all fourteen threads
// tools with go-sdk's client against app.Run: the path a newcomer follows in the README.
func TestGoSDKClientDrivesEveryThreadsTool(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	arch, err := connectSDK(t, s.threadsURL("escalations", "architect"), s.key("acme/architect"), "")
	if err != nil {
		t.Fatal(err)
	}
	back, err := connectSDK(t, s.threadsURL("escalations", "backend"), s.key("acme/backend"), "2025-06-18")
	if err != nil {
		t.Fatal(err)
	}
	qa, err := connectSDK(t, s.threadsURL("escalations", "qa-lead"), s.key("globex/qa-lead"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"send", "reply", "inbox", "ack", "event", "threads", "show", "close", "search", "roster", "whoami", "recall", "learn", "recall_used"}
	if got := toolNames(t, arch); strings.Join(sortedCopy(got), ",") != strings.Join(sortedCopy(want), ",") {
		t.Fatalf("threads tools %v, want the spec's fourteen %v", got, want)
	}

	sent, _ := callJSON(t, arch, "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy plan", "body": "Pushed the migration.\nCan you review the rollback path before Friday?"})
	threadID, _ := sent["threadId"].(string)
	if threadID == "" || sent["messageId"] == "" {
		t.Fatalf("send: %v", sent)
	}

	inbox, text := callJSON(t, back, "inbox", map[string]any{"unreadOnly": true})
	var bare []map[string]any
	if err := json.Unmarshal([]byte(text), &bare); err != nil || len(bare) != 1 {
		t.Fatalf("inbox text must be the bare array of the spec: %q", text)
	}
	msgs, _ := inbox["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("inbox structuredContent: %v", inbox)
	}
	m := bare[0]
	if m["threadId"] != threadID || m["from"] != "architect" || m["unread"] != true || m["subject"] != "Deploy plan" ||
		m["preview"] != "Pushed the migration. Can you review the rollback path before Friday?" {
		t.Fatalf("inbox item: %v", m)
	}
	shown, _ := callJSON(t, back, "show", map[string]any{"threadId": threadID})
	if ms, _ := shown["messages"].([]any); len(ms) != 1 || !strings.Contains(ms[0].(map[string]any)["body"].(string), "rollback path") {
		t.Fatalf("show: %v", shown)
	}
	if acked, _ := callJSON(t, back, "ack", map[string]any{"messageId": m["messageId"]}); acked["unread"] != false {
		t.Fatalf("ack: %v", acked)
	}
	if replied, _ := callJSON(t, back, "reply", map[string]any{"threadId": threadID, "body": "Rollback path reviewed: fine."}); replied["threadId"] != threadID {
		t.Fatalf("reply: %v", replied)
	}
	if list, _ := callJSON(t, arch, "threads", map[string]any{"status": "open"}); !strings.Contains(mustJSON(t, list), threadID) {
		t.Fatalf("threads: %v", list)
	}
	// qa-lead is not in the thread: search finds it for them.
	if found, _ := callJSON(t, qa, "search", map[string]any{"query": "rollback"}); !strings.Contains(mustJSON(t, found), threadID) {
		t.Fatalf("search: %v", found)
	}
	if ev, _ := callJSON(t, arch, "event", map[string]any{"type": "composing", "detail": map[string]any{"threadId": threadID}}); ev["eventId"] == nil {
		t.Fatalf("event composing: %v", ev)
	}
	if ev, _ := callJSON(t, arch, "event", map[string]any{"type": "usage", "usage": map[string]any{"model": "claude-opus-4", "input_tokens": 1234, "output_tokens": 567, "cost_usd": 0.0042}}); ev["eventId"] == nil {
		t.Fatalf("event usage: %v", ev)
	}
	if learned, _ := callJSON(t, back, "learn", map[string]any{"title": "Check rollback before deploys", "body": "Review the rollback path of every migration before a Friday deploy.", "kind": "procedure"}); learned["status"] != "candidate" {
		t.Fatalf("learn: %v", learned)
	}
	// RFC 3339 allows a lower-case t and z; learn refused such an expiresAt.
	if learned, _ := callJSON(t, back, "learn", map[string]any{"title": "Freeze before the audit", "body": "No deploys in the week before the audit.",
		"kind": "decision", "expiresAt": "2099-01-01t09:00:00z"}); learned["status"] != "candidate" {
		t.Fatalf("learn with a lower-case expiresAt: %v", learned)
	}
	// A lesson past its bound loses only the lesson: the schema refused the whole call,
	// and the thread stayed open.
	long, _ := callJSON(t, arch, "close", map[string]any{"threadId": threadID, "lesson": map[string]any{
		"title": "Too long", "body": strings.Repeat("a", 5001), "kind": "procedure"}})
	if l, _ := long["lesson"].(map[string]any); long["status"] != "closed" || l["recorded"] != false || l["code"] != "storage_failed" {
		t.Fatalf("close with a lesson past its bound: %v", long)
	}
	// That slip settles nothing: the real lesson is recorded by the next close.
	closed, _ := callJSON(t, arch, "close", map[string]any{"threadId": threadID, "lesson": map[string]any{
		"title": "Migrations need a reviewed rollback", "body": "Ask a second part to review the rollback path before deploying a migration.", "kind": "procedure"}})
	lesson, _ := closed["lesson"].(map[string]any)
	if closed["ok"] != true || closed["status"] != "closed" || lesson["recorded"] != true {
		t.Fatalf("close: %v", closed)
	}
	if again, _ := callJSON(t, back, "inbox", nil); strings.Contains(mustJSON(t, again), threadID) {
		t.Fatalf("a closed thread stayed in the inbox: %v", again)
	}

	// Candidates are never recalled; a person approves the lesson, then it is.
	if before, _ := callJSON(t, back, "recall", map[string]any{"query": "rollback review migration"}); len(entries(before)) != 0 {
		t.Fatalf("a candidate was recalled: %v", before)
	}
	d := openSeeded(t, s)
	know, err := knowledge.New(knowledge.Deps{DB: d, Q: db.New()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := know.Approve(context.Background(), s.res.Projects["escalations"].ID, uuid.MustParse(lesson["knowledgeId"].(string)), "ana"); err != nil {
		t.Fatal(err)
	}
	rec, _ := callJSON(t, back, "recall", map[string]any{"query": "rollback review migration"})
	got := entries(rec)
	if len(got) != 1 || got[0]["knowledgeId"] != lesson["knowledgeId"] {
		t.Fatalf("recall after approval: %v", rec)
	}
	if used, _ := callJSON(t, back, "recall_used", map[string]any{"queryId": rec["queryId"], "knowledgeId": got[0]["knowledgeId"]}); used["ok"] != true {
		t.Fatalf("recall_used: %v", used)
	}
	if who, _ := callJSON(t, qa, "whoami", nil); who["part"] != "qa-lead" {
		t.Fatalf("whoami: %v", who)
	}
	if r, _ := callJSON(t, qa, "roster", nil); len(r["parts"].([]any)) != 3 {
		t.Fatalf("roster: %v", r)
	}
}

func entries(v map[string]any) []map[string]any {
	raw, _ := v["entries"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		out = append(out, e.(map[string]any))
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sortedCopy(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
}
