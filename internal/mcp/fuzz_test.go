package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/text"
)

// FuzzParseMessage: the JSON-RPC parser never panics; a refusal is a 400 with -32700 or
// -32600; what it accepts is a JSON object whose id (echoed byte for byte in every
// answer) still encodes into a valid answer; and a well-formed call round-trips.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"content":"a\u0000"}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xe0\x80\x80\"}",
		`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`, `[]`, `[{"jsonrpc":"2.0"}]`, ``, `{`, `{"jsonrpc":"2.0","id":1e400,"method":"x"}`,
		`{"jsonrpc":"1.0","id":1,"method":"x"}`, `{} {}`, `"x"`, `{"jsonrpc":"2.0","id":1,"method":""}`,
	} {
		f.Add([]byte(s), int64(1), "tools/list")
	}
	f.Fuzz(func(t *testing.T, body []byte, id int64, method string) {
		m, perr := parseMessage(body)
		if perr != nil {
			if perr.status != http.StatusBadRequest || (perr.code != codeParseError && perr.code != codeInvalidRequest) {
				t.Fatalf("%q refused with %d %d", body, perr.status, perr.code)
			}
		} else {
			if !json.Valid(body) || (m.method == "" && !m.response) {
				t.Fatalf("%q accepted as %+v", body, m)
			}
		}
		if m != nil {
			out, err := encodeJSON(errorResponse(m.replyID(), invalidRequest("x")))
			// json.Valid takes invalid UTF-8 inside a string: the answer must be text too.
			if err != nil || !json.Valid(out) || !utf8.Valid(out) {
				t.Fatalf("the id of %q cannot be echoed: %v %q", body, err, out)
			}
		}

		// A call built by a well-behaved client parses back to what was sent.
		req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		var sent struct{ Method string }
		if err := json.Unmarshal(req, &sent); err != nil {
			t.Fatal(err)
		}
		m, perr = parseMessage(req)
		if sent.Method == "" {
			if perr == nil {
				t.Fatalf("%s accepted without a method", req)
			}
			return
		}
		if perr != nil || m.method != sent.Method || !m.isCall() || !bytes.Equal(m.id, []byte(json.Number(itoa(id)))) {
			t.Fatalf("%s did not round-trip: %+v %+v", req, m, perr)
		}
	})
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// fuzzSchema has what the real tools have: bounded strings and numbers, arrays, a
// closed nested object, a free-form object and a default.
const fuzzSchema = `{"type":"object","properties":{
"content":{"type":"string","minLength":1,"maxLength":100},
"tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":5},
"limit":{"type":"integer","minimum":1,"maximum":50,"default":10},
"usage":{"type":"object","properties":{"cost_usd":{"type":"number","minimum":0,"maximum":1000000},"model":{"type":"string"}},"additionalProperties":false},
"detail":{"type":"object"}},
"additionalProperties":false}`

// FuzzPrepareArgs: argument validation never panics and never fails as anything but a
// validation error; bad text anywhere in the arguments (checked on the raw bytes) is
// always refused; what passes is clean text within the schema's bounds, and preparing
// it again gives the same bytes.
func FuzzPrepareArgs(f *testing.F) {
	sc, err := compileSchema(json.RawMessage(fuzzSchema), builtinFormats())
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"content":"hello","tags":["a","b"],"limit":5,"usage":{"cost_usd":0.25,"model":"m"},"detail":{"k":[1,"v"]}}`,
		`{"content":"a\u0000b"}`, `{"tags":["ok","x\u0000"]}`, "{\"content\":\"\xff\xfe.txt\"}", "{\"content\":\"\xe0\x80\x80\"}",
		`{"content":"\ud800"}`, `{"detail":{"k\u0000":1}}`, `{"detail":{"a":{"b":["\u0000"]}}}`, `{"usage":{"cost_usd":1e13,"model":"m"}}`,
		`{"limit":51}`, `{"limit":5.0}`, `{"limit":1e400}`, `[]`, `null`, ``, `{"x":1}`, `{"usage":{"model":"m\u0000"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := sc.prepareArgs(raw)
		_, textErr := text.CheckJSON(raw)
		badText := errors.Is(textErr, text.ErrNUL) || errors.Is(textErr, text.ErrInvalid)
		if err != nil {
			if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || text.Check(e.Message) != nil {
				t.Fatalf("prepareArgs(%q) failed with %v, not a validation error", raw, err)
			}
			return
		}
		if badText {
			t.Fatalf("bad text in %q let through (%v)", raw, textErr)
		}
		if _, err := text.CheckJSON(out); err != nil {
			t.Fatalf("prepared arguments %q are not clean: %v", out, err)
		}
		var got struct {
			Limit *float64 `json:"limit"`
			Usage *struct {
				Cost *float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if got.Limit == nil || *got.Limit < 1 || *got.Limit > 50 {
			t.Fatalf("limit out of bounds in %q", out)
		}
		if got.Usage != nil && got.Usage.Cost != nil && (*got.Usage.Cost < 0 || *got.Usage.Cost > 1000000) {
			t.Fatalf("cost_usd out of bounds in %q", out)
		}
		again, err := sc.prepareArgs(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("prepared arguments do not round-trip: %q → %q, %v", out, again, err)
		}
	})
}
