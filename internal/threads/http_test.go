package threads_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/testfix"
)

// httpEnv serves the real application (routes, authentication, MCP core, toolset).
type httpEnv struct {
	*env
	t   *testing.T
	srv *httptest.Server
	id  int
}

func setupHTTP(t *testing.T) *httpEnv {
	t.Helper()
	e := setup(t)
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	cfg := config.Config{DatabaseURL: e.url, MaxBodyBytes: 4 << 20, StatementTimeout: testfix.StatementTimeout(t), SigningKey: "test-signing-key-0123456789abcdef", AttachmentMaxBytes: 1 << 20}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), e.d, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a.Handler()
	return &httpEnv{env: e, t: t, srv: srv}
}

type toolAnswer struct {
	Text       string
	Structured map[string]any
	IsError    bool
	RPCError   map[string]any
}

func (a toolAnswer) errorCode() string {
	var m struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.Text), &m)
	return m.Error.Code
}

// call runs a tool at /mcp/{code}?part={part} with an agent key.
func (h *httpEnv) call(code, part, key, tool string, args any) toolAnswer {
	h.t.Helper()
	h.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": h.id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/mcp/"+code+"?part="+url.QueryEscape(part), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Agent-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	raw := []byte(testfix.Body(h.t, resp))
	var m struct {
		Result *struct {
			Content           []struct{ Text string } `json:"content"`
			StructuredContent map[string]any          `json:"structuredContent"`
			IsError           bool                    `json:"isError"`
		} `json:"result"`
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		h.t.Fatalf("%s: HTTP %d, not JSON: %s", tool, resp.StatusCode, raw)
	}
	if m.Result == nil {
		return toolAnswer{RPCError: m.Error}
	}
	a := toolAnswer{Structured: m.Result.StructuredContent, IsError: m.Result.IsError}
	if len(m.Result.Content) == 1 {
		a.Text = m.Result.Content[0].Text
	}
	return a
}

// as calls as one of the fixture's parts, with its own key and project's code.
func (h *httpEnv) as(part, tool string, args any) toolAnswer {
	h.t.Helper()
	agent := map[string]string{"architect": "acme/architect", "backend": "acme/backend", "frontend": "acme/frontend", "reader": "acme/reader", "peter": "initech/peter"}[part]
	project := "one"
	if part == "peter" {
		project = "two"
	}
	return h.call(h.res.Projects[project].ConnectCode, part, h.res.Agents[agent].Key, tool, args)
}

func (h *httpEnv) ok(part, tool string, args any) map[string]any {
	h.t.Helper()
	a := h.as(part, tool, args)
	if a.RPCError != nil || a.IsError {
		h.t.Fatalf("%s as %s: %v %s", tool, part, a.RPCError, a.Text)
	}
	return a.Structured
}

func (h *httpEnv) refused(part, tool string, args any, code string) toolAnswer {
	h.t.Helper()
	a := h.as(part, tool, args)
	if !a.IsError || a.errorCode() != code {
		h.t.Fatalf("%s as %s: want error %s, got %+v", tool, part, code, a)
	}
	return a
}

// TestWalkThroughOverHTTP drives the fourteen tools through the real stack, the README's
// walk-through: send → inbox → show → reply → close with a lesson → approve → recall →
// recall_used, plus the other tools.
func TestWalkThroughOverHTTP(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t)
	who := h.ok("backend", "whoami", map[string]any{})
	if who["part"] != "backend" || who["project"] != "One" {
		t.Fatalf("whoami: %v", who)
	}
	if parts := h.ok("backend", "roster", map[string]any{})["parts"].([]any); len(parts) != 4 {
		t.Fatalf("roster: %v", parts)
	}
	sent := h.ok("architect", "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy plan", "body": "Pushed the migration.\nReview the rollback path?"})
	thread := sent["threadId"].(string)

	in := h.as("backend", "inbox", map[string]any{})
	msgs := in.Structured["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("inbox: %v", in.Structured)
	}
	// The text block is the bare array, exactly as the spec shows it.
	var arr []map[string]any
	if err := json.Unmarshal([]byte(in.Text), &arr); err != nil || len(arr) != 1 || arr[0]["preview"] != "Pushed the migration. Review the rollback path?" {
		t.Fatalf("inbox text mirror: %s", in.Text)
	}
	h.ok("backend", "event", map[string]any{"type": "composing", "detail": map[string]any{"threadId": thread}})
	shown := h.ok("backend", "show", map[string]any{"threadId": thread})
	if len(shown["messages"].([]any)) != 1 {
		t.Fatalf("show: %v", shown)
	}
	h.ok("backend", "ack", map[string]any{"messageId": sent["messageId"]})
	h.ok("backend", "reply", map[string]any{"threadId": thread, "body": "Rollback path is fine."})
	if th := h.ok("backend", "threads", map[string]any{"status": "open"})["threads"].([]any); len(th) != 1 {
		t.Fatalf("threads: %v", th)
	}
	if s := h.ok("frontend", "search", map[string]any{"query": "rollback"})["threads"].([]any); len(s) != 1 {
		t.Fatalf("search: %v", s)
	}
	cl := h.ok("architect", "close", map[string]any{"threadId": thread, "lesson": map[string]any{
		"title": "Review rollback before deploying migrations", "body": "Ask a second part to review the down migration before any deploy.", "kind": "procedure"}})
	lesson := cl["lesson"].(map[string]any)
	if cl["status"] != "closed" || cl["ok"] != true || lesson["recorded"] != true {
		t.Fatalf("close: %v", cl)
	}
	kid := lesson["knowledgeId"].(string)
	if r := h.ok("backend", "recall", map[string]any{"query": "rollback migrations"}); len(r["entries"].([]any)) != 0 {
		t.Fatalf("a candidate was recalled: %v", r)
	}
	if _, err := h.know.Approve(context.Background(), h.sc("architect").ProjectID, uuid.MustParse(kid), "alice"); err != nil {
		t.Fatal(err)
	}
	r := h.ok("backend", "recall", map[string]any{"query": "rollback migrations"})
	entries := r["entries"].([]any)
	if len(entries) != 1 || entries[0].(map[string]any)["knowledgeId"] != kid {
		t.Fatalf("recall: %v", r)
	}
	if u := h.ok("backend", "recall_used", map[string]any{"queryId": r["queryId"], "knowledgeId": kid}); u["ok"] != true {
		t.Fatalf("recall_used: %v", u)
	}
	h.refused("backend", "recall_used", map[string]any{"queryId": r["queryId"], "knowledgeId": kid}, "already_reported")
	l := h.ok("backend", "learn", map[string]any{"title": "Staging DB is read-only on Sundays", "body": "Backups run on Sundays; writes fail.", "kind": "pitfall"})
	if l["status"] != "candidate" {
		t.Fatalf("learn: %v", l)
	}
	ev := h.ok("backend", "event", map[string]any{"type": "limited", "detail": map[string]any{"resetAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	if ev["parked"] != true {
		t.Fatalf("limited: %v", ev)
	}
	h.ok("backend", "event", map[string]any{"type": "progress", "usage": map[string]any{"model": "m", "input_tokens": 5}})
	// The closed thread left the inbox; replies are refused with the status.
	if m := h.ok("backend", "inbox", map[string]any{})["messages"].([]any); len(m) != 0 {
		t.Fatalf("closed thread in inbox: %v", m)
	}
	h.refused("backend", "reply", map[string]any{"threadId": thread, "body": "late"}, "thread_closed")
}

func TestRefusalsAndSchemaViolationsOverHTTP(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t)
	sent := h.ok("architect", "send", map[string]any{"to": []string{"backend"}, "subject": "s", "body": "b"})
	h.refused("backend", "send", map[string]any{"to": []string{"architect"}, "subject": "s", "body": "b", "urgent": true}, "capability_required")
	h.refused("architect", "send", map[string]any{"to": []string{"ghost"}, "subject": "s", "body": "b"}, "unknown_part")
	h.refused("reader", "learn", map[string]any{"title": "t", "body": "b", "kind": "fact"}, "write_access_required")
	h.refused("backend", "event", map[string]any{"type": "limited", "detail": map[string]any{"resetAt": "soon"}}, "invalid_reset_at")
	h.refused("backend", "event", map[string]any{"type": "composing"}, "thread_required")

	// Schema violations: unknown field, wrong type, out of bounds, missing, nested.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"send", map[string]any{"to": []string{"backend"}, "subject": "s", "body": "b", "cc": "x"}},
		{"send", map[string]any{"to": "backend", "subject": "s", "body": "b"}},
		{"send", map[string]any{"to": []string{}, "subject": "s", "body": "b"}},
		{"send", map[string]any{"to": []string{"backend"}, "subject": strings.Repeat("s", 201), "body": "b"}},
		{"inbox", map[string]any{"limit": 51}},
		{"inbox", map[string]any{"limit": 0}},
		{"inbox", map[string]any{"unreadOnly": "yes"}},
		{"threads", map[string]any{"status": "archived"}},
		{"search", map[string]any{"query": "x"}},
		{"recall", map[string]any{"query": "ab", "limit": 21}},
		{"recall", map[string]any{}},
		{"close", map[string]any{"threadId": sent["threadId"], "lesson": map[string]any{"title": "t", "body": "b"}}},
		{"close", map[string]any{"threadId": sent["threadId"], "lesson": map[string]any{"title": "t", "body": "b", "kind": "fact", "extra": 1}}},
		{"event", map[string]any{"type": "progress", "usage": map[string]any{"input_tokens": 1}}},
		{"event", map[string]any{"type": "progress", "usage": map[string]any{"model": "m", "output_tokens": -1}}},
		{"ack", map[string]any{"messageId": "nope"}},
		{"whoami", map[string]any{"x": 1}},
	} {
		a := h.as("architect", c.tool, c.args)
		if !a.IsError || a.errorCode() != "invalid_argument" {
			t.Errorf("%s %v: want invalid_argument, got %+v", c.tool, c.args, a)
		}
	}
	if n := h.count(t, "SELECT count(*) FROM thread WHERE status <> 'open'"); n != 0 {
		t.Fatal("an invalid close closed the thread")
	}

	// Ids of another project answer like ids that do not exist.
	h.refused("peter", "show", map[string]any{"threadId": sent["threadId"]}, "thread_not_found")
	h.refused("peter", "reply", map[string]any{"threadId": sent["threadId"], "body": "x"}, "thread_not_found")
	h.refused("peter", "close", map[string]any{"threadId": sent["threadId"]}, "thread_not_found")
	h.refused("peter", "ack", map[string]any{"messageId": sent["messageId"]}, "message_not_found")
	h.refused("peter", "show", map[string]any{"threadId": uuid.NewString()}, "thread_not_found")
	h.refused("peter", "send", map[string]any{"to": []string{"backend"}, "subject": "s", "body": "b"}, "unknown_part")

	// Acting as another part is impossible: backend's key on architect's URL.
	code1, code2 := h.res.Projects["one"].ConnectCode, h.res.Projects["two"].ConnectCode
	a := h.call(code1, "architect", h.res.Agents["acme/backend"].Key, "inbox", map[string]any{})
	if a.RPCError == nil && !a.IsError {
		t.Fatalf("backend acted as architect: %+v", a)
	}
	// Another project's connect code does not admit this project's part, nor its key.
	if a := h.call(code2, "architect", h.res.Agents["acme/architect"].Key, "inbox", map[string]any{}); a.RPCError == nil && !a.IsError {
		t.Fatalf("another project's connect code worked: %+v", a)
	}
	if a := h.call(code1, "peter", h.res.Agents["initech/peter"].Key, "inbox", map[string]any{}); a.RPCError == nil && !a.IsError {
		t.Fatalf("a part of another project used this connect code: %+v", a)
	}
}

func TestCIConfirmRouteOverHTTP(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t)
	l := h.ok("architect", "learn", map[string]any{"title": "Go modules are vendored", "body": "The build uses the vendor directory.", "kind": "fact"})
	pid := h.sc("architect").ProjectID
	issued, err := h.know.IssueCIToken(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	tok := issued.Token
	post := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/api/projects/"+pid.String()+"/knowledge/"+l["knowledgeId"].(string)+"/confirm", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("qyt_ci_bogus"); c != http.StatusUnauthorized {
		t.Fatalf("bogus token: %d", c)
	}
	if c := post(tok); c != http.StatusOK {
		t.Fatalf("confirm: %d", c)
	}
	if r := h.ok("backend", "recall", map[string]any{"query": "vendored modules"}); len(r["entries"].([]any)) != 1 {
		t.Fatalf("recall after CI confirmation: %v", r)
	}
}

// TestBoundsAtTheLimitAndOnePastOverHTTP: each limit of docs/threads.md is accepted at
// the limit and refused one past it (invalid_argument from the schema, before the
// handler), counted in characters, not bytes.
func TestBoundsAtTheLimitAndOnePastOverHTTP(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t)
	backend := func(n int) []string {
		to := make([]string, n)
		for i := range to {
			to[i] = "backend"
		}
		return to
	}
	for _, c := range []struct {
		name, tool    string
		atLimit, past map[string]any
	}{
		{"send: 50 recipients", "send",
			map[string]any{"to": backend(50), "subject": "s", "body": "b"},
			map[string]any{"to": backend(51), "subject": "s", "body": "b"}},
		{"send: subject of 200 characters", "send",
			map[string]any{"to": []string{"backend"}, "subject": strings.Repeat("😀", 200), "body": "b"},
			map[string]any{"to": []string{"backend"}, "subject": strings.Repeat("😀", 201), "body": "b"}},
		{"send: body of 20000 characters", "send",
			map[string]any{"to": []string{"backend"}, "subject": "s", "body": strings.Repeat("日", 20000)},
			map[string]any{"to": []string{"backend"}, "subject": "s", "body": strings.Repeat("日", 20001)}},
		{"inbox: limit 50", "inbox", map[string]any{"limit": 50}, map[string]any{"limit": 51}},
		{"threads: limit 50", "threads", map[string]any{"limit": 50}, map[string]any{"limit": 51}},
		{"threads: query of 200 characters", "threads", map[string]any{"query": strings.Repeat("q", 200)}, map[string]any{"query": strings.Repeat("q", 201)}},
		{"search: query of 2 to 200 characters", "search", map[string]any{"query": "ab"}, map[string]any{"query": strings.Repeat("q", 201)}},
		{"recall: query of 500 characters, limit 20", "recall",
			map[string]any{"query": strings.Repeat("q", 500), "limit": 20},
			map[string]any{"query": strings.Repeat("q", 501), "limit": 20}},
		{"learn: title of 200 characters", "learn",
			map[string]any{"title": "t" + strings.Repeat("é", 199), "body": "the body", "kind": "fact"},
			map[string]any{"title": "t" + strings.Repeat("é", 200), "body": "the body", "kind": "fact"}},
		{"learn: body of 5000 characters", "learn",
			map[string]any{"title": "a long body", "body": strings.Repeat("b ", 2500), "kind": "fact"},
			map[string]any{"title": "a long body", "body": strings.Repeat("b ", 2500) + "b", "kind": "fact"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if a := h.as("architect", c.tool, c.atLimit); a.IsError || a.RPCError != nil {
				t.Fatalf("at the limit: %+v", a)
			}
			if a := h.as("architect", c.tool, c.past); !a.IsError || a.errorCode() != "invalid_argument" {
				t.Fatalf("one past the limit: want invalid_argument, got %+v", a)
			}
		})
	}
	t.Run("search: a query of 1 character is refused", func(t *testing.T) {
		h.refused("architect", "search", map[string]any{"query": "a"}, "invalid_argument")
	})
}
