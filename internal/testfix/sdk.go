package testfix

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallTool calls a tool through the go-sdk client and returns its result with the text of
// its one content block; the test fails if the call fails or the result holds another
// number of blocks. Whether a tool error fails the test is the caller's to say.
func CallTool(t testing.TB, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: want one content block, got %d", name, len(res.Content))
	}
	text, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("%s: the content block is a %T, not text", name, res.Content[0])
	}
	return res, text.Text
}
