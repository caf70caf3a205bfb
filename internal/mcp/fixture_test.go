package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
)

// testScope is what the fake endpoints' Authenticate resolves.
type testScope struct{ Agent string }

const testRequestID = "req-test"

// authenticate accepts the key "good" and maps a few other keys to each refusal the
// core must shape.
func authenticate(_ context.Context, r *http.Request) (testScope, error) {
	key := r.Header.Get("X-Test-Key")
	if key == "" {
		key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	switch key {
	case "good":
		return testScope{Agent: "architect"}, nil
	case "":
		return testScope{}, apperr.New(apperr.Unauthenticated, "Missing credential: send X-Agent-Key or Authorization: Bearer")
	case "forbidden":
		return testScope{}, apperr.New(apperr.Forbidden, "Agent is not a participant in this room")
	case "unavailable":
		e := apperr.Wrap(apperr.Unavailable, "authentication is temporarily unavailable, retry shortly", errors.New("pool: timeout"))
		e.Details = map[string]any{"retry_after_seconds": 2}
		return testScope{}, e
	case "ratelimited":
		e := apperr.New(apperr.RateLimited, "Too many failed attempts")
		e.Details = map[string]any{"retry_after_seconds": 30}
		return testScope{}, e
	case "broken":
		return testScope{}, errors.New("auth: decrypt key table: cipher: message authentication failed")
	}
	return testScope{}, apperr.New(apperr.Unauthenticated, "Invalid credential")
}

func challenge(_ *http.Request, e *apperr.Error) string {
	if e.Code == apperr.Forbidden {
		return ""
	}
	return `Bearer resource_metadata="https://relay.test/.well-known/oauth-protected-resource/api/mcp", scope="rooms"`
}

const echoSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 20},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
    "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
    "deadline": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
    "lesson": {
      "type": "object",
      "properties": {
        "title": {"type": "string", "minLength": 1},
        "kind": {"type": "string", "enum": ["fact", "pitfall"], "default": "fact"}
      },
      "required": ["title"],
      "additionalProperties": false
    }
  },
  "additionalProperties": false
}`

const searchSchema = `{"type":"object","properties":{"query":{"type":"string","minLength":2,"maxLength":200}},"required":["query"],"additionalProperties":false}`

const failSchema = `{
  "type": "object",
  "properties": {
    "code": {"type": "string", "enum": ["invalid", "not_found", "forbidden", "unauthenticated", "conflict", "rate_limited", "unavailable", "internal"]},
    "message": {"type": "string"},
    "reason": {"type": "string"},
    "retry_after_seconds": {"type": "integer"}
  },
  "required": ["code", "message"],
  "additionalProperties": false
}`

const typedSchema = `{"type":"object","properties":{"bad":{"type":"boolean","default":false}},"additionalProperties":false}`

const typedOutput = `{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}`

// testTools is one small toolset with a tool for each path through the core.
func testTools(f Format) []Tool[testScope] {
	tools := []Tool[testScope]{
		{
			Name: "echo", Title: "Echo", Description: "Returns the arguments it received, defaults applied.",
			InputSchema: json.RawMessage(echoSchema),
			Annotations: Annotations{ReadOnly: true, Idempotent: true},
			Handler: func(_ context.Context, s testScope, args json.RawMessage) (any, error) {
				return map[string]any{"agent": s.Agent, "args": args}, nil
			},
		},
		{
			Name: "search", Title: "Search", Description: "Needs a query.",
			InputSchema: json.RawMessage(searchSchema),
			Annotations: Annotations{ReadOnly: true},
			Handler: func(_ context.Context, _ testScope, args json.RawMessage) (any, error) {
				var a struct{ Query string }
				if err := json.Unmarshal(args, &a); err != nil {
					return nil, err
				}
				return map[string]any{"found": 0, "query": a.Query, "entries": []any{}}, nil
			},
		},
		{
			Name: "fail", Title: "Fail", Description: "Fails with the apperr it is told to.",
			InputSchema: json.RawMessage(failSchema),
			Annotations: Annotations{Destructive: true},
			Handler: func(_ context.Context, _ testScope, args json.RawMessage) (any, error) {
				var a struct {
					Code, Message, Reason string
					Retry                 int `json:"retry_after_seconds"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return nil, err
				}
				e := apperr.Wrap(apperr.Code(a.Code), a.Message, errors.New("cause that must stay in the log"))
				e.Reason = a.Reason
				if a.Retry > 0 {
					e.Details = map[string]any{"retry_after_seconds": a.Retry}
				}
				return nil, e
			},
		},
		{
			Name: "oops", Title: "Oops", Description: "Returns an error that is not an apperr.",
			Handler: func(context.Context, testScope, json.RawMessage) (any, error) {
				return nil, fmt.Errorf("store: %w", errors.New("dial 10.0.0.5:5432: password authentication failed for hunter2"))
			},
		},
		{
			Name: "crash", Title: "Crash", Description: "Panics.",
			Handler: func(context.Context, testScope, json.RawMessage) (any, error) {
				panic("nil map write in crash")
			},
		},
		{
			Name: "inbox", Title: "Inbox", Description: "Structured content whose text mirror differs.",
			Annotations: Annotations{ReadOnly: true, Idempotent: true},
			Handler: func(context.Context, testScope, json.RawMessage) (any, error) {
				msgs := []map[string]any{{"messageId": "m1", "preview": "a <b> & c"}}
				return Structured{Object: map[string]any{"messages": msgs}, Text: msgs}, nil
			},
		},
		{
			Name: "list", Title: "List", Description: "Returns a bare array.",
			Annotations: Annotations{ReadOnly: true},
			Handler: func(context.Context, testScope, json.RawMessage) (any, error) {
				return []string{"a", "b"}, nil
			},
		},
	}
	if f.structured() {
		tools = append(tools, Tool[testScope]{
			Name: "typed", Title: "Typed", Description: "Declares an output schema; bad=true breaks it.",
			InputSchema:  json.RawMessage(typedSchema),
			OutputSchema: json.RawMessage(typedOutput),
			Annotations:  Annotations{ReadOnly: true, Idempotent: true},
			Handler: func(_ context.Context, _ testScope, args json.RawMessage) (any, error) {
				var a struct{ Bad bool }
				if err := json.Unmarshal(args, &a); err != nil {
					return nil, err
				}
				if a.Bad {
					return map[string]any{"count": "three"}, nil
				}
				return map[string]any{"count": 3}, nil
			},
		})
	}
	return tools
}

func testEndpoint(name string, f Format) Endpoint[testScope] {
	ep := Endpoint[testScope]{
		Name:          name,
		Service:       "relayroom-mcp",
		ServerName:    "relayroom-" + name,
		ServerVersion: "0.0.0-test",
		Instructions:  "Test endpoint " + name + ".",
		Authenticate:  authenticate,
		Challenge:     challenge,
		Tools:         testTools(f),
		Format:        f,
	}
	if f == RoomsFormat {
		ep.Describe = func(*http.Request) (map[string]any, error) {
			return map[string]any{"project_id": "p-123", "status": "overridden?"}, nil
		}
	}
	return ep
}

// callLog records OnToolCall observations.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) observe(_ context.Context, endpoint, tool, outcome string, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, endpoint+"/"+tool+"="+outcome)
}

func (c *callLog) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// newTestMux serves the three formats, plus a rooms endpoint with a tiny body limit.
func newTestMux(t testing.TB, calls *callLog) http.Handler {
	t.Helper()
	opts := Options{RequestID: func(context.Context) string { return testRequestID }}
	if calls != nil {
		opts.OnToolCall = calls.observe
	}
	mux := http.NewServeMux()
	for path, f := range map[string]Format{"rooms": RoomsFormat, "threads": ThreadsFormat, "desk": DeskFormat} {
		h, err := NewHandler(testEndpoint(path, f), opts)
		if err != nil {
			t.Fatalf("NewHandler(%s): %v", path, err)
		}
		mux.Handle("/"+path, h)
	}
	small := opts
	small.MaxBodyBytes = 256
	h, err := NewHandler(testEndpoint("small", RoomsFormat), small)
	if err != nil {
		t.Fatalf("NewHandler(small): %v", err)
	}
	mux.Handle("/small", h)
	return mux
}
