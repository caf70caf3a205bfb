package text_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/text"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"plain", "architect", nil},
		{"empty", "", nil},
		{"non-ASCII", "café ☕ 🎉", nil},
		{"U+FFFD itself is text", "\uFFFD", nil},
		{"NUL", "architect\x00", text.ErrNUL},
		{"invalid bytes", "\xff\xfe.txt", text.ErrInvalid},
		{"overlong NUL", "\xc0\x80", text.ErrInvalid},
		{"overlong three bytes", "\xe0\x80\x80", text.ErrInvalid},
		{"encoded surrogate", "\xed\xa0\x80", text.ErrInvalid},
		{"truncated sequence", "caf\xc3", text.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := text.Check(c.in); !errors.Is(got, c.want) {
				t.Fatalf("Check(%q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, path string
		want           error
	}{
		{"clean object", `{"a":"b","n":[1,-2.5e3,true,false,null],"o":{"k":"v"}}`, "", nil},
		{"escapes", `{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83c\udf89"}`, "", nil},
		{"escaped U+FFFD", `{"a":"\ufffd"}`, "", nil},
		{"NUL escape", `{"content":"a\u0000b"}`, "content", text.ErrNUL},
		{"NUL in an array item", `{"tags":["ok","x\u0000"]}`, "tags[1]", text.ErrNUL},
		{"NUL deep inside", `{"detail":{"a":[{"b":"\u0000"}]}}`, "detail.a[0].b", text.ErrNUL},
		{"NUL in a key", `{"detail":{"k\u0000":1}}`, `detail.k\u0000`, text.ErrNUL},
		{"invalid bytes", "{\"filename\":\"\xff\xfe.txt\"}", "filename", text.ErrInvalid},
		{"overlong", "{\"part\":\"\xe0\x80\x80\"}", "part", text.ErrInvalid},
		{"lone high surrogate", `{"a":"\ud800"}`, "a", text.ErrInvalid},
		{"lone high surrogate then text", `{"a":"\ud800x"}`, "a", text.ErrInvalid},
		{"high then high", `{"a":"\ud800\ud800"}`, "a", text.ErrInvalid},
		{"lone low surrogate", `{"a":"\udc00"}`, "a", text.ErrInvalid},
		{"root string", `"\u0000"`, "", text.ErrNUL},
		{"first problem wins", `{"a":"\u0000","b":"\xff"}`, "a", text.ErrNUL},
		{"not JSON", `{"a":`, "", text.ErrSyntax},
		{"trailing bytes", `{} {}`, "", text.ErrSyntax},
		{"bad escape", `{"a":"\x"}`, "", text.ErrSyntax},
		{"control character", "{\"a\":\"\n\"}", "", text.ErrSyntax},
		// encoding/json keeps the last of two members of one name; a gateway may keep
		// the first, and act on another call than the one that runs.
		{"a member named twice", `{"content":"first","content":"second"}`, "content", text.ErrDuplicate},
		{"named twice deep inside", `{"a":[{"k":1},{"k":1,"x":{"y":1,"y":2}}]}`, "a[1].x.y", text.ErrDuplicate},
		{"named twice by an escape", `{"k":1,"\u006b":2}`, "k", text.ErrDuplicate},
		{"one name in two objects", `{"a":{"k":1},"b":{"k":1},"k":{"k":1}}`, "", nil},
		{"names that differ in case", `{"content":1,"Content":2}`, "", nil},
		{"the first problem wins over a later duplicate", `{"a":"\u0000","a":1}`, "a", text.ErrNUL},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path, err := text.CheckJSON([]byte(c.in))
			if !errors.Is(err, c.want) || path != c.path {
				t.Fatalf("CheckJSON(%s) = %q, %v; want %q, %v", c.in, path, err, c.path, c.want)
			}
		})
	}
	t.Run("CheckNames reports a member named twice and nothing of the text", func(t *testing.T) {
		t.Parallel()
		if path, err := text.CheckNames([]byte(`{"a":"\u0000","b":{"c":"\ud800","c":1}}`)); !errors.Is(err, text.ErrDuplicate) || path != "b.c" {
			t.Fatalf("got %q, %v; want b.c and ErrDuplicate", path, err)
		}
		if _, err := text.CheckNames([]byte(`{"a":"\u0000` + "\xff" + `"}`)); err != nil {
			t.Fatalf("bad text reported: %v", err)
		}
		if _, err := text.CheckNames([]byte(`{"a":`)); !errors.Is(err, text.ErrSyntax) {
			t.Fatalf("not JSON: %v", err)
		}
	})
	t.Run("a member named twice among many is found", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		b.WriteString("{")
		for i := range 1000 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"k999":0}`)
		if path, err := text.CheckJSON([]byte(b.String())); !errors.Is(err, text.ErrDuplicate) || path != "k999" {
			t.Fatalf("got %q, %v", path, err)
		}
		if _, err := text.CheckJSON([]byte(strings.Replace(b.String(), `"k999":0}`, `"k1000":0}`, 1))); err != nil {
			t.Fatalf("1,001 distinct names: %v", err)
		}
	})
	t.Run("a problem deep inside is named by its whole path", func(t *testing.T) {
		t.Parallel()
		in := `{"a":[` + strings.Repeat(`[],`, 2) + strings.Repeat(`[`, 500) + `"\u0000"` + strings.Repeat(`]`, 500) + `]}`
		want := "a[2]" + strings.Repeat("[0]", 500) // the 499 arrays inside item 2, and the string in the last
		if path, err := text.CheckJSON([]byte(in)); !errors.Is(err, text.ErrNUL) || path != want {
			t.Fatalf("got %.60q…, %v", path, err)
		}
	})
	t.Run("nesting beyond encoding/json's limit is refused, not recursed into", func(t *testing.T) {
		t.Parallel()
		deep := strings.Repeat("[", text.MaxDepth+2) + strings.Repeat("]", text.MaxDepth+2)
		if _, err := text.CheckJSON([]byte(deep)); !errors.Is(err, text.ErrSyntax) {
			t.Fatalf("got %v, want ErrSyntax", err)
		}
	})
}

// BenchmarkCheckJSONDeep: 200 arrays nested 9,000 deep (3.6 MB, under the body
// limit). Spelling the path at every level made it cost the square of the depth: 22 s
// of CPU and a gigabyte for one request.
func BenchmarkCheckJSONDeep(b *testing.B) {
	one := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	doc := []byte(`{"a":[` + strings.Repeat(one+",", 199) + one + `]}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := text.CheckJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheckJSON holds CheckJSON to encoding/json on every input: it never panics, it
// never calls valid JSON a syntax error, and what it lets through decodes to storable
// text only (no NUL, no invalid UTF-8 hidden behind U+FFFD in the raw bytes).
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		`{"content":"a\u0000b"}`, "{\"filename\":\"\xff\xfe.txt\"}", "{\"part\":\"architect\x00\"}",
		"{\"part\":\"\xe0\x80\x80\"}", `{"usage":{"cost_usd":1e13,"model":"m\u0000"}}`, `{"a":"\ud800"}`,
		`{"a":"\udc00\ud800"}`, `{"detail":{"k\u0000":[1,{"x":"y"}]}}`, `{"comment":"ok"}`, `[]`, `"x"`, `{`,
		`{"a":"\ud83c\udf89","b":[true,false,null,-0.5e-3]}`,
		`{"a":1,"a":2}`, `{"a":{"b":"x\"y","b":"\u0000"}}`, `{"k":1,"\u006b":[{"k":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		path, err := text.CheckJSON(raw)
		// CheckNames walks the same document, skipping the values' text: where CheckJSON
		// finds nothing, or a member named twice, it finds the same.
		namesPath, namesErr := text.CheckNames(raw)
		if err == nil && namesErr != nil {
			t.Fatalf("CheckNames(%q) = %v where CheckJSON found nothing", raw, namesErr)
		}
		if errors.Is(err, text.ErrDuplicate) && (!errors.Is(namesErr, text.ErrDuplicate) || namesPath != path) {
			t.Fatalf("CheckNames(%q) = %q, %v; CheckJSON found %q twice", raw, namesPath, namesErr, path)
		}
		valid := json.Valid(raw)
		if valid && errors.Is(err, text.ErrSyntax) {
			t.Fatalf("valid JSON %q called a syntax error", raw)
		}
		if !valid {
			return
		}
		if !utf8.Valid(raw) && err == nil {
			t.Fatalf("invalid UTF-8 let through: %q", raw)
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return // beyond encoding/json's nesting limit
		}
		if s, ok := badString(v); ok && err == nil {
			t.Fatalf("%q let through, decoded string %q is not storable", raw, s)
		}
	})
}

// badString finds a decoded string or key holding a NUL.
func badString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, text.Check(v) != nil
	case []any:
		for _, item := range v {
			if s, ok := badString(item); ok {
				return s, true
			}
		}
	case map[string]any:
		for k, item := range v {
			if text.Check(k) != nil {
				return k, true
			}
			if s, ok := badString(item); ok {
				return s, true
			}
		}
	}
	return "", false
}

// FuzzCheck: a string passes exactly when it is valid UTF-8 without NUL.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"architect", "architect\x00", "\xe0\x80\x80", "\xff\xfe.txt", "\xc0\x80", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := text.Check(s)
		want := utf8.ValidString(s) && !strings.ContainsRune(s, 0)
		if (err == nil) != want {
			t.Fatalf("Check(%q) = %v", s, err)
		}
	})
}

// TestJSONSize: the estimate is exactly what encoding/json writes.
func TestJSONSize(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "a\u0001b\nc", `"quoted" \ back`, "<a href='x'>&amp;</a>", "line\u2028para\u2029", "héllo wörld ✓", "\x7f\t"} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := text.JSONSize(s); got != len(b) {
			t.Errorf("JSONSize(%q) = %d, encoding/json writes %d", s, got, len(b))
		}
	}
}

// BenchmarkCheckNames: the JSON-RPC message's check for members named twice runs on
// every request, before the arguments' own check: a write_memory of 20,000 characters.
func BenchmarkCheckNames(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_memory","arguments":{"content":"` +
		strings.Repeat("Escalations expire after three days. ", 540) + `","tags":["a","b"]}}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := text.CheckNames(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCut: a value an error echoes is at most the bytes given, cut at a character's start.
func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven cha…"},
		{"ééééé", 5, "éé…"}, // 10 bytes; byte 5 is inside the third é
	} {
		if got := text.Cut(tc.in, tc.max); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
