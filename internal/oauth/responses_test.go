package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
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
	clientID := registerLoopbackClient(t, s)
	for name, mod := range map[string]func(url.Values){
		"an unsupported response type": func(q url.Values) { q.Set("response_type", "token") },
		"a prompt op refuses":          func(q url.Values) { q.Set("prompt", "none login") },
		"plain PKCE (ours)":            func(q url.Values) { q.Set("code_challenge_method", "plain") },
		"a response type op refuses, answered in the fragment": func(q url.Values) {
			q.Set("response_type", "token")
			q.Set("response_mode", "fragment")
		},
	} {
		t.Run(name, func(t *testing.T) {
			q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
				"state": {"s"}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"},
				"resource": {publicURL + "/api/mcp"}, "scope": {"rooms"}}
			mod(q)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, oauth.RouteAuthorize+"?"+q.Encode(), nil))
			loc, err := url.Parse(w.Header().Get("Location"))
			if err != nil || w.Code != http.StatusFound {
				t.Fatalf("%d %q %v", w.Code, w.Header().Get("Location"), err)
			}
			got := loc.Query()
			if loc.Fragment != "" {
				// op answers there when asked to: the response's parameters are all there.
				got, _ = url.ParseQuery(loc.Fragment)
			}
			if got.Get("error") == "" || got.Get("state") != "s" || got.Get("iss") != publicURL || loc.Host != "127.0.0.1:5555" {
				t.Fatalf("error redirect %s: want error, state and iss at the client's callback", loc)
			}
		})
	}
}

// TestARepeatedParameterIsRefused: a token or revocation request that sends a parameter
// twice is invalid_request (RFC 6749 3.1, 3.2), naming it; op took one of the values and
// answered invalid_grant as if the request were well formed. The resource alone may be
// repeated (RFC 8707 2).
func TestARepeatedParameterIsRefused(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	post := func(t *testing.T, route, body string) (int, map[string]string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, route, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		var out map[string]string
		if err := json.NewDecoder(w.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %d, not JSON: %v", route, w.Code, err)
		}
		return w.Code, out
	}
	for _, route := range []string{oauth.RouteToken, oauth.RouteRevoke} {
		t.Run(route+" with a parameter sent twice", func(t *testing.T) {
			code, out := post(t, route, "grant_type=authorization_code&grant_type=refresh_token&code=qyt_ac_x&client_id=rrc_x&token=x")
			if code != http.StatusBadRequest || out["error"] != "invalid_request" || !strings.Contains(out["error_description"], `"grant_type" is sent more than once`) {
				t.Fatalf("%d %v", code, out)
			}
		})
	}
	t.Run("a repeated resource is not refused for being repeated", func(t *testing.T) {
		code, out := post(t, oauth.RouteToken, "grant_type=authorization_code&code=qyt_ac_unknown&client_id=rrc_unknown&code_verifier="+
			strings.Repeat("v", 43)+"&resource=a&resource=b")
		if strings.Contains(out["error_description"], "more than once") {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("a body that is not a form is invalid_request", func(t *testing.T) {
		code, out := post(t, oauth.RouteToken, "grant_type=%zz")
		if code != http.StatusBadRequest || out["error"] != "invalid_request" {
			t.Fatalf("%d %v", code, out)
		}
	})
}

// TestARefusedStateIsNeverEchoed: a state that is too long, not text or sent twice is
// refused without being sent back, whatever else the request gets wrong. The PKCE refusal
// (ours) and op's own refusals ran before the state was looked at and echoed it: a
// megabyte, or a NUL, in the Location the client reads.
func TestARefusedStateIsNeverEchoed(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	clientID := registerLoopbackClient(t, s)
	long := strings.Repeat("s", oauth.MaxStateBytes+1)
	for name, mod := range map[string]func(url.Values){
		"an over-long state without PKCE":                   func(q url.Values) { q.Set("state", long); q.Del("code_challenge") },
		"an over-long state with plain PKCE":                func(q url.Values) { q.Set("state", long); q.Set("code_challenge_method", "plain") },
		"an over-long state and a response type op refuses": func(q url.Values) { q.Set("state", long); q.Set("response_type", "token") },
		"a state with a NUL without PKCE":                   func(q url.Values) { q.Set("state", "a\x00b"); q.Del("code_challenge") },
		"a state not UTF-8 and a prompt op refuses":         func(q url.Values) { q.Set("state", "a\xffb"); q.Set("prompt", "none login") },
		"a state sent twice":                                func(q url.Values) { q["state"] = []string{"a", "b"} },
		"an over-long state, all else right":                func(q url.Values) { q.Set("state", long) },
	} {
		t.Run(name, func(t *testing.T) {
			q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
				"code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"},
				"resource": {publicURL + "/api/mcp"}, "scope": {"rooms"}}
			mod(q)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, oauth.RouteAuthorize+"?"+q.Encode(), nil))
			loc, err := url.Parse(w.Header().Get("Location"))
			if err != nil || w.Code != http.StatusFound {
				t.Fatalf("%d %.300q %v", w.Code, w.Header().Get("Location"), err)
			}
			if got := loc.Query(); got.Get("error") == "" || got.Has("state") || got.Get("iss") != publicURL || loc.Host != "127.0.0.1:5555" {
				t.Fatalf("error redirect %.300s: want an error and iss at the client's callback, and no state", loc)
			}
		})
	}
}

// TestAClientRefusedAfterHTTPBasicGets401: RFC 6749 5.2 says a client that authenticated
// with the Authorization header and failed MUST be answered 401 with WWW-Authenticate;
// op answered 400. Without the header, invalid_client stays 400.
func TestAClientRefusedAfterHTTPBasicGets401(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	post := func(route string, basic bool, form url.Values) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, route, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth("rrc_unknown", "secret")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w
	}
	for _, route := range []string{oauth.RouteToken, oauth.RouteRevoke} {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"qyt_rt_x"}, "token": {"qyt_rt_x"}}
		t.Run(route+" with HTTP Basic", func(t *testing.T) {
			w := post(route, true, form)
			if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") || !strings.Contains(w.Body.String(), `"invalid_client"`) {
				t.Fatalf("%d %q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body.String())
			}
		})
		t.Run(route+" with the client in the body", func(t *testing.T) {
			f := url.Values{"client_id": {"rrc_unknown"}}
			for k, v := range form {
				f[k] = v
			}
			w := post(route, false, f)
			if w.Code != http.StatusBadRequest || w.Header().Get("WWW-Authenticate") != "" || !strings.Contains(w.Body.String(), `"invalid_client"`) {
				t.Fatalf("%d %q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body.String())
			}
		})
	}
}

// TestAnAuthorizationRequestKeepsOnlyBoundedText: what /authorize stores for anyone who
// asks is bounded text. A resource with a NUL or invalid UTF-8 reached the database (a
// server_error and an ERROR log line per anonymous request), a megabyte-long one was
// stored, and a scope repeated to fill the request line was stored as often as sent.
func TestAnAuthorizationRequestKeepsOnlyBoundedText(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	clientID := registerLoopbackClient(t, s)
	authorize := func(mod func(url.Values)) *url.URL {
		t.Helper()
		q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
			"state": {"s"}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"},
			"resource": {publicURL + "/api/mcp"}, "scope": {"rooms"}}
		mod(q)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, oauth.RouteAuthorize+"?"+q.Encode(), nil))
		loc, err := url.Parse(w.Header().Get("Location"))
		if err != nil || w.Code != http.StatusFound {
			t.Fatalf("%d %.300q %v", w.Code, w.Header().Get("Location"), err)
		}
		return loc
	}
	for name, resource := range map[string]string{
		"a resource with a NUL":         publicURL + "/mcp/a\x00b",
		"a resource not UTF-8":          publicURL + "/api/mcp/p/\xff",
		"a resource of over 2048 bytes": publicURL + "/mcp/" + strings.Repeat("a", oauth.MaxResourceBytes),
	} {
		t.Run(name+" is invalid_target and not kept", func(t *testing.T) {
			loc := authorize(func(q url.Values) { q.Set("resource", resource) })
			if got := loc.Query(); got.Get("error") != "invalid_target" || got.Get("state") != "s" || loc.Host != "127.0.0.1:5555" {
				t.Fatalf("%.300s: want invalid_target at the client's callback", loc)
			}
		})
	}
	t.Run("a scope sent many times is kept once", func(t *testing.T) {
		loc := authorize(func(q url.Values) { q.Set("scope", strings.Repeat("rooms ", 1000)+"offline_access offline_access") })
		if loc.Path != oauth.RouteConsent {
			t.Fatalf("%.300s: want the consent page", loc)
		}
		var scopes []string
		err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT scopes FROM oauth_auth_request WHERE id = $1`, loc.Query().Get("id")).Scan(&scopes)
		})
		if err != nil || !slices.Equal(scopes, []string{"rooms", "offline_access"}) {
			t.Fatalf("kept scopes %.200v (%d), %v: want rooms and offline_access once each", scopes, len(scopes), err)
		}
	})
	var kept int
	err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT count(*) FROM oauth_auth_request`).Scan(&kept)
	})
	if err != nil || kept != 1 {
		t.Fatalf("%d requests kept, %v: want the one with a valid resource", kept, err)
	}
}

// TestTheAuthorizationEndpointTakesGETAndPOSTOnly: any other method is 405 with Allow
// and keeps nothing; op served PUT, DELETE and HEAD as a GET.
func TestTheAuthorizationEndpointTakesGETAndPOSTOnly(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	clientID := registerLoopbackClient(t, s)
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
		"state": {"s"}, "code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"},
		"resource": {publicURL + "/api/mcp"}, "scope": {"rooms"}}
	for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodPatch} {
		t.Run(method, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(method, oauth.RouteAuthorize+"?"+q.Encode(), nil))
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, POST" {
				t.Fatalf("%d, Allow %q, Location %q", w.Code, w.Header().Get("Allow"), w.Header().Get("Location"))
			}
		})
	}
	var kept int
	err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT count(*) FROM oauth_auth_request`).Scan(&kept)
	})
	if err != nil || kept != 0 {
		t.Fatalf("%d requests kept, %v", kept, err)
	}
	t.Run("GET still authorizes", func(t *testing.T) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, oauth.RouteAuthorize+"?"+q.Encode(), nil))
		if loc, _ := url.Parse(w.Header().Get("Location")); w.Code != http.StatusFound || loc == nil || loc.Path != oauth.RouteConsent {
			t.Fatalf("%d %q", w.Code, w.Header().Get("Location"))
		}
	})
}

// registerLoopbackClient registers a public client whose redirect URI is a port-less
// loopback callback (any port matches, RFC 8252), as a native MCP client does, and
// returns its client_id.
func registerLoopbackClient(t *testing.T, s http.Handler) string {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, oauth.RouteRegister, strings.NewReader(
		`{"redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}`)))
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(w.Body).Decode(&reg); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("register: %d %v", w.Code, err)
	}
	return reg.ClientID
}
