package mcp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/apperr"
)

// awkward holds every kind of character a JSON string treats apart: quotes, backslashes,
// control characters, HTML characters, U+2028 and U+2029, non-ASCII text and invalid UTF-8.
var awkward = []string{
	"", "plain", `say "hi" \ bye`, "tab\there\nnew\rline\b\f\x00\x01\x1f\x7f",
	"<b>a & b</b>", "line\u2028para\u2029end", "naïve café 東京 🚀", "bad \xff\xfe utf8 \xe2\x80",
	"\xe2\x80\xa8\xe2\x80\xa9", "ends with backslash \\",
}

// TestToolAnswerBytes: the hand-written answer of a tools/call is byte for byte what
// encoding/json gives for the same value, in every format, for successes and failures,
// with and without the stateless era's fields, for answers decoded from storage (whose
// structured JSON is not known to be compact) and for every awkward string.
func TestToolAnswerBytes(t *testing.T) {
	t.Parallel()
	var values []any
	for _, s := range awkward {
		values = append(values,
			map[string]any{"text": s, s: []any{s, 1, 2.5, nil, true}},
			struct {
				A string          `json:"a"`
				R json.RawMessage `json:"r"`
			}{s, json.RawMessage(" { \"k\" : [ 1 , \"" + strings.ReplaceAll(s, `"`, "") + "\" ] } ")},
			Structured{Object: map[string]any{"messages": []string{s}}, Text: []string{s}},
		)
	}
	values = append(values, map[string]any{}, []string{"a", "b"}, "bare string", 42)

	var results []toolResult
	for _, f := range []Format{RoomsFormat, ThreadsFormat, DeskFormat} {
		for _, v := range values {
			res, err := f.success(v)
			if err != nil {
				continue // not an object in a structured format: never answered as a result
			}
			results = append(results, res)
		}
		for _, s := range awkward {
			e := &apperr.Error{Code: apperr.Conflict, Message: s, Reason: "stale_" + s}
			e.Details = map[string]any{"retry_after_seconds": 3, "hint": s}
			results = append(results, f.failure(e))
		}
	}
	// Answers read back from storage, as the idempotent replay decodes them.
	for _, stored := range []string{
		`{"content": [{"type": "text", "text": "a \u003c b"}], "structuredContent": {"a" : [1, 2], "b": "\u2028"}, "isError": false}`,
		`{"content":[],"isError":true}`,
		`{"isError":false}`,
	} {
		var res toolResult
		if err := json.Unmarshal([]byte(stored), &res); err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	stateless := &resultMeta{ServerInfo: implementation{Name: "relay \"room\" <x>", Version: "1.0\u2028"}}
	ids := []string{`1`, `-0.5e3`, `"a\"b"`, `"\u2028 raw` + "\u2028" + `"`, `"\ud800"`, `12345678901234567890`}
	for _, res := range results {
		for i, id := range ids {
			if i%2 == 1 {
				res.Meta, res.ResultType = stateless, "complete"
			}
			want, err := encodeJSON(resultResponse(json.RawMessage(id), res))
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeBody(resultResponse(json.RawMessage(id), res))
			if err != nil {
				t.Fatalf("%s: %v", want, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("answer differs:\n got %s\nwant %s", got, want)
			}
		}
	}
}

// TestToolAnswerRefusesBrokenJSON: structured JSON that is not known to be compact is
// checked as encoding/json checks it, so a broken stored answer is an error, not a
// broken body.
func TestToolAnswerRefusesBrokenJSON(t *testing.T) {
	t.Parallel()
	res := toolResult{Content: []textBlock{{Type: "text", Text: "x"}}, StructuredContent: json.RawMessage(`{"a":`)}
	if _, err := encodeJSON(resultResponse(json.RawMessage(`1`), res)); err == nil {
		t.Fatal("encoding/json accepted broken JSON")
	}
	if got, err := encodeBody(resultResponse(json.RawMessage(`1`), res)); err == nil {
		t.Fatalf("broken structured content written: %s", got)
	}
}

// FuzzJSONString: appendJSONString writes every string as encodeJSON does.
func FuzzJSONString(f *testing.F) {
	for _, s := range awkward {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := encodeJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s (valid UTF-8: %v)", s, got, want, utf8.ValidString(s))
		}
	})
}

// TestRequestMetaFoundHoweverWritten: params whose _meta is spelled in another case or
// with an escape are still read (encoding/json matches names so), while params without
// one skip decoding for it.
func TestRequestMetaFoundHoweverWritten(t *testing.T) {
	t.Parallel()
	for _, params := range []string{
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"v"}}`,
		`{"name":"x","_META":{"io.modelcontextprotocol/protocolVersion":"v"}}`,
		`{"\u005fmeta":{"io.modelcontextprotocol/protocolVersion":"v"}}`,
		`{"_m\u0065ta":{"io.modelcontextprotocol/protocolVersion":"v"}}`,
	} {
		if m := readRequestMeta(json.RawMessage(params)); !m.versionPresent || m.version != "v" {
			t.Errorf("%s: read as %+v", params, m)
		}
	}
	for _, params := range []string{`{"name":"whoami","arguments":{}}`, `{"name":"x","arguments":{"meta":1,"_met":2}}`} {
		if mayNameMeta(json.RawMessage(params)) {
			t.Errorf("%s decoded for a _meta it cannot hold", params)
		}
	}
}

// appendToolResult writes the members of toolResult and of the types inside it by name: a
// member added to one of them would be left out of every answer without a word. This
// holds the types' JSON members to the ones it writes.
func TestToolAnswerKnowsEveryMember(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[toolResult](), []string{"_meta", "content", "structuredContent", "isError", "resultType"}},
		{reflect.TypeFor[textBlock](), []string{"type", "text"}},
		{reflect.TypeFor[resultMeta](), []string{"io.modelcontextprotocol/serverInfo"}},
		{reflect.TypeFor[implementation](), []string{"name", "version"}},
	} {
		var got []string
		for f := range c.typ.Fields() {
			if f.IsExported() {
				got = append(got, strings.Split(f.Tag.Get("json"), ",")[0])
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s's JSON members are %q; appendToolResult writes %q: teach it the change", c.typ, got, c.want)
		}
	}
}
