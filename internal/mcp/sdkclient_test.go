package mcp

// These tests drive the handler with the go-sdk's own client (v1.8.0), the way a real
// MCP client connects: both protocol eras, and what it does with our refusals.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// seen is one HTTP request as the server received it.
type seen struct {
	httpMethod, rpcMethod, version, mcpMethod, mcpName string
	status                                             int
}

// recorder wraps the handler and keeps what each request was and how it was answered,
// so that a test can tell which protocol path the client took.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []seen
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct{ Method string }
	_ = json.Unmarshal(body, &msg)
	rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	rc.next.ServeHTTP(rw, r)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = append(rc.reqs, seen{
		httpMethod: r.Method, rpcMethod: msg.Method, version: r.Header.Get("Mcp-Protocol-Version"),
		mcpMethod: r.Header.Get("Mcp-Method"), mcpName: r.Header.Get("Mcp-Name"), status: rw.status,
	})
}

func (rc *recorder) list() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// keyTransport adds the test credential to every request the client makes.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if k.key != "" {
		r.Header.Set("X-Test-Key", k.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, path, key, version string) (*sdk.ClientSession, *recorder, error) {
	t.Helper()
	rec := &recorder{next: newTestMux(t, nil)}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	client := sdk.NewClient(&sdk.Implementation{Name: "relayroom-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   srv.URL + path,
		HTTPClient: &http.Client{Transport: keyTransport{key}},
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, rec, err
}

// exercise lists and calls tools through the client and checks what it decoded.
func exercise(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		a := tl.Annotations
		if a == nil || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint == nil {
			t.Errorf("%s: hints not all stated: %+v", tl.Name, a)
		}
	}
	if want := []string{"echo", "search", "fail", "oops", "crash", "inbox", "list", "typed"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"query": "hi"}})
	if err != nil {
		t.Fatalf("CallTool echo: %v", err)
	}
	if res.IsError {
		t.Fatalf("echo failed: %+v", res.Content)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"agent":"architect","args":{"limit":10,"priority":"normal","query":"hi"}}` {
		t.Errorf("structuredContent %s", sc)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; text != string(sc) {
		t.Errorf("text mirror %s differs from %s", text, sc)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"nope": 1}})
	if err != nil {
		t.Fatalf("CallTool with a bad argument must be a tool error, got a Go error: %v", err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `unknown argument \"nope\"`) {
		t.Errorf("bad argument: %+v", res.Content[0])
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "typed"})
	if err != nil || res.IsError {
		t.Fatalf("typed: %v %+v", err, res)
	}

	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "no_such_tool"}); err == nil || !strings.Contains(err.Error(), `unknown tool "no_such_tool"`) {
		t.Errorf("unknown tool: got %v", err)
	}
	// The session survives an unknown tool.
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"query": "again"}}); err != nil {
		t.Errorf("call after an error: %v", err)
	}
}

func posts(reqs []seen) []string {
	var out []string
	for _, r := range reqs {
		if r.httpMethod == http.MethodPost {
			out = append(out, r.rpcMethod)
		}
	}
	return out
}

func TestSDKClientHandshake(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		t.Run(version, func(t *testing.T) {
			cs, rec, err := connect(t, "/desk", "good", version)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			init := cs.InitializeResult()
			if init.ProtocolVersion != version || init.ServerInfo.Name != "relayroom-desk" || init.Instructions != "Test endpoint desk." {
				t.Fatalf("initialize result %+v", init)
			}
			exercise(t, cs)
			want := []string{"initialize", "notifications/initialized", "tools/list", "tools/call", "tools/call", "tools/call", "tools/call", "tools/call"}
			if got := posts(rec.list()); !slices.Equal(got, want) {
				t.Errorf("POSTs %v, want %v", got, want)
			}
			for _, r := range rec.list() {
				if r.rpcMethod == "server/discover" || r.mcpMethod != "" {
					t.Errorf("handshake path sent %+v", r)
				}
				// The client's standalone SSE GET must meet 405.
				if r.httpMethod == http.MethodGet && r.status != http.StatusMethodNotAllowed {
					t.Errorf("GET answered %d", r.status)
				}
			}
		})
	}
}

func TestSDKClientStateless(t *testing.T) {
	cs, rec, err := connect(t, "/threads", "good", "") // the client's default is 2026-07-28
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	init := cs.InitializeResult()
	if init.ProtocolVersion != "2026-07-28" || init.ServerInfo == nil || init.ServerInfo.Name != "relayroom-threads" || init.Instructions != "Test endpoint threads." {
		t.Fatalf("discover result %+v", init)
	}
	exercise(t, cs)
	reqs := rec.list()
	want := []string{"server/discover", "tools/list", "tools/call", "tools/call", "tools/call", "tools/call", "tools/call"}
	if got := posts(reqs); !slices.Equal(got, want) {
		t.Errorf("POSTs %v, want %v (no initialize: the stateless path)", got, want)
	}
	for _, r := range reqs {
		if r.httpMethod != http.MethodPost || r.version != "2026-07-28" || r.mcpMethod != r.rpcMethod {
			t.Errorf("request %+v does not follow 2026-07-28", r)
		}
		if r.rpcMethod == "tools/call" && r.mcpName == "" {
			t.Errorf("tools/call without Mcp-Name: %+v", r)
		}
	}
	if last := reqs[len(reqs)-2]; last.status != http.StatusBadRequest {
		t.Errorf("unknown tool answered %d, want 400", last.status)
	}
}

func TestSDKClientUnauthenticated(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			_, rec, err := connect(t, "/rooms", "", version)
			if err == nil {
				t.Fatal("Connect succeeded without a credential")
			}
			if !strings.Contains(err.Error(), "Missing credential") {
				t.Errorf("the client did not surface the server's message: %v", err)
			}
			want := []string{"initialize"}
			if version == "" {
				// The 401 to the discover probe is a 4xx: the client falls back to
				// initialize, which is refused the same way.
				want = []string{"server/discover", "initialize"}
			}
			reqs := rec.list()
			if got := posts(reqs); !slices.Equal(got, want) {
				t.Errorf("POSTs %v, want %v", got, want)
			}
			for _, r := range reqs {
				if r.status != http.StatusUnauthorized {
					t.Errorf("%s answered %d, want 401", r.rpcMethod, r.status)
				}
			}
		})
	}
}

func TestSDKClientForbiddenAndUnavailable(t *testing.T) {
	_, _, err := connect(t, "/rooms", "forbidden", "")
	if err == nil || !strings.Contains(err.Error(), "Agent is not a participant in this room") {
		t.Errorf("forbidden: %v", err)
	}
	_, rec, err := connect(t, "/rooms", "unavailable", "")
	if err == nil {
		t.Fatal("unavailable: Connect succeeded")
	}
	reqs := rec.list()
	if got := posts(reqs); !slices.Equal(got, []string{"server/discover", "initialize"}) {
		t.Fatalf("POSTs %v", got)
	}
	if reqs[0].status >= 500 {
		t.Errorf("the discover probe got %d: never a 5xx", reqs[0].status)
	}
	if reqs[1].status != http.StatusServiceUnavailable {
		t.Errorf("initialize got %d, want 503", reqs[1].status)
	}
}
