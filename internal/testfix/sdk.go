package testfix

import (
	"context"
	"net/http"
	"testing"
	"time"

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

// ConnectSDK connects the go-sdk client to endpoint, every request carrying header (an
// agent key, a bearer token). version "" takes the client's default path, which probes
// server/discover first; a handshake version uses initialize. The session closes when the
// test ends.
func ConnectSDK(t testing.TB, endpoint string, header http.Header, version string) (*sdk.ClientSession, error) {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "relayroom-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	var opts *sdk.ClientSessionOptions
	if version != "" {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: headerTransport(header)}}, opts)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// headerTransport sets its headers on every request the client makes.
type headerTransport http.Header

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}
