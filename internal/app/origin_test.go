package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/testfix"
)

func TestOriginAndCORS(t *testing.T) {
	t.Parallel()
	const allowed = "https://inspector.example"
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) { c.AllowedOrigins = []string{allowed} }})
	roomURL := s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String()
	key := s.key("acme/architect")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_rooms","arguments":{}}}`
	allRooms := s.base + "/api/mcp"
	urls := map[string]string{
		"threads":   s.threadsURL("escalations", "architect"),
		"room":      roomURL,
		"all_rooms": allRooms,
		"desk":      s.base + "/desk/mcp",
	}

	t.Run("a foreign origin with a valid key gets 403 and a JSON-RPC body on every endpoint", func(t *testing.T) {
		for name, u := range urls {
			resp := postWithHeaders(t, u, map[string]string{"X-Agent-Key": key, "Origin": "http://evil.example"}, call)
			if resp.status != http.StatusForbidden {
				t.Fatalf("%s: status %d, want 403: %s", name, resp.status, resp.body)
			}
			var msg struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct{ Code int }
			}
			if err := json.Unmarshal([]byte(resp.body), &msg); err != nil || msg.JSONRPC != "2.0" || string(msg.ID) != "null" || msg.Error.Code != -32000 {
				t.Fatalf("%s: body %s is not a JSON-RPC error without id", name, resp.body)
			}
		}
	})
	t.Run("no Origin is a non-browser client and is served", func(t *testing.T) {
		resp := postWithHeaders(t, allRooms, map[string]string{"X-Agent-Key": key}, call)
		if resp.status != http.StatusOK || !strings.Contains(resp.body, "Escalations") {
			t.Fatalf("status %d: %s", resp.status, resp.body)
		}
	})
	t.Run("the public URL's own origin is served", func(t *testing.T) {
		resp := postWithHeaders(t, allRooms, map[string]string{"X-Agent-Key": key, "Origin": s.base}, call)
		if resp.status != http.StatusOK {
			t.Fatalf("status %d: %s", resp.status, resp.body)
		}
	})
	t.Run("an allowed origin gets CORS headers exposing what clients read", func(t *testing.T) {
		resp := postWithHeaders(t, allRooms, map[string]string{"Origin": allowed}, call)
		if resp.status != http.StatusUnauthorized {
			t.Fatalf("status %d, want the 401 challenge: %s", resp.status, resp.body)
		}
		if got := resp.header.Get("Access-Control-Allow-Origin"); got != allowed {
			t.Fatalf("Access-Control-Allow-Origin %q", got)
		}
		expose := resp.header.Get("Access-Control-Expose-Headers")
		for _, h := range []string{"WWW-Authenticate", "Mcp-Protocol-Version"} {
			if !strings.Contains(expose, h) {
				t.Fatalf("Access-Control-Expose-Headers %q lacks %s", expose, h)
			}
		}
	})
	t.Run("a preflight from an allowed origin is answered, not 405", func(t *testing.T) {
		resp := requestWithHeaders(t, http.MethodOptions, roomURL, map[string]string{
			"Origin": allowed, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
		}, "")
		if resp.status != http.StatusNoContent {
			t.Fatalf("preflight status %d: %s", resp.status, resp.body)
		}
		if resp.header.Get("Access-Control-Allow-Origin") != allowed || !strings.Contains(resp.header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Fatalf("preflight headers %v", resp.header)
		}
		allowHeaders := strings.ToLower(resp.header.Get("Access-Control-Allow-Headers"))
		for _, h := range []string{"authorization", "content-type", "mcp-protocol-version", "x-agent-key"} {
			if !strings.Contains(allowHeaders, h) {
				t.Fatalf("Access-Control-Allow-Headers %q lacks %s", allowHeaders, h)
			}
		}
	})
	t.Run("a preflight from a foreign origin is refused", func(t *testing.T) {
		resp := requestWithHeaders(t, http.MethodOptions, roomURL, map[string]string{
			"Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
		}, "")
		if resp.status != http.StatusForbidden || resp.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("status %d, headers %v", resp.status, resp.header)
		}
	})
	t.Run("discovery documents and health answer any origin", func(t *testing.T) {
		for _, u := range []string{s.base + "/healthz", s.base + "/.well-known/oauth-protected-resource/api/mcp", s.base + "/.well-known/oauth-authorization-server"} {
			resp := requestWithHeaders(t, http.MethodGet, u, map[string]string{"Origin": "http://evil.example"}, "")
			if resp.status != http.StatusOK || resp.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("%s: status %d, ACAO %q", u, resp.status, resp.header.Get("Access-Control-Allow-Origin"))
			}
		}
	})
}

func TestBrowserClientsMayRegisterAndExchangeCodesFromAnyOrigin(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, path := range []string{"/register", "/token", "/revoke"} {
		t.Run(path, func(t *testing.T) {
			resp := requestWithHeaders(t, http.MethodOptions, s.base+path, map[string]string{
				"Origin": "https://inspector.example", "Access-Control-Request-Method": "POST",
			}, "")
			if resp.status != http.StatusNoContent || resp.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("preflight: status %d, headers %v", resp.status, resp.header)
			}
			// The answer itself, an error here, is open to any origin and carries no
			// credentials: the OAuth library's own CORS echoed the origin and allowed
			// credentials, replacing ours.
			resp = postWithHeaders(t, s.base+path, map[string]string{"Origin": "https://inspector.example", "Content-Type": "application/x-www-form-urlencoded"}, "")
			if resp.header.Get("Access-Control-Allow-Origin") != "*" || resp.header.Get("Access-Control-Allow-Credentials") != "" {
				t.Fatalf("answer: status %d, headers %v", resp.status, resp.header)
			}
		})
	}
	t.Run("the sign-in page is not opened to other origins", func(t *testing.T) {
		resp := requestWithHeaders(t, http.MethodPost, s.base+"/login", map[string]string{"Origin": "https://evil.example"}, "")
		if resp.status != http.StatusForbidden {
			t.Fatalf("a foreign origin's sign-in post: %d", resp.status)
		}
	})
}

type httpAnswer struct {
	status int
	header http.Header
	body   string
}

func postWithHeaders(t *testing.T, url string, header map[string]string, body string) httpAnswer {
	t.Helper()
	return requestWithHeaders(t, http.MethodPost, url, header, body)
}

func requestWithHeaders(t *testing.T, method, url string, header map[string]string, body string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	status, h, body := testfix.Do(t, http.DefaultClient, req)
	return httpAnswer{status: status, header: h, body: body}
}
