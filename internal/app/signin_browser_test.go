package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relayroom/relayroom/internal/desk"
)

// callbackPage is what the client's loopback listener shows the person once the browser
// reaches it, so the test can see the browser landed there.
const callbackPage = "Signed in: you can return to the client."

// loopbackCallback is an MCP client's redirect listener on a loopback port, as Claude
// Code and the SDKs run one: the browser is sent to it with the code, state and iss.
type loopbackCallback struct {
	url string
	got chan *url.URL
}

func newLoopbackCallback(t *testing.T) *loopbackCallback {
	t.Helper()
	cb := &loopbackCallback{got: make(chan *url.URL, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" { // the browser also asks for /favicon.ico
			http.NotFound(w, r)
			return
		}
		select {
		case cb.got <- r.URL:
		default: // a second visit (a reload) changes nothing: the first one is the answer
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, "<!doctype html><title>Signed in</title><p id=done>%s</p>", callbackPage) // the browser may have gone
	}))
	t.Cleanup(srv.Close)
	cb.url = srv.URL + "/callback"
	return cb
}

// sdkOAuthClientInChromium connects the go-sdk's client to endpoint with nothing but its
// URL, the authorization URL it gives opened in the headless browser (ctx), where the person
// signs in and consents to the choice whose label contains pick; the browser follows
// the redirect to the client's own loopback listener, which hands the code to the SDK.
func sdkOAuthClientInChromium(t *testing.T, ctx context.Context, endpoint, pick string) *sdk.ClientSession {
	t.Helper()
	cb := newLoopbackCallback(t)
	return sdkOAuthConnect(t, endpoint, cb.url, "", browserTestBound, func(connectCtx context.Context, authURL string) (*url.URL, error) {
		if err := chromiumConsent(ctx, authURL, pick); err != nil {
			return nil, err
		}
		select {
		case u := <-cb.got:
			if err := waitText(ctx, "#done", callbackPage); err != nil {
				return nil, fmt.Errorf("the browser does not show the callback's page: %w", err)
			}
			return u, nil
		case <-time.After(waitBound):
			return nil, fmt.Errorf("the browser never reached the callback: %s", pageText(ctx))
		case <-connectCtx.Done():
			return nil, connectCtx.Err()
		}
	})
}

// TestAnMCPClientSignsInInChromium is the flow Claude Code runs, with a real browser: the
// SDK's client, given only the URL, gets a 401, reads the metadata, registers, and opens
// /authorize in Chromium, where Ana signs in and consents; Chromium's form posts carry
// its own Origin and cookies, and it follows the redirect to the client's loopback
// listener with code, state and iss; the SDK then exchanges the code and calls tools.
func TestAnMCPClientSignsInInChromium(t *testing.T) {
	t.Parallel()
	ctx := headlessChromium(t)
	s := startServerFile(t, signInDeskDemo, nil)
	t.Run("one room: sign in, pick the agent, allow; the token lists and calls tools as that agent", func(t *testing.T) {
		cs := sdkOAuthClientInChromium(t, ctx, fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID), "Architect")
		if names := toolNames(t, cs); !slices.Contains(names, "post_message") || !slices.Contains(names, "get_messages") {
			t.Fatalf("tools %v", names)
		}
		callJSON(t, cs, "post_message", map[string]any{"content": "Posted through a browser sign-in"})
		_, text := callJSON(t, cs, "get_messages", map[string]any{"limit": 20})
		if !strings.Contains(text, `"from":"Architect [Acme Corp] (agent`) || !strings.Contains(text, "Posted through a browser sign-in") {
			t.Fatalf("get_messages does not show the post as the agent chosen: %s", text)
		}
	})
	t.Run("threads, with the browser still signed in: straight to consent, the part chosen", func(t *testing.T) {
		checkEscalationsPart(t, sdkOAuthClientInChromium(t, ctx, s.signInThreadsURL("escalations"), "part backend"), "backend")
	})
	t.Run("all rooms: the agent chosen lists its rooms", func(t *testing.T) {
		cs := sdkOAuthClientInChromium(t, ctx, s.base+"/api/mcp", "Backend")
		if _, text := callJSON(t, cs, "list_rooms", map[string]any{}); !strings.Contains(text, "Escalations") {
			t.Fatalf("list_rooms: %s", text)
		}
	})
	t.Run("desk: the workspace chosen, every permission left ticked", func(t *testing.T) {
		cs := sdkOAuthClientInChromium(t, ctx, s.base+"/desk/mcp", "Acme Corp")
		if _, text := callJSON(t, cs, desk.ToolListInboxes, nil); !strings.Contains(text, `"name":"Support"`) {
			t.Fatalf("list_inboxes: %s", text)
		}
	})
}
