package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/throttle"
)

const signInDemo = demo + `
users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner, password: "correct horse battery"}
`

const (
	anaEmail    = "ana@acme.test"
	anaPassword = "correct horse battery"
	callbackURL = "http://127.0.0.1:33418/callback"
)

var (
	csrfInput   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	choiceInput = regexp.MustCompile(`id="choice(\d+)" name="choice" value="([^"]+)"`)
	choiceLabel = regexp.MustCompile(`<label for="choice(\d+)">([^<]+)</label>`)
	scopeInput  = regexp.MustCompile(`name="scope" value="([^"]+)"`)
)

// browser is a person's browser: a cookie jar, redirects followed on the server only, and
// the redirect to the client's callback captured instead of followed.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
	// scopes are the permissions left ticked on a consent page that lists some (the
	// desk's); nil leaves every listed one ticked, as the page does.
	scopes []string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, client: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), base) {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp, testfix.Body(b.t, resp)
}

func (b *browser) get(u string) (*http.Response, string) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(u string, form url.Values) (*http.Response, string) {
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func field(t *testing.T, re *regexp.Regexp, body string) string {
	t.Helper()
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in page:\n%s", re, body)
	}
	return html.UnescapeString(m[1])
}

// authorize opens an authorization URL, signs in when asked, and consents to the choice
// whose label contains pick (deny when pick is ""). It returns the callback URL the
// browser was sent to.
func (b *browser) authorize(authURL, pick string) *url.URL {
	b.t.Helper()
	resp, body := b.post(b.base+"/consent", b.consentForm(authURL, pick))
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("consent answered %d:\n%s", resp.StatusCode, body)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	return u
}

// consentPage opens an authorization URL, signs in as Ana when asked, and returns the
// consent page.
func (b *browser) consentPage(authURL string) (*http.Response, string) {
	b.t.Helper()
	resp, body := b.get(authURL)
	if resp.Request.URL.Path == "/login" {
		form := url.Values{"email": {anaEmail}, "password": {anaPassword}, "csrf": {field(b.t, csrfInput, body)},
			"return": {resp.Request.URL.Query().Get("return")}}
		resp, body = b.post(b.base+"/login", form)
	}
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/consent" {
		b.t.Fatalf("expected the consent page, got %d %s:\n%s", resp.StatusCode, resp.Request.URL, body)
	}
	return resp, body
}

// consentForm opens an authorization URL, signs in when asked, and returns the consent
// form filled in for the choice whose label contains pick (deny when pick is "").
func (b *browser) consentForm(authURL, pick string) url.Values {
	b.t.Helper()
	resp, body := b.consentPage(authURL)
	if h := resp.Header.Get("Content-Security-Policy"); !strings.Contains(h, "frame-ancestors 'none'") {
		b.t.Fatalf("consent page CSP %q", h)
	}
	form := url.Values{"csrf": {field(b.t, csrfInput, body)}, "id": {resp.Request.URL.Query().Get("id")}, "decision": {"deny"}}
	if pick != "" {
		labels := map[string]string{}
		for _, m := range choiceLabel.FindAllStringSubmatch(body, -1) {
			labels[m[1]] = html.UnescapeString(m[2])
		}
		for _, m := range choiceInput.FindAllStringSubmatch(body, -1) {
			if strings.Contains(labels[m[1]], pick) {
				form.Set("choice", html.UnescapeString(m[2]))
			}
		}
		if form.Get("choice") == "" {
			b.t.Fatalf("no choice %q on the consent page:\n%s", pick, body)
		}
		for _, m := range scopeInput.FindAllStringSubmatch(body, -1) {
			if sc := html.UnescapeString(m[1]); b.scopes == nil || slices.Contains(b.scopes, sc) {
				form.Add("scope", sc)
			}
		}
		form.Set("decision", "allow")
	}
	return form
}

// sdkOAuthClient connects the go-sdk's client to an endpoint with nothing but its URL:
// the SDK discovers the metadata, registers, and the browser signs in and consents.
func sdkOAuthClient(t *testing.T, s *server, endpoint, pick string) *sdk.ClientSession {
	t.Helper()
	return sdkOAuthClientWith(t, newBrowser(t, s.base), endpoint, pick, "")
}

// sdkOAuthClientWith is sdkOAuthClient with the person's browser given (which
// permissions it leaves ticked), and the client identified by its metadata document
// at documentURL instead of registering (when not "").
func sdkOAuthClientWith(t *testing.T, br *browser, endpoint, pick, documentURL string) *sdk.ClientSession {
	t.Helper()
	return sdkOAuthConnect(t, endpoint, callbackURL, documentURL, 30*time.Second, func(_ context.Context, authURL string) (*url.URL, error) {
		return br.authorize(authURL, pick), nil
	})
}

// sdkOAuthConnect connects the go-sdk's client to endpoint with nothing but its URL, its
// redirect URI, and its client ID metadata document when documentURL is not ""; consent
// opens the authorization URL and returns the callback URL the person's browser was
// sent to. bound only ends a connection that will not succeed.
func sdkOAuthConnect(t *testing.T, endpoint, redirectURL, documentURL string, bound time.Duration,
	consent func(ctx context.Context, authURL string) (*url.URL, error)) *sdk.ClientSession {
	t.Helper()
	cfg := &sdkauth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &sdkauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirectURL}, ClientName: "relayroom e2e", GrantTypes: []string{"authorization_code", "refresh_token"},
			TokenEndpointAuthMethod: "none",
		}},
		RedirectURL:         redirectURL,
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *sdkauth.AuthorizationArgs) (*sdkauth.AuthorizationResult, error) {
			cb, err := consent(ctx, args.URL)
			if err != nil {
				return nil, err
			}
			q := cb.Query()
			if q.Get("error") != "" {
				return nil, fmt.Errorf("authorization: %s", q.Get("error"))
			}
			return &sdkauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	}
	if documentURL != "" {
		cfg.DynamicClientRegistrationConfig = nil
		cfg.ClientIDMetadataDocumentConfig = &sdkauth.ClientIDMetadataDocumentConfig{URL: documentURL}
	}
	h, err := sdkauth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "relayroom-e2e", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect %s with OAuth: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// signInThreadsURL is a project's threads endpoint without a part: what a person pastes
// into a client that signs in (the part is chosen at consent).
func (s *server) signInThreadsURL(project string) string {
	return strings.SplitN(s.threadsURL(project, "x"), "?", 2)[0]
}

// checkEscalationsPart fails unless the session acts as part of Escalations.
func checkEscalationsPart(t *testing.T, cs *sdk.ClientSession, part string) {
	t.Helper()
	who, _ := callJSON(t, cs, "whoami", nil)
	if who["part"] != part || who["project"] != "Escalations" {
		t.Fatalf("whoami: %v", who)
	}
}

func TestAnMCPClientConnectsWithOnlyTheURL(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, signInDemo, nil)
	t.Run("threads: the token acts as the part chosen at consent", func(t *testing.T) {
		checkEscalationsPart(t, sdkOAuthClient(t, s, s.signInThreadsURL("escalations"), "part backend"), "backend")
	})
	t.Run("threads: the URL as printed, ?part= and all, is a resource", func(t *testing.T) {
		// Claude Code sends the URL it was given as the resource, at /authorize and at
		// /token; the query made both invalid_target.
		printed := s.threadsURL("escalations", "backend")
		tok := accessToken(t, s, printed, "part backend", "threads")
		if got := bearerStatus(t, printed, tok); got != http.StatusOK {
			t.Fatalf("the token on the URL it was asked for: %d", got)
		}
	})
	t.Run("a client that asks for a secret is registered public and signs in with PKCE", func(t *testing.T) {
		// Claude.ai's connector registers asking for client_secret_post and reads the
		// method it got from the answer; refusing the request stopped it at Connect.
		for _, method := range []string{"client_secret_post", "client_secret_basic"} {
			resource := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
			tok := newFlowAsking(t, s, resource, method).accessToken(t, "Architect", "rooms")
			if got := bearerStatus(t, resource, tok); got != http.StatusOK {
				t.Fatalf("%s: the token: %d", method, got)
			}
		}
	})
	t.Run("one room: the token acts as the agent chosen", func(t *testing.T) {
		cs := sdkOAuthClient(t, s, fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID), "Architect")
		if names := toolNames(t, cs); len(names) == 0 {
			t.Fatal("no tools")
		}
	})
	t.Run("the root resource document describes the origin with every endpoint's scopes", func(t *testing.T) {
		resp, err := http.Get(s.base + "/.well-known/oauth-protected-resource")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("root protected-resource document: %d", resp.StatusCode)
		}
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if doc.Resource != s.base {
			t.Fatalf("resource %q, want the origin %q", doc.Resource, s.base)
		}
		if !slices.Equal(doc.AuthorizationServers, []string{s.base}) {
			t.Fatalf("authorization servers %v", doc.AuthorizationServers)
		}
		for _, want := range append([]string{auth.ScopeThreads, auth.ScopeRooms}, auth.DeskScopes...) {
			if !slices.Contains(doc.ScopesSupported, want) {
				t.Fatalf("scopes %v lack %q", doc.ScopesSupported, want)
			}
		}
	})
	t.Run("all rooms", func(t *testing.T) {
		cs := sdkOAuthClient(t, s, s.base+"/api/mcp", "Backend")
		if names := toolNames(t, cs); !slices.Contains(names, "list_rooms") {
			t.Fatalf("tools %v", names)
		}
		callJSON(t, cs, "list_rooms", map[string]any{})
	})
}

// flow is a hand-driven client: registration, PKCE, and the pieces each refusal changes.
type flow struct {
	s        *server
	br       *browser
	clientID string
	verifier string
	resource string
}

func newFlow(t *testing.T, s *server, resource string) *flow {
	t.Helper()
	return newFlowAsking(t, s, resource, "none")
}

// newFlowAsking registers a client asking for the token endpoint authentication method
// authMethod; the client is public whatever it asks (no secret, "none" in the answer).
func newFlowAsking(t *testing.T, s *server, resource, authMethod string) *flow {
	t.Helper()
	body := `{"redirect_uris":["` + callbackURL + `","javascript:alert(1)"],"client_name":"hand","token_endpoint_auth_method":"` + authMethod + `"}`
	resp, err := http.Post(s.base+"/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reg struct {
		ClientID     string   `json:"client_id"`
		ClientSecret *string  `json:"client_secret"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || resp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("register: %d %v", resp.StatusCode, err)
	}
	if reg.AuthMethod != "none" || reg.ClientSecret != nil {
		t.Fatalf("asked for %s, registered with %q and secret %v: want a public client, said so", authMethod, reg.AuthMethod, reg.ClientSecret)
	}
	if !slices.Equal(reg.RedirectURIs, []string{callbackURL}) {
		t.Fatalf("registered redirect URIs %v: the javascript: one must be dropped, the valid one kept", reg.RedirectURIs)
	}
	return &flow{s: s, br: newBrowser(t, s.base), clientID: reg.ClientID, verifier: strings.Repeat("v", 50), resource: resource}
}

func (f *flow) authURL(mod func(url.Values)) string {
	sum := sha256.Sum256([]byte(f.verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {"http://127.0.0.1:50123/callback"},
		"state": {"st"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {f.resource}, "scope": {"rooms"}}
	if mod != nil {
		mod(q)
	}
	return f.s.base + "/authorize?" + q.Encode()
}

func (f *flow) token(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	form.Set("client_id", f.clientID)
	resp, err := http.PostForm(f.s.base+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("token answer: %v", err)
	}
	return resp.StatusCode, m
}

func (f *flow) exchange(t *testing.T, code string, mod func(url.Values)) (int, map[string]any) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"http://127.0.0.1:50123/callback"},
		"code_verifier": {f.verifier}, "resource": {f.resource}}
	if mod != nil {
		mod(form)
	}
	return f.token(t, form)
}

func (f *flow) code(t *testing.T) string {
	t.Helper()
	cb := f.br.authorize(f.authURL(nil), "Architect")
	q := cb.Query()
	if q.Get("code") == "" || q.Get("state") != "st" || q.Get("iss") != f.s.base || cb.Port() != "50123" {
		t.Fatalf("callback %s: want a code, state, iss and the loopback port asked for", cb)
	}
	return q.Get("code")
}

// accessToken is an access token for resource, issued to a newly registered client after
// Ana signs in and consents to the choice whose label contains pick.
func accessToken(t *testing.T, s *server, resource, pick, scope string) string {
	t.Helper()
	return newFlow(t, s, resource).accessToken(t, pick, scope)
}

// accessToken is an access token for the flow's resource, issued after Ana signs in and
// consents to the choice whose label contains pick.
func (f *flow) accessToken(t *testing.T, pick, scope string) string {
	t.Helper()
	cb := f.br.authorize(f.authURL(func(q url.Values) { q.Set("scope", scope) }), pick)
	status, tok := f.exchange(t, cb.Query().Get("code"), nil)
	at, _ := tok["access_token"].(string)
	if status != http.StatusOK || at == "" {
		t.Fatalf("token for %s: %d %v", f.resource, status, tok)
	}
	return at
}

// asOwner runs f on a connection of the database's owner (no row security), as an
// operator would, and closes it; an error fails the test.
func asOwner(t *testing.T, s *server, f func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := f(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// ownerExec changes the seeded data as the database owner, as an operator would.
func ownerExec(t *testing.T, s *server, sql string, args ...any) {
	t.Helper()
	asOwner(t, s, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql, args...)
		return err
	})
}

// ownerCount is a count(*) read as the database's owner (no row security).
func ownerCount(t *testing.T, s *server, sql string, args ...any) int {
	t.Helper()
	var n int
	asOwner(t, s, func(ctx context.Context, conn *pgx.Conn) error { return conn.QueryRow(ctx, sql, args...).Scan(&n) })
	return n
}

func bearerStatus(t *testing.T, endpoint, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	status, _, _ := testfix.Do(t, http.DefaultClient, req)
	return status
}

func TestAuthorizationRefusals(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, signInDemo, nil)
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	otherRoom := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["other"].ID)

	t.Run("a consent id with a NUL or invalid UTF-8 is a 400, signed in or not", func(t *testing.T) {
		f := newFlow(t, s, room)
		f.code(t) // signs the flow's browser in
		for _, id := range []string{"%00", "%FF"} {
			if resp, body := f.br.get(s.base + "/consent?id=" + id); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("consent?id=%s: %d %.300s", id, resp.StatusCode, body)
			}
		}
	})
	t.Run("the consent page names only a room the person has an agent in", func(t *testing.T) {
		// A room id in the sign-in request named another company's room and its host to
		// anyone signed in, and told a real id from a made-up one.
		f := newFlow(t, s, room)
		f.code(t) // signs the flow's browser in, through the room Ana's agents are in
		f.resource = otherRoom
		resp, body := f.br.get(f.authURL(nil))
		if resp.Request.URL.Path != "/consent" {
			t.Fatalf("expected the consent page, got %d %s", resp.StatusCode, resp.Request.URL)
		}
		if strings.Contains(body, "Other") || strings.Contains(body, "Initech") {
			t.Fatalf("the page names a room none of Ana's agents is in:\n%s", body)
		}
	})
	t.Run("wrong PKCE verifier", func(t *testing.T) {
		f := newFlow(t, s, room)
		status, m := f.exchange(t, f.code(t), func(v url.Values) { v.Set("code_verifier", strings.Repeat("w", 50)) })
		if status != http.StatusBadRequest || m["error"] != "invalid_grant" {
			t.Fatalf("%d %v", status, m)
		}
	})
	t.Run("plain PKCE is refused", func(t *testing.T) {
		f := newFlow(t, s, room)
		resp, _ := f.br.get(f.authURL(func(v url.Values) { v.Set("code_challenge_method", "plain"); v.Set("code_challenge", f.verifier) }))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_request" {
			t.Fatalf("%d %s", resp.StatusCode, loc)
		}
	})
	t.Run("an over-long state or challenge is refused and no request is kept", func(t *testing.T) {
		f := newFlow(t, s, room)
		for name, mod := range map[string]func(url.Values){
			"state":     func(v url.Values) { v.Set("state", strings.Repeat("s", oauth.MaxStateBytes+1)) },
			"challenge": func(v url.Values) { v.Set("code_challenge", strings.Repeat("c", oauth.MaxCodeChallengeBytes+1)) },
		} {
			resp, _ := f.br.get(f.authURL(mod))
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_request" || len(loc.RawQuery) > 1024 {
				t.Fatalf("%s: %d %.200s", name, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
		if n := ownerCount(t, s, `SELECT count(*) FROM oauth_auth_request WHERE client_id = $1`, f.clientID); n != 0 {
			t.Fatalf("%d authorization requests kept", n)
		}
	})
	t.Run("a state or challenge that is not text, or a challenge not S256's shape, is refused and no request is kept", func(t *testing.T) {
		// They reached the database: a NUL answered server_error (an ERROR log line per
		// anonymous request) with the NUL echoed back in state.
		f := newFlow(t, s, room)
		for name, mod := range map[string]func(url.Values){
			"state with a NUL":        func(v url.Values) { v.Set("state", "a\x00b") },
			"state not UTF-8":         func(v url.Values) { v.Set("state", "a\xffb") },
			"challenge with a NUL":    func(v url.Values) { v.Set("code_challenge", strings.Repeat("c", 42)+"\x00") },
			"challenge of 42 chars":   func(v url.Values) { v.Set("code_challenge", strings.Repeat("c", 42)) },
			"challenge not base64url": func(v url.Values) { v.Set("code_challenge", strings.Repeat("c", 42)+"+") },
		} {
			resp, _ := f.br.get(f.authURL(mod))
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_request" || strings.ContainsAny(loc.Query().Get("state"), "\x00\xff") {
				t.Fatalf("%s: %d %.200s", name, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
		if n := ownerCount(t, s, `SELECT count(*) FROM oauth_auth_request WHERE client_id = $1`, f.clientID); n != 0 {
			t.Fatalf("%d authorization requests kept", n)
		}
	})
	t.Run("a client_id that is not text is refused, not a server error, at both endpoints", func(t *testing.T) {
		f := newFlow(t, s, room)
		for _, id := range []string{"a\x00b", "a\xffb"} {
			resp, body := f.br.get(f.authURL(func(v url.Values) { v.Set("client_id", id) }))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "invalid_client") {
				t.Fatalf("/authorize with client_id %q: %d %s", id, resp.StatusCode, body)
			}
			status, m := f.token(t, url.Values{"grant_type": {"authorization_code"}, "client_id": {id}, "code": {"x"}, "code_verifier": {f.verifier}, "redirect_uri": {callbackURL}})
			if status != http.StatusBadRequest && status != http.StatusUnauthorized || m["error"] == "server_error" {
				t.Fatalf("/token with client_id %q: %d %v", id, status, m)
			}
		}
	})
	t.Run("prompt=none answers consent_required at once", func(t *testing.T) {
		// It showed the login page, which a client asking for a silent authorization
		// cannot show.
		f := newFlow(t, s, room)
		resp, _ := f.br.get(f.authURL(func(v url.Values) { v.Set("prompt", "none") }))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || loc.Query().Get("error") != "consent_required" || loc.Query().Get("state") != "st" || loc.Query().Get("iss") != s.base {
			t.Fatalf("%d %s", resp.StatusCode, loc)
		}
	})
	t.Run("a resource that is not ours", func(t *testing.T) {
		f := newFlow(t, s, "https://elsewhere.example/api/mcp")
		resp, _ := f.br.get(f.authURL(nil))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if loc.Query().Get("error") != "invalid_target" || loc.Query().Get("iss") != s.base {
			t.Fatalf("%d %s", resp.StatusCode, loc)
		}
	})
	t.Run("a loopback redirect URI may differ from the registered ones in its port only", func(t *testing.T) {
		// op let any loopback URI with the registered path stand for a registered loopback
		// one: another scheme, another loopback host, a fragment, user information, and
		// any digits as its port (kept with the pending request). The client registers
		// what Claude Code's metadata document lists.
		f := newFlow(t, s, room)
		resp, err := http.Post(s.base+"/register", "application/json", strings.NewReader(
			`{"redirect_uris":["http://localhost/callback","http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}`))
		if err != nil {
			t.Fatal(err)
		}
		var reg struct {
			ClientID string `json:"client_id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("register: %d %v", resp.StatusCode, err)
		}
		resp.Body.Close()
		f.clientID = reg.ClientID
		for _, uri := range []string{"http://localhost:55611/callback", "http://127.0.0.1:55611/callback", "http://localhost/callback"} {
			resp, _ := f.br.get(f.authURL(func(v url.Values) { v.Set("redirect_uri", uri) }))
			if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/login" {
				t.Fatalf("%s: %d %s, want the sign-in page", uri, resp.StatusCode, resp.Request.URL)
			}
		}
		for _, uri := range []string{"https://127.0.0.1:55611/callback", "https://localhost/callback", "http://[::1]:55611/callback",
			"http://127.0.0.2:55611/callback", "http://127.0.0.1:55611/callback#x", "http://u:p@127.0.0.1:55611/callback",
			"http://127.0.0.1:55611/callback/", "http://127.0.0.1:55611/callback?x=1", "http://127.0.0.1:55611/Callback",
			"http://127.0.0.1:0/callback", "http://127.0.0.1:65536/callback", "http://localhost:" + strings.Repeat("1", 1000) + "/callback"} {
			resp, body := f.br.get(f.authURL(func(v url.Values) { v.Set("redirect_uri", uri) }))
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || !strings.Contains(body, `"invalid_request"`) {
				t.Fatalf("%s: %d %q %.300s, want a 400 invalid_request shown here, not a redirect", uri, resp.StatusCode, resp.Header.Get("Location"), body)
			}
		}
	})
	t.Run("the consent page is opened or posted to, nothing else", func(t *testing.T) {
		// A PUT or DELETE rendered it as a GET does; the other pages answer 405.
		f := newFlow(t, s, room)
		resp, _ := f.br.consentPage(f.authURL(nil))
		page := resp.Request.URL.String()
		for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, err := http.NewRequest(method, page, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, body := f.br.do(req)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, POST" || strings.Contains(body, `name="choice"`) {
				t.Fatalf("%s: %d, Allow %q:\n%.300s", method, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		}
		if resp, body := f.br.get(page); resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="choice"`) {
			t.Fatalf("GET: %d %.300s", resp.StatusCode, body)
		}
	})
	t.Run("a request without a resource of ours or a scope is invalid_target, not a missing scope", func(t *testing.T) {
		// op refused the empty scope before Authorize could name the resource, with
		// invalid_request "The scope of your request is missing".
		f := newFlow(t, s, room)
		for name, resource := range map[string]string{"no resource": "", "a resource not ours": "https://elsewhere.example/api/mcp"} {
			resp, _ := f.br.get(f.authURL(func(v url.Values) {
				v.Del("scope")
				if v.Del("resource"); resource != "" {
					v.Set("resource", resource)
				}
			}))
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_target" || loc.Query().Get("iss") != s.base {
				t.Fatalf("%s: %d %s", name, resp.StatusCode, loc)
			}
		}
		if n := ownerCount(t, s, `SELECT count(*) FROM oauth_auth_request WHERE client_id = $1`, f.clientID); n != 0 {
			t.Fatalf("%d authorization requests kept", n)
		}
	})
	t.Run("the consent page says a registered client's name is its own word", func(t *testing.T) {
		f := newFlow(t, s, room)
		_, body := f.br.consentPage(f.authURL(nil))
		testfix.CheckContains(t, "consent page", body, "(a name the app chose when it registered, returning to <strong>")
	})
	t.Run("resource mismatch at the token endpoint", func(t *testing.T) {
		f := newFlow(t, s, room)
		status, m := f.exchange(t, f.code(t), func(v url.Values) { v.Set("resource", s.base+"/api/mcp") })
		if status != http.StatusBadRequest || m["error"] != "invalid_target" {
			t.Fatalf("%d %v", status, m)
		}
	})
	t.Run("signing out on the consent page and in again returns to the same request", func(t *testing.T) {
		f := newFlow(t, s, room)
		resp, body := f.br.consentPage(f.authURL(nil))
		consent := resp.Request.URL.RequestURI()
		if ret := field(t, regexp.MustCompile(`name="return" value="([^"]+)"`), body); ret != consent {
			t.Fatalf("the sign-out form returns to %q, not to %q", ret, consent)
		}
		resp, body = f.br.post(s.base+"/logout", url.Values{"csrf": {field(t, csrfInput, body)}, "return": {consent}})
		if resp.Request.URL.Path != "/login" || resp.Request.URL.Query().Get("return") != consent {
			t.Fatalf("after signing out: %s", resp.Request.URL)
		}
		resp, body = f.br.post(s.base+"/login", url.Values{"email": {anaEmail}, "password": {anaPassword},
			"csrf": {field(t, csrfInput, body)}, "return": {consent}})
		if resp.StatusCode != http.StatusOK || resp.Request.URL.RequestURI() != consent || !strings.Contains(body, "Architect") {
			t.Fatalf("signed in again: %d %s", resp.StatusCode, resp.Request.URL)
		}
	})
	t.Run("a consent submitted several times at once issues one code and one grant", func(t *testing.T) {
		// A double-clicked Allow: each submission made a code and a grant, and those the
		// browser did not follow stayed live and unexchanged.
		f := newFlow(t, s, room)
		form := f.br.consentForm(f.authURL(nil), "Architect")
		const posts = 6
		statuses := make(chan int, posts)
		var wg sync.WaitGroup
		for range posts {
			wg.Go(func() {
				req, err := http.NewRequest(http.MethodPost, s.base+"/consent", strings.NewReader(form.Encode()))
				if err != nil {
					statuses <- 0
					return
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := f.br.client.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				resp.Body.Close()
				statuses <- resp.StatusCode
			})
		}
		wg.Wait()
		close(statuses)
		var codes int
		for st := range statuses {
			switch st {
			case http.StatusSeeOther:
				codes++
			case http.StatusBadRequest:
			default:
				t.Fatalf("a submission answered %d", st)
			}
		}
		if grants := ownerCount(t, s, `SELECT count(*) FROM oauth_grant WHERE client_id = $1`, f.clientID); codes != 1 || grants != 1 {
			t.Fatalf("%d codes and %d grants from one request", codes, grants)
		}
	})
	t.Run("a replayed code revokes what it issued", func(t *testing.T) {
		f := newFlow(t, s, room)
		code := f.code(t)
		status, m := f.exchange(t, code, nil)
		if status != http.StatusOK {
			t.Fatalf("%d %v", status, m)
		}
		access := m["access_token"].(string)
		if !strings.HasPrefix(access, "qyt_at_") || bearerStatus(t, room, access) != http.StatusOK {
			t.Fatalf("the token does not work at its room")
		}
		if got := bearerStatus(t, otherRoom, access); got != http.StatusUnauthorized {
			t.Fatalf("token used at another room: %d", got)
		}
		if status, m := f.exchange(t, code, nil); status != http.StatusBadRequest || m["error"] != "invalid_grant" {
			t.Fatalf("replay: %d %v", status, m)
		}
		if got := bearerStatus(t, room, access); got != http.StatusUnauthorized {
			t.Fatalf("the replayed code's token still works: %d", got)
		}
	})
	t.Run("a code exchanged twice at once revokes what it issued", func(t *testing.T) {
		f := newFlow(t, s, room)
		code := f.code(t)
		// A transaction holds the grant's row, so both exchanges read the code unspent and
		// then meet at its update: the one that waited finds it spent by the other.
		ctx := context.Background()
		hold := testfix.Holder(t, s.dbURL)
		// By its organisation too: on Citus a row lock must name the shard.
		var org uuid.UUID
		if err := hold.QueryRow(ctx, `SELECT org_id FROM oauth_grant WHERE client_id = $1`, f.clientID).Scan(&org); err != nil {
			t.Fatal(err)
		}
		if _, err := hold.Exec(ctx, `SELECT 1 FROM oauth_grant WHERE org_id = $1 AND client_id = $2 FOR UPDATE`, org, f.clientID); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			status int
			body   map[string]any
		}
		answers := make(chan answer, 2)
		for range 2 {
			go func() {
				status, m := f.exchange(t, code, nil)
				answers <- answer{status, m}
			}()
		}
		// Both exchanges then wait at the row (whichever order they reach it in, the
		// answer checked below is the same; the race is only lost when they overlap).
		testfix.AwaitLockWaitersAt(t, s.dbURL, 1, nil)
		time.Sleep(300 * time.Millisecond)
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var access string
		for range 2 {
			a := <-answers
			switch {
			case a.status == http.StatusOK && access == "":
				access = a.body["access_token"].(string)
			case a.status != http.StatusBadRequest || a.body["error"] != "invalid_grant":
				t.Fatalf("exchange: %d %v", a.status, a.body)
			}
		}
		if access == "" {
			t.Fatal("neither exchange succeeded")
		}
		if got := bearerStatus(t, room, access); got != http.StatusUnauthorized {
			t.Fatalf("the code was presented twice, yet its token still works: %d", got)
		}
	})
	t.Run("the token endpoint takes its parameters by POST, from the body only", func(t *testing.T) {
		f := newFlow(t, s, room)
		code := f.code(t)
		q := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"http://127.0.0.1:50123/callback"},
			"code_verifier": {f.verifier}, "resource": {f.resource}, "client_id": {f.clientID}}
		get, err := http.Get(s.base + "/token?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if body := testfix.Body(t, get); get.StatusCode != http.StatusMethodNotAllowed || get.Header.Get("Allow") != http.MethodPost {
			t.Fatalf("GET: %d %v %s", get.StatusCode, get.Header, body)
		}
		post, err := http.Post(s.base+"/token?"+q.Encode(), "application/x-www-form-urlencoded", strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		if body := testfix.Body(t, post); post.StatusCode != http.StatusBadRequest {
			t.Fatalf("POST with the parameters in the URL: %d %s", post.StatusCode, body)
		}
		if status, m := f.exchange(t, code, nil); status != http.StatusOK {
			t.Fatalf("the code, sent right after: %d %v", status, m)
		}
	})
	t.Run("an expired code", func(t *testing.T) {
		f := newFlow(t, s, room)
		code := f.code(t)
		ownerExec(t, s, `UPDATE oauth_grant SET code_expires_at = now() - interval '1 second' WHERE client_id = $1`, f.clientID)
		if status, m := f.exchange(t, code, nil); status != http.StatusBadRequest || m["error"] != "invalid_grant" {
			t.Fatalf("%d %v", status, m)
		}
	})
	t.Run("refresh rotates with one step of grace, a lost successor is replaced, reuse revokes the family, and revocation ends tokens", func(t *testing.T) {
		f := newFlow(t, s, room)
		_, m := f.exchange(t, f.code(t), nil)
		r1 := m["refresh_token"].(string)
		refresh := func(rt string) (int, map[string]any) {
			return f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
		}
		status, m2 := refresh(r1)
		if status != http.StatusOK {
			t.Fatalf("refresh: %d %v", status, m2)
		}
		if status, _ := refresh(r1); status != http.StatusOK {
			t.Fatalf("the previous refresh token must still work until its successor is used: %d", status)
		}
		r2 := m2["refresh_token"].(string)
		// Another grant: its first refresh token used, the grace over, its successor never
		// used (the client lost the answer, as Claude Code did): it gets a new successor
		// and the lost one is revoked, so a later use of that one is reuse.
		h := newFlow(t, s, room)
		_, mh := h.exchange(t, h.code(t), nil)
		h1 := mh["refresh_token"].(string)
		status, mh2 := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {h1}})
		if status != http.StatusOK {
			t.Fatalf("refresh h1: %d %v", status, mh2)
		}
		// A value, not arithmetic on the column: Citus refuses a STABLE function (interval
		// arithmetic on timestamptz is one) beside a column in an UPDATE.
		ownerExec(t, s, `UPDATE oauth_token SET used_at = $2
			WHERE kind = 'refresh' AND used_at IS NOT NULL AND grant_id IN (SELECT id FROM oauth_grant WHERE client_id = $1)`,
			h.clientID, time.Now().Add(-oauth.RefreshReuseGrace-time.Second))
		status, mh3 := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {h1}})
		if status != http.StatusOK {
			t.Fatalf("a used refresh token past its grace, its successor never used: %d %v", status, mh3)
		}
		if status, _ := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {mh2["refresh_token"].(string)}}); status != http.StatusBadRequest {
			t.Fatalf("the successor replaced while unused: %d", status)
		}
		if got := bearerStatus(t, room, mh3["access_token"].(string)); got != http.StatusUnauthorized {
			t.Fatalf("the replaced successor's use is reuse and must revoke the grant: %d", got)
		}
		status, m3 := refresh(r2)
		if status != http.StatusOK {
			t.Fatalf("successor: %d %v", status, m3)
		}
		if status, _ := refresh(r1); status != http.StatusBadRequest {
			t.Fatalf("reuse after grace: %d", status)
		}
		if got := bearerStatus(t, room, m3["access_token"].(string)); got != http.StatusUnauthorized {
			t.Fatalf("reuse after grace must revoke the family: %d", got)
		}
		g := newFlow(t, s, room)
		_, m = g.exchange(t, g.code(t), nil)
		resp, err := http.PostForm(s.base+"/revoke", url.Values{"client_id": {g.clientID}, "token": {m["access_token"].(string)}})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("revoke: %v %v", err, resp)
		}
		resp.Body.Close()
		if got := bearerStatus(t, room, m["access_token"].(string)); got != http.StatusUnauthorized {
			t.Fatalf("revoked token: %d", got)
		}
	})
	t.Run("a token ends when its client is revoked", func(t *testing.T) {
		f := newFlow(t, s, room)
		_, m := f.exchange(t, f.code(t), nil)
		ownerExec(t, s, `UPDATE oauth_client SET revoked_at = now() WHERE client_id = $1`, f.clientID)
		if got := bearerStatus(t, room, m["access_token"].(string)); got != http.StatusUnauthorized {
			t.Fatalf("revoked client's token: %d", got)
		}
	})
	t.Run("an operator revokes a grant and its tokens end", func(t *testing.T) {
		f := newFlow(t, s, room)
		_, m := f.exchange(t, f.code(t), nil)
		d, err := pg.Open(context.Background(), s.dbURL, pg.Options{MaxConns: 2, OpsMaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		grants, err := oauth.ListGrants(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(grants, func(g oauth.GrantLine) bool { return g.ClientID == f.clientID })
		if i < 0 || grants[i].Email != anaEmail || grants[i].Resource != room {
			t.Fatalf("grants %+v", grants)
		}
		// `admin oauth grants list` prints them with the snake_case keys of every admin
		// output (they were sqlc's Go field names: "ClientID").
		if b, err := json.Marshal(grants[i]); err != nil || !strings.Contains(string(b), `"client_id":"`+f.clientID+`"`) {
			t.Fatalf("a grant's line: %s %v", b, err)
		}
		if ok, err := oauth.RevokeGrant(audit.AsOperator(context.Background(), "ops"), d, grants[i].ID); err != nil || !ok {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		// In the organisation's history, as the dashboard's disconnect.
		if n := auditCount(t, s, "oauth_client", f.clientID, "consent_revoked"); n != 1 {
			t.Fatalf("%d audit events for the operator's grant revoke, want 1", n)
		}
		if got := bearerStatus(t, room, m["access_token"].(string)); got != http.StatusUnauthorized {
			t.Fatalf("token of a revoked grant: %d", got)
		}
	})
	t.Run("a revoked client's grants are listed revoked", func(t *testing.T) {
		f := newFlow(t, s, room)
		f.accessToken(t, "Architect", "rooms")
		d, err := pg.Open(context.Background(), s.dbURL, pg.Options{MaxConns: 2, OpsMaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		// Revoked before revoking ended its grants: the client's row says revoked, its
		// grant is still live. Revoking again ends the grant, and says it changed that.
		asOwner(t, s, func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `UPDATE oauth_client SET revoked_at = now() WHERE client_id = $1`, f.clientID)
			return err
		})
		if ok, err := oauth.RevokeClient(audit.AsOperator(context.Background(), "ops"), d, f.clientID); err != nil || !ok {
			t.Fatalf("revoke client: %v %v", ok, err)
		}
		if n := auditCount(t, s, "oauth_client", f.clientID, "revoked"); n != 1 {
			t.Fatalf("%d audit events for the operator's client revoke, want 1", n)
		}
		grants, err := oauth.ListGrants(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range grants {
			if g.ClientID == f.clientID && g.RevokedAt == nil {
				t.Fatalf("the revoked client's grant %s is listed live", g.ID)
			}
		}
	})
	t.Run("consent without its CSRF token", func(t *testing.T) {
		f := newFlow(t, s, room)
		resp, body := f.br.get(f.authURL(nil))
		if resp.Request.URL.Path == "/login" {
			resp, body = f.br.post(s.base+"/login", url.Values{"email": {anaEmail}, "password": {anaPassword}, "csrf": {field(t, csrfInput, body)}, "return": {resp.Request.URL.Query().Get("return")}})
		}
		id := resp.Request.URL.Query().Get("id")
		resp, _ = f.br.post(s.base+"/consent", url.Values{"id": {id}, "decision": {"allow"}, "choice": {field(t, choiceInput, body)}})
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("consent without CSRF: %d", resp.StatusCode)
		}
	})
	t.Run("sign-in without its CSRF token", func(t *testing.T) {
		br := newBrowser(t, s.base)
		resp, _ := br.post(s.base+"/login", url.Values{"email": {anaEmail}, "password": {anaPassword}})
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("login without CSRF: %d", resp.StatusCode)
		}
	})
}

// Anyone may ask /authorize, and each request is kept until consent: an address gets
// oauth.AuthRequestsPerAddress kept per window, then temporarily_unavailable, while other
// addresses still sign in. Its own server behind a trusted proxy (loopback), so that each
// X-Forwarded-For is another client and no other test shares the count.
func TestAuthorizationRequestsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	trusted, err := throttle.ParseProxies("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	s := startServerOpts(t, serverOptions{file: signInDemo, tune: func(c *config.Config) { c.TrustedProxies = trusted }})
	f := newFlow(t, s, fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(t *testing.T, address string) *url.URL {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, f.authURL(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", address)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound {
			t.Fatalf("authorize from %s: %d %q %v", address, resp.StatusCode, resp.Header.Get("Location"), err)
		}
		return loc
	}
	kept := func(t *testing.T) int {
		return ownerCount(t, s, `SELECT count(*) FROM oauth_auth_request WHERE client_id = $1`, f.clientID)
	}

	t.Run("an address's requests are kept up to the limit", func(t *testing.T) {
		for i := range oauth.AuthRequestsPerAddress {
			if loc := authorize(t, "192.0.2.7"); loc.Query().Has("error") {
				t.Fatalf("request %d refused: %s", i+1, loc)
			}
		}
		if n := kept(t); n != oauth.AuthRequestsPerAddress {
			t.Fatalf("%d requests kept, want %d", n, oauth.AuthRequestsPerAddress)
		}
	})
	t.Run("the next one goes back to the client as temporarily_unavailable, with state and iss, and is not kept", func(t *testing.T) {
		q := authorize(t, "192.0.2.7").Query()
		if q.Get("error") != "temporarily_unavailable" || q.Get("state") != "st" || q.Get("iss") != s.base {
			t.Fatalf("over the limit: %v", q)
		}
		if n := kept(t); n != oauth.AuthRequestsPerAddress {
			t.Fatalf("%d requests kept, want %d", n, oauth.AuthRequestsPerAddress)
		}
	})
	t.Run("another address still gets its request kept", func(t *testing.T) {
		if loc := authorize(t, "192.0.2.8"); loc.Query().Has("error") {
			t.Fatalf("another address refused: %s", loc)
		}
	})
}

// Tokens rest on the agent's keys and the person's membership: each ends the tokens at
// their next call. Its own server, since it changes the seeded agents and people.
func TestTokensEndWithTheirAgentOrPerson(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, signInDemo, nil)
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	f := newFlow(t, s, room)
	_, m := f.exchange(t, f.code(t), nil)
	tok := m["access_token"].(string)
	if got := bearerStatus(t, room, tok); got != http.StatusOK {
		t.Fatalf("fresh token: %d", got)
	}
	t.Run("the agent's keys revoked on the dashboard, then a new key", func(t *testing.T) {
		// The sign-ins stood only while the agent held a key: any key issued later (a
		// rotation, an apply) brought back every token of before the revocation.
		g := newFlow(t, s, room)
		_, m := g.exchange(t, g.code(t), nil)
		tok, refresh := m["access_token"].(string), m["refresh_token"].(string)
		svc := admin.New(openSeeded(t, s), s.base)
		owner := admin.OrgActor{OrgID: s.res.Organisations["acme"].ID, UserID: s.res.Users[anaEmail].ID, Name: "Ana", Role: "owner"}
		if _, err := svc.RevokeOrgAgentKeys(context.Background(), owner, s.res.Agents["acme/architect"].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.RotateAgentKey(context.Background(), "acme/architect"); err != nil {
			t.Fatal(err)
		}
		if got := bearerStatus(t, room, tok); got != http.StatusUnauthorized {
			t.Fatalf("a token of before the revocation, once the agent has a key again: %d", got)
		}
		if status, m := g.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}); status != http.StatusBadRequest {
			t.Fatalf("a refresh token of before the revocation: %d %v", status, m)
		}
	})
	t.Run("the agent's keys revoked", func(t *testing.T) {
		ownerExec(t, s, `UPDATE agent_key SET revoked_at = now() WHERE agent_id = (SELECT id FROM agent WHERE slug = 'architect')`)
		if got := bearerStatus(t, room, tok); got != http.StatusUnauthorized {
			t.Fatalf("token of an agent without keys: %d", got)
		}
		// Nor is it offered at consent: allowed, its code was then refused as invalid_grant.
		for _, res := range []string{room, s.base + "/api/mcp"} {
			f := newFlow(t, s, res)
			if _, body := f.br.consentPage(f.authURL(nil)); strings.Contains(body, "Architect") || !strings.Contains(body, "Backend") {
				t.Fatalf("consent for %s offers an agent without keys, or not the other:\n%s", res, body)
			}
		}
	})
	t.Run("the person removed from the organisation", func(t *testing.T) {
		tok := accessToken(t, s, s.base+"/api/mcp", "Backend", "rooms")
		if got := bearerStatus(t, s.base+"/api/mcp", tok); got != http.StatusOK {
			t.Fatalf("fresh token: %d", got)
		}
		ownerExec(t, s, `DELETE FROM org_member WHERE user_id = (SELECT id FROM app_user WHERE email = $1)`, anaEmail)
		if got := bearerStatus(t, s.base+"/api/mcp", tok); got != http.StatusUnauthorized {
			t.Fatalf("token of a person no longer in the organisation: %d", got)
		}
	})
}

func TestSessionCookieAndPages(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, signInDemo, nil)
	br := newBrowser(t, s.base)
	resp, body := br.get(s.base + "/login")
	if h := resp.Header.Get("Content-Security-Policy"); !strings.Contains(h, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("login page headers %v", resp.Header)
	}
	csrf := field(t, csrfInput, body)
	t.Run("an unknown email gets the same message as a wrong password", func(t *testing.T) {
		resp, body := br.post(s.base+"/login", url.Values{"email": {"nobody@acme.test"}, "password": {"whatever123"}, "csrf": {csrf}})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Email or password is incorrect.") {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("signing in sets an HttpOnly, SameSite=Lax session cookie and returns to a local path only", func(t *testing.T) {
		noFollow := &http.Client{Jar: br.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		form := url.Values{"email": {anaEmail}, "password": {anaPassword}, "csrf": {csrf}, "return": {"//evil.example/x"}}
		req, _ := http.NewRequest(http.MethodPost, s.base+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account" {
			t.Fatalf("%d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		var cookie string
		for _, c := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "rr_session=qyt_ss_") {
				cookie = c
			}
		}
		if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Lax") || strings.Contains(cookie, "Secure") {
			t.Fatalf("session cookie %q (http public URL: not Secure)", cookie)
		}
	})
	t.Run("signing out ends the session", func(t *testing.T) {
		_, body := br.get(s.base + "/account")
		if !strings.Contains(body, anaEmail) {
			t.Fatalf("account page: %s", body)
		}
		br.post(s.base+"/logout", url.Values{"csrf": {field(t, csrfInput, body)}})
		resp, _ := br.get(s.base + "/account")
		if resp.Request.URL.Path != "/login" {
			t.Fatalf("after sign-out the account page is at %s", resp.Request.URL)
		}
	})
}

func TestFailedSignInsAreLimitedPerAccount(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, signInDemo, nil)
	br := newBrowser(t, s.base)
	_, body := br.get(s.base + "/login")
	csrf := field(t, csrfInput, body)
	var statuses []int
	for range 6 {
		resp, body := br.post(s.base+"/login", url.Values{"email": {anaEmail}, "password": {"wrong password"}, "csrf": {csrf}})
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusUnauthorized && !strings.Contains(body, "Email or password is incorrect.") {
			t.Fatalf("failure page: %s", body)
		}
	}
	if !slices.Equal(statuses, []int{401, 401, 401, 401, 401, 429}) {
		t.Fatalf("statuses %v", statuses)
	}
	// The right password is refused too while the account is blocked (from another browser).
	other := newBrowser(t, s.base)
	_, body = other.get(s.base + "/login")
	resp, _ := other.post(s.base+"/login", url.Values{"email": {anaEmail}, "password": {anaPassword}, "csrf": {field(t, csrfInput, body)}})
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("blocked account signed in: %d", resp.StatusCode)
	}
}

// TestRegistrationsAreLimitedPerAddress: RELAYROOM_REGISTRATIONS_PER_ADDRESS bounds how
// often one address registers a client (each is a row, and registration needs no
// credential); past it, 429 with Retry-After in OAuth's error form.
func TestRegistrationsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: signInDemo, tune: func(c *config.Config) { c.RegistrationsPerAddress = 2 }})
	register := func() (int, http.Header, string) {
		t.Helper()
		resp, err := http.Post(s.base+"/register", "application/json", strings.NewReader(`{"redirect_uris":["`+callbackURL+`"]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("register: %d, body not JSON: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, resp.Header, e.Error
	}
	t.Run("up to the limit, clients are registered", func(t *testing.T) {
		for i := range 2 {
			if status, _, _ := register(); status != http.StatusCreated {
				t.Fatalf("registration %d: %d", i+1, status)
			}
		}
	})
	t.Run("past it, 429 with Retry-After", func(t *testing.T) {
		status, h, code := register()
		if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || code != "too_many_requests" {
			t.Fatalf("%d %q Retry-After %q, want 429 too_many_requests with Retry-After", status, code, h.Get("Retry-After"))
		}
	})
}

// auditCount counts the operator's ("operator ops") audit events of one object and action.
func auditCount(t *testing.T, s *server, kind, id, action string) int {
	t.Helper()
	var n int
	asOwner(t, s, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT count(*) FROM audit_event WHERE object_kind = $1 AND object_id = $2 AND action = $3
			AND actor_name = 'operator ops'`, kind, id, action).Scan(&n)
	})
	return n
}
