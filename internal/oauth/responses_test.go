package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestTokenAnswersAreNeverCached: every answer of the token and revocation endpoints
// carries Cache-Control: no-store (RFC 6749 5.1; the conformance suite's
// authorization-code-grant checks it), whatever the request.
func TestTokenAnswersAreNeverCached(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	for _, route := range []string{oauth.RouteToken, oauth.RouteRevoke} {
		t.Run(route, func(t *testing.T) {
			form := url.Values{"grant_type": {"authorization_code"}, "code": {"qyt_ac_unknown"}, "client_id": {"rrc_unknown"}, "token": {"x"}}
			req := httptest.NewRequest(http.MethodPost, route, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if got := w.Header().Get("Cache-Control"); got != "no-store" {
				t.Fatalf("%s answered %d with Cache-Control %q, want no-store", route, w.Code, got)
			}
		})
	}
}

// TestEveryAuthorizationErrorCarriesTheIssuer: the refusals op writes itself (here an
// unsupported response type, and a prompt it refuses), like ours, send the client back
// with error, state and iss (RFC 9207).
func TestEveryAuthorizationErrorCarriesTheIssuer(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, oauth.RouteRegister, strings.NewReader(
		`{"redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}`)))
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(w.Body).Decode(&reg); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("register: %d %v", w.Code, err)
	}
	for name, mod := range map[string]func(url.Values){
		"an unsupported response type": func(q url.Values) { q.Set("response_type", "token") },
		"a prompt op refuses":          func(q url.Values) { q.Set("prompt", "none login") },
		"plain PKCE (ours)":            func(q url.Values) { q.Set("code_challenge_method", "plain") },
	} {
		t.Run(name, func(t *testing.T) {
			q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
				"state": {"s"}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"},
				"resource": {publicURL + "/api/mcp"}, "scope": {"rooms"}}
			mod(q)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, oauth.RouteAuthorize+"?"+q.Encode(), nil))
			loc, err := url.Parse(w.Header().Get("Location"))
			if err != nil || w.Code != http.StatusFound {
				t.Fatalf("%d %q %v", w.Code, w.Header().Get("Location"), err)
			}
			if got := loc.Query(); got.Get("error") == "" || got.Get("state") != "s" || got.Get("iss") != publicURL || loc.Host != "127.0.0.1:5555" {
				t.Fatalf("error redirect %s: want error, state and iss at the client's callback", loc)
			}
		})
	}
}
