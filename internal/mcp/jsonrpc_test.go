package mcp

import (
	"strings"
	"testing"
)

// TestParseMessageRefusals: a body the parser refuses is told what is wrong with it.
func TestParseMessageRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", `{"jsonrpc":"2.0",`, "Parse error: the body is not valid JSON"},
		// Valid JSON past encoding/json's nesting limit was called not valid JSON.
		{"nested past the limit", `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
			"Parse error: the body nests more than 10000 levels deep"},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "Batch requests are not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, perr := parseMessage([]byte(c.body))
			if perr == nil || perr.message != c.want {
				t.Fatalf("got %+v, want %q", perr, c.want)
			}
		})
	}
}
