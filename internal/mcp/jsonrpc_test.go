package mcp

import (
	"strings"
	"testing"
)

// TestParseMessageRefusals: a body the parser refuses is told what is wrong with it.
func TestParseMessageRefusals(t *testing.T) {
	t.Parallel()
	t.Run("a member named twice inside the arguments is left to the tool's argument check", func(t *testing.T) {
		t.Parallel()
		if _, perr := parseMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"q":"a","q":"b"}}}`)); perr != nil {
			t.Fatalf("refused as a message: %+v", perr)
		}
	})
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", `{"jsonrpc":"2.0",`, "Parse error: the body is not valid JSON"},
		// Valid JSON past encoding/json's nesting limit was called not valid JSON.
		{"nested past the limit", `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
			"Parse error: the body nests more than 10000 levels deep"},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "Batch requests are not supported"},
		// encoding/json kept the last of two; a gateway reading the first saw a recall
		// where a learn ran.
		{"a tool named twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","name":"learn","arguments":{}}}`,
			"Invalid Request: params.name must not be given twice"},
		{"two arguments objects", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"q":"a"},"arguments":{"q":"b"}}}`,
			"Invalid Request: params.arguments must not be given twice"},
		{"a method named twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, "Invalid Request: method must not be given twice"},
		{"two ids", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, "Invalid Request: id must not be given twice"},
		{"twice inside _meta", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"k":1,"k":2}}}`, "Invalid Request: params._meta.k must not be given twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, perr := parseMessage([]byte(c.body))
			if perr == nil || perr.message != c.want {
				t.Fatalf("got %+v, want %q", perr, c.want)
			}
		})
	}
}
