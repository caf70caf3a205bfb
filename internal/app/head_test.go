package app_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/web"
)

// TestHEADIsGETWithoutTheBody: the routes beside MCP answer HEAD as their GET, without a
// body (RFC 9110 9.3.2). It was 405 on every one of them: health monitors and download
// tools that send HEAD first were told the route does not exist.
func TestHEADIsGETWithoutTheBody(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for path, want := range map[string]int{
		"/healthz": http.StatusOK,
		"/readyz":  http.StatusOK,
		"/":        http.StatusOK,
		"/.well-known/oauth-protected-resource/api/mcp": http.StatusOK,
		"/metrics":                   http.StatusOK,
		"/login":                     http.StatusOK,
		web.RouteAssets + "site.css": http.StatusOK,
		// A link with a bad signature is refused as its GET is.
		"/api/rooms/" + s.res.Projects["escalations"].ID.String() + "/attachments/" + uuid.NewString() + "?exp=1&sig=00": http.StatusForbidden,
	} {
		get, err := http.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		resp, err := http.Head(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(testfix.Body(t, resp))
		if resp.StatusCode != want || get.StatusCode != want || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes (GET %d), want %d and no body", path, resp.StatusCode, len(body), get.StatusCode, want)
		}
	}
}

// TestHEADNeverClaimsAWake: the pager's long poll is a GET that claims the part's wake; a
// HEAD of it (a monitor probing the URL with the key) claimed the wake for a body nobody
// read, and the pager's own poll then found nothing.
func TestHEADNeverClaimsAWake(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	key := s.key("acme/backend")
	arch := s.threadsURL("escalations", "architect")
	callTool(t, arch, s.key("acme/architect"), "send", map[string]any{"to": []string{"backend"}, "subject": "Deploy", "body": "Review it."})
	req, err := http.NewRequest(http.MethodHead, s.base+"/api/wakes/next?wait=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Agent-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("HEAD of the long poll: %d, want 405", resp.StatusCode)
	}
	if status, _ := s.nextWake(t, http.DefaultClient, key); status != http.StatusOK {
		t.Fatalf("the pager's poll after the HEAD: %d, want its wake (200)", status)
	}
}

// TestAnUnservedMethodIsAJSON405: a method a route does not serve is refused with 405, an
// Allow header and a JSON body, as every other refusal of this service. The authorization
// server's metadata answered plain text, which a client reading errors as JSON could not
// parse.
func TestAnUnservedMethodIsAJSON405(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, path := range []string{
		"/.well-known/oauth-authorization-server",
		"/.well-known/openid-configuration",
		"/.well-known/oauth-protected-resource/api/mcp",
		"/healthz",
		"/metrics",
	} {
		t.Run(path, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodDelete, s.base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(testfix.Body(t, resp))
			var parsed map[string]any
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" || json.Unmarshal(body, &parsed) != nil || parsed["error"] == nil {
				t.Fatalf("DELETE: %d, Allow %q, body %s; want 405, an Allow header and a JSON error", resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		})
	}
}

// TestThePeoplesPagesRefuseOtherMethods: /login, /logout and /account answer the methods
// they serve and 405 with Allow to the others, as /login did alone. /account and
// /logout answered any method (PUT, DELETE, a POST to /account) with the account page.
func TestThePeoplesPagesRefuseOtherMethods(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, allow := range map[string]string{
		web.RouteLogin:   "GET, HEAD, POST",
		web.RouteLogout:  "GET, HEAD, POST",
		web.RouteAccount: "GET, HEAD",
	} {
		t.Run(path, func(t *testing.T) {
			methods := []string{http.MethodPut, http.MethodDelete, http.MethodPatch}
			if path == web.RouteAccount {
				methods = append(methods, http.MethodPost)
			}
			for _, m := range methods {
				req, err := http.NewRequest(m, s.base+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := noRedirects.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != allow {
					t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", m, path, resp.StatusCode, resp.Header.Get("Allow"), allow)
				}
			}
		})
	}
}

// TestHEADOfADashboardPageIsItsGET: a page of the dashboard answers HEAD as its GET,
// without a body, signed in or not; every page answered HEAD 404 "There is no page here"
// while its GET answered 200 (or sent a signed-out browser to the sign-in page).
func TestHEADOfADashboardPageIsItsGET(t *testing.T) {
	t.Parallel()
	dt := startDashboard(t, dashboardFile)
	ana := dt.signIn(t, "ana")[0]
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/app/", "/app/rooms/" + dt.room, "/app/rooms/" + dt.room + "/memory", "/app/admin", "/app/desk"} {
		t.Run(path, func(t *testing.T) {
			for who, c := range map[string]*http.Client{"signed in": ana.c, "signed out": anon} {
				get, err := c.Get(dt.base + path)
				if err != nil {
					t.Fatal(err)
				}
				get.Body.Close()
				head, err := c.Head(dt.base + path)
				if err != nil {
					t.Fatal(err)
				}
				body := testfix.Body(t, head)
				if head.StatusCode != get.StatusCode || head.Header.Get("Location") != get.Header.Get("Location") || body != "" {
					t.Errorf("%s: HEAD %d (Location %q, %d bytes), GET %d (Location %q)", who, head.StatusCode, head.Header.Get("Location"), len(body), get.StatusCode, get.Header.Get("Location"))
				}
			}
		})
	}
}
