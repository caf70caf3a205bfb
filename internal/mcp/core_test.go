package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/apperr"
)

// post sends one JSON-RPC message in the handshake era and decodes the answer.
func post(t *testing.T, h http.Handler, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-Key", "good")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("response is not JSON: %v: %s", err, rec.Body)
		}
	}
	return rec.Code, out
}

func callBody(tool, args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// toolText returns a tools/call result's text and isError.
func toolText(t *testing.T, resp map[string]any) (string, bool) {
	t.Helper()
	res, ok := resp["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %v", resp)
	}
	content := res["content"].([]any)
	if len(content) != 1 {
		t.Fatalf("want one content block, got %v", content)
	}
	return content[0].(map[string]any)["text"].(string), res["isError"].(bool)
}

// captureEndpoint has one strict tool whose handler records what it was given.
func captureEndpoint(f Format, seen *[]json.RawMessage, mu *sync.Mutex) Endpoint[testScope] {
	ep := testEndpoint("capture", f)
	ep.Tools = []Tool[testScope]{{
		Name: "strict", Description: "Records its arguments.",
		InputSchema: json.RawMessage(echoSchema),
		Handler: func(_ context.Context, _ testScope, args json.RawMessage) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			*seen = append(*seen, args)
			return map[string]any{"ok": true}, nil
		},
	}}
	return ep
}

func TestValidation(t *testing.T) {
	var (
		seen []json.RawMessage
		mu   sync.Mutex
	)
	h, err := NewHandler(captureEndpoint(ThreadsFormat, &seen, &mu), Options{})
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name, args, want string
	}{
		{"unknown property", `{"query":"a","room_id":"r"}`, `unknown argument "room_id" (allowed: day, deadline, lesson, limit, priority, query, tags)`},
		{"wrong type", `{"limit":"ten"}`, `argument "limit" must be an integer (got "ten")`},
		{"above maximum", `{"limit":51}`, `argument "limit" must be at most 50 (got 51)`},
		{"below minimum", `{"limit":0}`, `argument "limit" must be at least 1 (got 0)`},
		{"not an integer", `{"limit":2.5}`, `argument "limit" must be an integer (got 2.5)`},
		{"too long", `{"query":"123456789012345678901"}`, `argument "query" must be at most 20 characters long (got 21)`},
		{"empty", `{"query":""}`, `argument "query" must not be empty`},
		{"enum", `{"priority":"urgent"}`, `argument "priority" must be one of "low", "normal", "high" (got "urgent")`},
		{"too many items", `{"tags":["a","b","c","d"]}`, `argument "tags" must have at most 3 items (got 4)`},
		{"item too long", `{"tags":["a","bbbbbbbbbbbb"]}`, `argument "tags[1]" must be at most 10 characters long (got 12)`},
		{"nested required", `{"lesson":{}}`, `missing required argument "lesson.title"`},
		{"nested unknown", `{"lesson":{"title":"t","x":1}}`, `unknown argument "lesson.x" (allowed: kind, title)`},
		{"date-time", `{"deadline":"2026-09-12 10:00"}`, `argument "deadline" must be an RFC 3339 date-time such as 2026-09-12T10:00:00Z (got "2026-09-12 10:00")`},
		{"a member named twice", `{"query":"a","query":"b"}`, `argument "query" must not be given twice`},
		{"date", `{"day":"12/09/2026"}`, `argument "day" must be a date in the form YYYY-MM-DD (got "12/09/2026")`},
		{"not an object", `"query"`, `arguments must be a JSON object`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := post(t, h, "/", callBody("strict", tc.args))
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200 (a validation failure is a tool error)", status)
			}
			if resp["error"] != nil {
				t.Fatalf("got a protocol error %v, want a tool error", resp["error"])
			}
			text, isErr := toolText(t, resp)
			if !isErr {
				t.Fatalf("isError false for %s", tc.args)
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(text), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != "invalid_argument" || body.Error.Message != tc.want {
				t.Errorf("got %s %q\nwant invalid_argument %q", body.Error.Code, body.Error.Message, tc.want)
			}
		})
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("the handler ran on invalid input: %s", seen)
	}
	mu.Unlock()

	accepted := []struct{ name, args, want string }{
		{"defaults applied", `{}`, `{"limit":10,"priority":"normal"}`},
		{"given values kept", `{"limit":3,"priority":"high"}`, `{"limit":3,"priority":"high"}`},
		{"nested default inside a present object", `{"lesson":{"title":"t"}}`, `{"lesson":{"kind":"fact","title":"t"},"limit":10,"priority":"normal"}`},
		{"integral float is an integer", `{"limit":5.0}`, `{"limit":5,"priority":"normal"}`},
		// RFC 3339 allows a lower-case t and z; the checker refused them.
		{"date-time in lower case", `{"deadline":"2026-09-12t10:00:00z"}`, `{"deadline":"2026-09-12t10:00:00z","limit":10,"priority":"normal"}`},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			_, resp := post(t, h, "/", callBody("strict", tc.args))
			if _, isErr := toolText(t, resp); isErr {
				t.Fatalf("refused: %v", resp)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || string(seen[0]) != tc.want {
				t.Errorf("handler saw %s, want %s", seen, tc.want)
			}
		})
	}
}

func TestErrorCodeMapping(t *testing.T) {
	codes := []apperr.Code{apperr.Invalid, apperr.NotFound, apperr.Forbidden, apperr.Unauthenticated,
		apperr.Conflict, apperr.RateLimited, apperr.Unavailable, apperr.Internal, apperr.Code("surprise")}
	want := map[Format][]string{
		ThreadsFormat: {"invalid_argument", "not_found", "forbidden", "unauthenticated", "conflict", "rate_limited", "unavailable", "internal", "internal"},
		DeskFormat:    {"INVALID_ARGUMENT", "NOT_FOUND", "FORBIDDEN", "UNAUTHENTICATED", "CONFLICT", "RATE_LIMITED", "UPSTREAM_UNAVAILABLE", "INTERNAL", "INTERNAL"},
	}
	for f, codesWant := range want {
		for i, c := range codes {
			if got := f.errorCode(&apperr.Error{Code: c}); got != codesWant[i] {
				t.Errorf("%s %s: got %q want %q", f, c, got, codesWant[i])
			}
			if c != apperr.Internal {
				if got := f.errorCode(&apperr.Error{Code: c, Reason: "CURSOR_EXPIRED"}); got != "CURSOR_EXPIRED" {
					t.Errorf("%s %s with a reason: got %q", f, c, got)
				}
			}
		}
	}
	// Details merge into desk errors only, after code and message, and cannot replace them.
	e := &apperr.Error{Code: apperr.RateLimited, Message: "slow down", Details: map[string]any{"retry_after_seconds": 12, "code": "HIJACK", "a": 1}}
	if got := DeskFormat.failure(e).Content[0].Text; got != `{"error":{"code":"RATE_LIMITED","message":"slow down","a":1,"retry_after_seconds":12}}` {
		t.Errorf("desk: %s", got)
	}
	if got := ThreadsFormat.failure(e).Content[0].Text; got != `{"error":{"code":"rate_limited","message":"slow down"}}` {
		t.Errorf("threads: %s", got)
	}
	if got := RoomsFormat.failure(e).Content[0].Text; got != "Error: slow down" {
		t.Errorf("rooms: %s", got)
	}
	// Details that cannot be encoded are dropped, the error itself still goes out.
	bad := &apperr.Error{Code: apperr.Conflict, Message: "m", Details: map[string]any{"ch": make(chan int)}}
	if got := DeskFormat.failure(bad).Content[0].Text; got != `{"error":{"code":"CONFLICT","message":"m"}}` {
		t.Errorf("desk with bad details: %s", got)
	}
}

func TestInternalErrorsAreLoggedNotSent(t *testing.T) {
	var logs bytes.Buffer
	var calls callLog
	ep := testEndpoint("threads", ThreadsFormat)
	h, err := NewHandler(ep, Options{
		Logger:     slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnToolCall: calls.observe,
	})
	if err != nil {
		t.Fatal(err)
	}
	idRe := regexp.MustCompile(`^internal error \(request id: ([0-9a-f]{16})\)$`)
	for _, tool := range []string{"oops", "crash"} {
		_, resp := post(t, h, "/", callBody(tool, `{}`))
		text, isErr := toolText(t, resp)
		if !isErr {
			t.Fatalf("%s: not an error", tool)
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(text), &body); err != nil {
			t.Fatal(err)
		}
		m := idRe.FindStringSubmatch(body.Error.Message)
		if body.Error.Code != "internal" || m == nil {
			t.Fatalf("%s: got %+v, want code internal and a generated request id", tool, body.Error)
		}
		if !strings.Contains(logs.String(), m[1]) {
			t.Errorf("%s: request id %s not in the log", tool, m[1])
		}
		if _, ok := resp["result"].(map[string]any)["structuredContent"]; ok {
			t.Errorf("%s: an error result carries structuredContent", tool)
		}
	}
	if !strings.Contains(logs.String(), "hunter2") || !strings.Contains(logs.String(), "nil map write in crash") {
		t.Errorf("causes missing from the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("panic stack missing from the log")
	}
	_, resp := post(t, h, "/", callBody("fail", `{"code":"conflict","message":"closed","reason":"thread_closed"}`))
	if text, _ := toolText(t, resp); strings.Contains(text, "cause that must stay in the log") {
		t.Errorf("a cause leaked: %s", text)
	}
	for _, c := range []struct{ tool, args string }{
		{"search", `{"query":"hello"}`}, {"search", `{}`}, {"fail", `{"code":"unavailable","message":"m"}`},
		{"fail", `{"code":"invalid","message":"m"}`}, {"typed", `{"bad":true}`}, {"nope", `{}`},
	} {
		post(t, h, "/", callBody(c.tool, c.args))
	}
	want := []string{
		"threads/oops=internal", "threads/crash=internal", "threads/fail=tool_error",
		"threads/search=ok", "threads/search=invalid", "threads/fail=unavailable",
		"threads/fail=invalid", "threads/typed=internal",
	}
	if got := calls.list(); !slices.Equal(got, want) {
		t.Errorf("OnToolCall outcomes:\n got %v\nwant %v", got, want)
	}
}

func TestNewHandlerRejectsBrokenEndpoints(t *testing.T) {
	tool := func(mod func(*Tool[testScope])) Endpoint[testScope] {
		ep := testEndpoint("bad", ThreadsFormat)
		tl := Tool[testScope]{
			Name: "t", Description: "d", InputSchema: json.RawMessage(searchSchema),
			Handler: func(context.Context, testScope, json.RawMessage) (any, error) { return nil, nil },
		}
		mod(&tl)
		ep.Tools = []Tool[testScope]{tl}
		return ep
	}
	cases := map[string]struct {
		ep   Endpoint[testScope]
		want string
	}{
		"open schema":     {tool(func(t *Tool[testScope]) { t.InputSchema = json.RawMessage(`{"type":"object"}`) }), `additionalProperties": false`},
		"non-object root": {tool(func(t *Tool[testScope]) { t.InputSchema = json.RawMessage(`{"type":"string"}`) }), `"type": "object"`},
		"invalid JSON":    {tool(func(t *Tool[testScope]) { t.InputSchema = json.RawMessage(`{"type":`) }), "compile schema"},
		"bad default": {tool(func(t *Tool[testScope]) {
			t.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":5,"default":9}},"additionalProperties":false}`)
		}), "input schema"},
		"bad name":          {tool(func(t *Tool[testScope]) { t.Name = "has space" }), "name must be"},
		"no description":    {tool(func(t *Tool[testScope]) { t.Description = "" }), "description is required"},
		"no handler":        {tool(func(t *Tool[testScope]) { t.Handler = nil }), "handler is required"},
		"bad output schema": {tool(func(t *Tool[testScope]) { t.OutputSchema = json.RawMessage(`[]`) }), "output schema"},
		"no authenticate":   {func() Endpoint[testScope] { ep := testEndpoint("x", DeskFormat); ep.Authenticate = nil; return ep }(), "Authenticate is required"},
		"no format":         {func() Endpoint[testScope] { ep := testEndpoint("x", DeskFormat); ep.Format = 0; return ep }(), "unknown format"},
		"no name":           {func() Endpoint[testScope] { ep := testEndpoint("x", DeskFormat); ep.Name = ""; return ep }(), "name is required"},
		"no server version": {func() Endpoint[testScope] { ep := testEndpoint("x", DeskFormat); ep.ServerVersion = ""; return ep }(), "ServerVersion"},
		"rooms output schema": {func() Endpoint[testScope] {
			ep := testEndpoint("x", RoomsFormat)
			ep.Tools = testTools(DeskFormat)
			return ep
		}(), "cannot declare an output schema"},
		"duplicate": {func() Endpoint[testScope] {
			ep := testEndpoint("x", DeskFormat)
			ep.Tools = append(ep.Tools, ep.Tools[0])
			return ep
		}(), "declared twice"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewHandler(c.ep, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestToolsListJSON checks the snapshot function against its golden file and against
// what tools/list really answers, so the snapshot the lead keeps under api/ cannot drift
// from the wire.
func TestToolsListJSON(t *testing.T) {
	ep := testEndpoint("threads", ThreadsFormat)
	got, err := ToolsListJSON(ep)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ToolsListJSON(ep)
	if !bytes.Equal(got, again) {
		t.Fatal("ToolsListJSON is not stable")
	}
	const file = "testdata/tools_list_threads.json"
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("ToolsListJSON differs from %s (run with -update to accept):\n%s", file, got)
	}
	h, err := NewHandler(ep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("X-Test-Key", "good")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var wire struct{ Result json.RawMessage }
	if err := json.Unmarshal(rec.Body.Bytes(), &wire); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, got); err != nil {
		t.Fatal(err)
	}
	if compact.String() != string(wire.Result) {
		t.Errorf("snapshot and wire differ:\n%s\n%s", compact.String(), wire.Result)
	}
	if _, err := ToolsListJSON(Endpoint[testScope]{Tools: []Tool[testScope]{{Name: "x"}}}); err == nil {
		t.Error("ToolsListJSON accepted a broken tool")
	}
}

func TestAnnotationsAlwaysStated(t *testing.T) {
	h, err := NewHandler(testEndpoint("rooms", RoomsFormat), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, resp := post(t, h, "/", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	for _, tl := range resp["result"].(map[string]any)["tools"].([]any) {
		ann := tl.(map[string]any)["annotations"].(map[string]any)
		for _, k := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
			if _, ok := ann[k].(bool); !ok {
				t.Errorf("%v: %s missing", tl.(map[string]any)["name"], k)
			}
		}
		if ann["openWorldHint"] != false {
			t.Errorf("%v: openWorldHint is not false", tl.(map[string]any)["name"])
		}
	}
}

func TestCustomFormatChecker(t *testing.T) {
	ep := testEndpoint("rooms", RoomsFormat)
	ep.Tools = []Tool[testScope]{{
		Name: "slug", Description: "d",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","format":"slug"},"d":{"type":"string","format":"date"}},"additionalProperties":false}`),
		Handler:     func(context.Context, testScope, json.RawMessage) (any, error) { return "ok", nil },
	}}
	h, err := NewHandler(ep, Options{Formats: map[string]FormatChecker{
		"slug": func(s string) error {
			if strings.ToLower(s) != s {
				return errors.New("must be lower case")
			}
			return nil
		},
		"date": func(string) error { return nil }, // replaces the built-in
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, resp := post(t, h, "/", callBody("slug", `{"s":"QA-Lead"}`))
	if text, _ := toolText(t, resp); text != `Error: argument "s" must be lower case (got "QA-Lead")` {
		t.Errorf("got %s", text)
	}
	_, resp = post(t, h, "/", callBody("slug", `{"s":"qa-lead","d":"whenever"}`))
	if text, isErr := toolText(t, resp); isErr {
		t.Errorf("replaced checker not used: %s", text)
	}
}

func TestConcurrentRequests(t *testing.T) {
	h := newTestMux(t, nil)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			body := callBody("echo", `{"limit":`+string(rune('1'+i%9))+`}`)
			req := httptest.NewRequest(http.MethodPost, "/threads", strings.NewReader(body))
			req.Header.Set("X-Test-Key", "good")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `\"limit\":`+string(rune('1'+i%9))) {
				t.Errorf("request %d: %d %s", i, rec.Code, rec.Body)
			}
		})
	}
	wg.Wait()
}

func TestNoSessionIDEver(t *testing.T) {
	h := newTestMux(t, nil)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/rooms", strings.NewReader(body))
		req.Header.Set("X-Test-Key", "good")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if v := rec.Header().Get("Mcp-Session-Id"); v != "" {
			t.Errorf("session id issued: %s", v)
		}
		if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusAccepted && ct != "application/json" {
			t.Errorf("content type %q", ct)
		}
	}
}

// TestUnavailableAuthenticationWithoutAMessage: a refusal because authentication is
// unavailable answers 503 with Retry-After even when there is no JSON-RPC message to echo
// (a GET with a credential, an empty or unreadable body), never a recovered panic.
func TestUnavailableAuthenticationWithoutAMessage(t *testing.T) {
	h := newTestMux(t, nil)
	for _, c := range []struct{ name, method, body string }{
		{"a GET with a credential", http.MethodGet, ""},
		{"a POST with an empty body", http.MethodPost, ""},
		{"a POST whose body is a batch", http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, "/threads", strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer unavailable")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "2" {
				t.Fatalf("%d Retry-After %q %s; want 503 with Retry-After 2", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			}
		})
	}
}

// TestAnAbandonedRequestIsNoInternalError: a client that cut its body short (or reset
// the connection, or trickled it past the read timeout) got 200 "internal error" and
// left an ERROR line: net/http cancels the request's context when the read fails, and
// the cached caller's check then ran on it. The body's failure is answered as such, and
// a check that fails because the request was abandoned is not logged as an error.
func TestAnAbandonedRequestIsNoInternalError(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	ep := testEndpoint("threads", ThreadsFormat)
	ep.Provisional = &Provisional[testScope]{
		Defer: func(ctx context.Context, _ testScope) context.Context { return ctx },
		Settle: func(ctx context.Context, _ *http.Request, s testScope) (testScope, bool, error) {
			if err := ctx.Err(); err != nil {
				return s, false, apperr.Wrap(apperr.Internal, "internal error", err) // as pg.Classify makes it
			}
			return s, true, nil
		},
	}
	h, err := NewHandler(ep, Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	abandoned := func(body io.Reader) *httptest.ResponseRecorder {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // as net/http does once the body's read fails
		req := httptest.NewRequest(http.MethodPost, "/", body).WithContext(ctx)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Key", "good")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	t.Run("a body cut short is a parse error", func(t *testing.T) {
		rec := abandoned(io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"pi`), iotest.ErrReader(io.ErrUnexpectedEOF)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":-32700`) {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	t.Run("a check that fails because the request was abandoned is not an error in the log", func(t *testing.T) {
		abandoned(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if strings.Contains(logs.String(), `"level":"ERROR"`) {
			t.Fatalf("an ERROR line: %s", logs.String())
		}
	})
}

// TestALongNameIsNotEchoedWhole: an error names what the client sent (an unknown method,
// an unknown tool) but at most 200 bytes of it: a 100 KB method name came back whole in
// the answer and in the log.
func TestALongNameIsNotEchoedWhole(t *testing.T) {
	h := newTestMux(t, nil)
	long := strings.Repeat("é", 50_000) // two bytes a character: cut at a character's start
	for name, body := range map[string]string{
		"an unknown method": `{"jsonrpc":"2.0","id":1,"method":"` + long + `"}`,
		"an unknown tool":   callBody(long, `{}`),
	} {
		t.Run(name, func(t *testing.T) {
			_, resp := post(t, h, "/rooms", body)
			msg, _ := resp["error"].(map[string]any)["message"].(string)
			if msg == "" || len(msg) > 400 || !strings.Contains(msg, "é…") || !utf8.ValidString(msg) {
				t.Fatalf("%d bytes: %.300q", len(msg), msg)
			}
		})
	}
}
