package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// echoArgs is the Go form of echoSchema: the declared tool must come out as the
// hand-written one, byte for byte, and validate the same way.
type echoArgs struct {
	Query    string        `json:"query,omitempty"`
	Limit    int           `json:"limit,omitempty"`
	Priority string        `json:"priority,omitempty"`
	Deadline *wiretime.Arg `json:"deadline,omitempty"`
	Day      string        `json:"day,omitempty"`
	Tags     []string      `json:"tags,omitempty"`
	Lesson   *struct {
		Title string `json:"title"`
		Kind  string `json:"kind,omitempty"`
	} `json:"lesson,omitempty"`
}

const (
	echoMaxLimit     = 50
	echoDefaultLimit = 10
)

func declaredEcho(h func(context.Context, testScope, echoArgs) (any, error)) Tool[testScope] {
	return NewTool(Tool[testScope]{Name: "strict", Description: "Records its arguments."}, h,
		Prop("query", MinLength(1), MaxLength(20)),
		Prop("limit", Minimum(1), Maximum(echoMaxLimit), Default(echoDefaultLimit)),
		Prop("priority", Enum("low", "normal", "high"), Default("normal")),
		Prop("deadline", StringFormat("date-time")),
		Prop("day", StringFormat("date")),
		Prop("tags", Items(MaxLength(10)), MaxItems(3)),
		Prop("lesson",
			Prop("title", MinLength(1)),
			Prop("kind", Enum("fact", "pitfall"), Default("fact"))),
	)
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDeclaredSchema(t *testing.T) {
	t.Parallel()
	t.Run("equals the hand-written schema byte for byte", func(t *testing.T) {
		tool := declaredEcho(func(context.Context, testScope, echoArgs) (any, error) { return nil, nil })
		if tool.err != nil {
			t.Fatal(tool.err)
		}
		if got, want := string(tool.InputSchema), compact(t, echoSchema); got != want {
			t.Errorf("derived schema\n got %s\nwant %s", got, want)
		}
	})
	t.Run("a struct without fields takes exactly {}", func(t *testing.T) {
		tool := NewTool(Tool[testScope]{Name: "none", Description: "No arguments."},
			func(context.Context, testScope, struct{}) (any, error) { return nil, nil })
		if got := string(tool.InputSchema); got != noArgumentsSchema {
			t.Errorf("got %s, want %s", got, noArgumentsSchema)
		}
	})
	t.Run("fields without omitempty are required, in field order", func(t *testing.T) {
		tool := NewTool(Tool[testScope]{Name: "req", Description: "Two required."},
			func(context.Context, testScope, struct {
				B string `json:"b"`
				A string `json:"a"`
				C bool   `json:"c,omitempty"`
			}) (any, error) {
				return nil, nil
			}, Prop("a", Description("<a> & more")))
		want := `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string","description":"<a> & more"},"c":{"type":"boolean"}},"required":["b","a"],"additionalProperties":false}`
		if got := string(tool.InputSchema); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("keywords are written in the order declared", func(t *testing.T) {
		tool := NewTool(Tool[testScope]{Name: "order", Description: "Order."},
			func(context.Context, testScope, struct {
				To []string `json:"to"`
			}) (any, error) {
				return nil, nil
			}, Prop("to", Description("d"), MinItems(1), MaxItems(2), Items(MaxLength(3), MinLength(1))))
		want := `{"type":"object","properties":{"to":{"type":"array","description":"d","minItems":1,"maxItems":2,"items":{"type":"string","maxLength":3,"minLength":1}}},"required":["to"],"additionalProperties":false}`
		if got := string(tool.InputSchema); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}

// TestDeclaredToolValidatesLikeHandWritten sends the same calls to the hand-written
// and the declared form of one tool: the answers must be the same, errors included, and
// the declared handler must receive its Go value with defaults applied.
func TestDeclaredToolValidatesLikeHandWritten(t *testing.T) {
	t.Parallel()
	var got echoArgs
	declared := testEndpoint("declared", ThreadsFormat)
	declared.Tools = []Tool[testScope]{declaredEcho(func(_ context.Context, _ testScope, in echoArgs) (any, error) {
		got = in
		return map[string]any{"ok": true}, nil
	})}
	dh, err := NewHandler(declared, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// testTools' echo tool is declared with echoSchema.
	hh, err := NewHandler(testEndpoint("hand-written", ThreadsFormat), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"query":"a","room_id":"r"}`, `{"limit":"ten"}`, `{"limit":51}`, `{"limit":0}`, `{"limit":2.5}`,
		`{"query":"123456789012345678901"}`, `{"query":""}`, `{"priority":"urgent"}`, `{"tags":["a","b","c","d"]}`,
		`{"tags":["a","bbbbbbbbbbbb"]}`, `{"lesson":{}}`, `{"lesson":{"title":"t","x":1}}`, `{"deadline":"2026-09-12 10:00"}`,
		`{"day":"12/09/2026"}`, `"query"`, `{"tags":null}`, `{"lesson":null}`, `{"query":"a\u0000"}`, `{}`,
	} {
		t.Run(args, func(t *testing.T) {
			_, want := post(t, hh, "/", callBody("echo", args))
			_, have := post(t, dh, "/", callBody("strict", args))
			wantText, wantErr := toolText(t, want)
			haveText, haveErr := toolText(t, have)
			if wantErr != haveErr || wantErr && wantText != haveText {
				t.Errorf("hand-written: %v %s\ndeclared:     %v %s", wantErr, wantText, haveErr, haveText)
			}
		})
	}
	t.Run("the handler gets its Go value, defaults applied", func(t *testing.T) {
		_, resp := post(t, dh, "/", callBody("strict", `{"lesson":{"title":"t"},"tags":["x"]}`))
		if _, isErr := toolText(t, resp); isErr {
			t.Fatalf("refused: %v", resp)
		}
		if got.Limit != echoDefaultLimit || got.Priority != "normal" || got.Lesson == nil || got.Lesson.Kind != "fact" || len(got.Tags) != 1 {
			t.Errorf("handler got %+v", got)
		}
	})
}

// roomArgs is the argument WithArgs adds in the tests, as the all-rooms address does.
type roomArgs struct {
	Room string `json:"room"`
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	var gotScope testScope
	var gotArgs echoArgs
	inner := declaredEcho(func(_ context.Context, sc testScope, in echoArgs) (any, error) {
		gotScope, gotArgs = sc, in
		return map[string]any{"ok": true}, nil
	})
	tool := WithArgs(inner, func(_ context.Context, sc testScope, p roomArgs) (testScope, error) {
		if p.Room == "closed" {
			return sc, apperr.New(apperr.Forbidden, "not in room %s", p.Room)
		}
		return testScope{Agent: sc.Agent + "@" + p.Room}, nil
	}, Prop("room", MinLength(1), Description("The room.")))

	t.Run("the added argument comes first and is required first", func(t *testing.T) {
		base := compact(t, echoSchema)
		want := `{"type":"object","properties":{"room":{"type":"string","minLength":1,"description":"The room."},` +
			strings.TrimPrefix(strings.TrimSuffix(base, `},"additionalProperties":false}`), `{"type":"object","properties":{`) +
			`},"required":["room"],"additionalProperties":false}`
		if got := string(tool.InputSchema); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if string(inner.InputSchema) != base {
			t.Errorf("WithArgs changed the tool it extends: %s", inner.InputSchema)
		}
	})

	ep := testEndpoint("with", ThreadsFormat)
	ep.Tools = []Tool[testScope]{tool}
	h, err := NewHandler(ep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("bind sets the scope, the tool gets its own arguments", func(t *testing.T) {
		_, resp := post(t, h, "/", callBody("strict", `{"room":"r1","limit":3}`))
		if text, isErr := toolText(t, resp); isErr {
			t.Fatalf("refused: %s", text)
		}
		if gotScope.Agent != "architect@r1" || gotArgs.Limit != 3 {
			t.Errorf("scope %+v args %+v", gotScope, gotArgs)
		}
	})
	t.Run("a missing added argument is a validation error", func(t *testing.T) {
		_, resp := post(t, h, "/", callBody("strict", `{"limit":3}`))
		if text, isErr := toolText(t, resp); !isErr || !strings.Contains(text, `missing required argument \"room\"`) {
			t.Errorf("got %v %s", isErr, text)
		}
	})
	t.Run("a bind error is the tool's answer", func(t *testing.T) {
		_, resp := post(t, h, "/", callBody("strict", `{"room":"closed"}`))
		if text, isErr := toolText(t, resp); !isErr || !strings.Contains(text, "not in room closed") {
			t.Errorf("got %v %s", isErr, text)
		}
	})
}

func TestDeclarationErrors(t *testing.T) {
	t.Parallel()
	h := func(context.Context, testScope, echoArgs) (any, error) { return nil, nil }
	base := Tool[testScope]{Name: "bad", Description: "Declared wrong."}
	bind := func(_ context.Context, sc testScope, _ roomArgs) (testScope, error) { return sc, nil }
	cases := []struct {
		name string
		tool Tool[testScope]
		want string
	}{
		{"unknown property", NewTool(base, h, Prop("limt", Maximum(1))), `has no property "limt"`},
		{"unknown nested property", NewTool(base, h, Prop("lesson", Prop("body", MinLength(1)))), `argument "lesson" has no property "body"`},
		{"bound on the wrong type", NewTool(base, h, Prop("limit", MaxLength(3))), `argument "limit" is of type "integer": maxLength applies to string`},
		{"keyword set twice", NewTool(base, h, Prop("limit", Maximum(1), Maximum(2))), `argument "limit": maximum is set twice`},
		{"items of a non-array", NewTool(base, h, Prop("query", Items())), `items applies to array`},
		{"default outside its schema", NewTool(base, h, Prop("limit", Maximum(5), Default(9))), `/properties/limit: maximum`},
		{"arguments not a struct", NewTool(base, func(context.Context, testScope, string) (any, error) { return nil, nil }), `must be a struct`},
		{"schema set by hand", NewTool(Tool[testScope]{Name: "bad", Description: "d", InputSchema: json.RawMessage(noArgumentsSchema)}, h), `leave them unset`},
		{"added argument already declared", WithArgs(NewTool(base, func(context.Context, testScope, roomArgs) (any, error) { return nil, nil }), bind), `"room" is declared twice`},
		{"extending a hand-written tool", WithArgs(Tool[testScope]{Name: "bad", Description: "d", Handler: func(context.Context, testScope, json.RawMessage) (any, error) { return nil, nil }}, bind), `declared with NewTool`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := testEndpoint("bad", ThreadsFormat)
			ep.Tools = []Tool[testScope]{tc.tool}
			_, err := NewHandler(ep, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewHandler: %v, want an error containing %q", err, tc.want)
			}
			if _, err := ToolsListJSON(ep); err == nil {
				t.Error("ToolsListJSON accepted a broken declaration")
			}
		})
	}
}
