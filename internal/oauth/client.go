package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/throttle"
)

// client is a registered public client as op sees it. Every client is "native" in op's
// terms, which gives RFC 8252's rules: https and private-use schemes match exactly, http
// loopback redirect URIs match on any port.
type client struct {
	id           string
	name         string
	redirectURIs []string
}

var _ op.Client = client{}

func (c client) GetID() string                       { return c.id }
func (c client) RedirectURIs() []string              { return c.redirectURIs }
func (c client) PostLogoutRedirectURIs() []string    { return nil }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) LoginURL(id string) string            { return RouteConsent + "?id=" + url.QueryEscape(id) }
func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c client) IDTokenLifetime() time.Duration       { return 0 }
func (c client) DevMode() bool                        { return false }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c client) ClockSkew() time.Duration             { return 0 }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}

// IsScopeAllowed: the endpoints' scopes (op keeps the OpenID ones by itself).
func (c client) IsScopeAllowed(scope string) bool {
	return scope == auth.ScopeThreads || scope == auth.ScopeRooms || slices.Contains(auth.DeskScopes, scope)
}

// errNoClient is an unknown (or revoked, or expired) client id.
var errNoClient = oidc.ErrInvalidClient().WithDescription("unknown client")

func (s *Server) clientByID(ctx context.Context, id string) (client, error) {
	if id == "" || len(id) > 2048 || strings.Contains(id, ",") || text.Check(id) != nil {
		return client{}, errNoClient
	}
	var row db.OAuthClientGetByIDRow
	err := s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: id}, func(tx *pg.Tx) error {
		var err error
		if row, err = s.deps.Q.OAuthClientGetByID(ctx, tx, id); err != nil {
			return err
		}
		return s.deps.Q.OAuthClientTouch(ctx, tx, id)
	})
	if err != nil && !pg.IsNoRows(err) {
		return client{}, storeError("read client", err)
	}
	if s.isMetadataDocumentID(id) && (err != nil || row.FetchedUntil == nil || !s.deps.Now().Before(*row.FetchedUntil)) {
		return s.fetchClient(ctx, id)
	}
	if err != nil {
		return client{}, errNoClient
	}
	return client{id: row.ClientID, name: row.ClientName, redirectURIs: row.RedirectUris}, nil
}

// CheckRedirectURI is the registration rule for one redirect URI: https (any host), http
// on a loopback host (127.0.0.1, [::1], localhost; any port at authorization time), or a
// private-use scheme with a dot or a plain name (`cursor://…`); never a scheme that runs
// or reads something (javascript:, data:, file:, vbscript:, blob:, about:), never a
// fragment, never userinfo.
func CheckRedirectURI(raw string) error {
	if raw == "" || len(raw) > MaxRedirectURIBytes {
		return fmt.Errorf("redirect URI empty or longer than %d bytes", MaxRedirectURIBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("redirect URI %q is not an absolute URI", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Errorf("redirect URI %q has a fragment", raw)
	}
	if u.User != nil {
		return fmt.Errorf("redirect URI %q has user information", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("redirect URI %q: port %s is not a port (1-65535)", raw, p)
		}
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https":
		if u.Host == "" {
			return fmt.Errorf("redirect URI %q has no host", raw)
		}
		return nil
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("redirect URI %q: http is allowed only on a loopback host", raw)
		}
		return nil
	case "javascript", "data", "file", "vbscript", "blob", "about", "ftp", "ws", "wss":
		return fmt.Errorf("redirect URI %q: scheme %s is not allowed", raw, scheme)
	default:
		if osHandlerScheme(scheme) {
			// /authorize redirects its errors at once, before any sign-in: such a URI
			// made a link on this server's origin that opens an operating system's
			// handler (search-ms: and ms-msdt: links are known phishing and exploit
			// launchers). No MCP client uses one.
			return fmt.Errorf("redirect URI %q: scheme %s opens an operating system handler, not a client", raw, scheme)
		}
		return nil // a private-use scheme (RFC 8252 7.1): cursor://, vscode://, …
	}
}

// osHandlerScheme reports the schemes that reach an operating system's or browser's own
// handlers rather than an application of the client's: Windows' ms-* family and its
// search, shell and help handlers, and the browser-internal and network ones.
func osHandlerScheme(scheme string) bool {
	if strings.HasPrefix(scheme, "ms-") {
		return true
	}
	switch scheme {
	case "search-ms", "search", "shell", "mk", "its", "hcp", "res", "jar", "view-source", "intent", "chrome",
		"microsoft-edge", "ldap", "smb", "nfs", "telnet", "ssh", "mailto", "tel", "sms", "callto", "sip":
		return true
	}
	return false
}

// checkRequestedRedirect refuses, before op matches it, a loopback redirect URI that
// differs from every registered one in more than its port. op lets any http or https URI
// on any loopback host stand for any registered loopback URI with the same path and
// query: https for http, localhost or 127.0.0.2 for 127.0.0.1, a fragment (RFC 6749
// 3.1.2: "MUST NOT include a fragment") and user information all passed. RFC 8252 7.3
// frees the port alone: a client's ephemeral listener picks it, while the scheme, host
// and path are what the client registered (Claude Code lists localhost and 127.0.0.1
// and asks with one of them). The error is op's redirect-disabled one: an address that is
// not the client's is never sent to. Other URIs are left to op, which matches them byte
// for byte.
func checkRequestedRedirect(c client, requested string) error {
	u, err := url.Parse(requested)
	if err != nil || requested == "" {
		return nil // op refuses it (missing or not a registered URI)
	}
	if strings.Contains(requested, "#") || u.User != nil {
		return oidc.ErrInvalidRequestRedirectURI().WithDescription("the redirect_uri must not have a fragment or user information")
	}
	if !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") || !isLoopbackHost(u.Hostname()) {
		return nil // not loopback: op requires a registered URI exactly
	}
	if p := u.Port(); p != "" {
		// The port is the one part the client chooses here, so the one unchecked by any
		// registration: a port of a thousand digits was kept with the pending request.
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || len(p) > 5 {
			return oidc.ErrInvalidRequestRedirectURI().WithDescription("the redirect_uri's port is not a port (1-65535)")
		}
	}
	for _, reg := range c.redirectURIs {
		if reg == requested {
			return nil
		}
		ru, err := url.Parse(reg)
		if err != nil {
			continue
		}
		if u.Scheme == "http" && ru.Scheme == "http" && strings.EqualFold(ru.Hostname(), u.Hostname()) &&
			ru.EscapedPath() == u.EscapedPath() && ru.RawQuery == u.RawQuery && ru.ForceQuery == u.ForceQuery {
			return nil
		}
	}
	return oidc.ErrInvalidRequestRedirectURI().WithDescription("the redirect_uri is not registered for this client: " +
		"a loopback one may differ from a registered one only in its port")
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// registration is the RFC 7591 request (the fields we use) and response.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

type registered struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
}

// errorAnswer is an OAuth error's JSON body (RFC 6749 5.2, RFC 7591 3.2.2).
type errorAnswer struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// RFC 7591 error codes.
const (
	errInvalidRedirectURI    = "invalid_redirect_uri"
	errInvalidClientMetadata = "invalid_client_metadata"
)

// ClientIDPrefix starts a registered client's id.
const ClientIDPrefix = "rrc_"

// register is dynamic client registration (RFC 7591) for public clients. A request that
// lists several redirect URIs keeps each valid one (Cursor sends three, some of which
// another server may not like) and fails only when none is valid.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, errorAnswer{errInvalidClientMetadata, "register with POST"})
		return
	}
	ctx := r.Context()
	if s.deps.Registrations != nil {
		at := throttle.Attempt{Address: "register/" + s.deps.ClientAddress(r), Always: true}
		if err := s.deps.Registrations.Admit(ctx, at); err != nil {
			w.Header().Set("Retry-After", "60")
			writeJSON(w, http.StatusTooManyRequests, errorAnswer{"too_many_requests", "too many registrations from this address: retry later"})
			return
		}
		// Every registration counts: the limit is on how often, not on failures.
		defer s.deps.Registrations.Refused(ctx, at)
	}
	var req registration
	// Read whole and unmarshalled as one value: a decoder stopped after the first, so an
	// object followed by anything else was registered, and `null` read as an empty object
	// (refused for its redirect URIs, not as what it is).
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRegistrationBytes))
	if err == nil {
		if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
			err = errors.New("not a JSON object")
		} else {
			err = json.Unmarshal(t, &req)
		}
	}
	if err != nil {
		msg := "the body must be a JSON object of client metadata"
		var large *http.MaxBytesError
		if errors.As(err, &large) {
			// A valid document that is only too long must not read as malformed.
			msg = fmt.Sprintf("the client metadata is larger than %d bytes", MaxRegistrationBytes)
		}
		writeJSON(w, http.StatusBadRequest, errorAnswer{errInvalidClientMetadata, msg})
		return
	}
	switch req.TokenEndpointAuthMethod {
	case "", "none", "client_secret_post", "client_secret_basic":
		// Every client is registered public, and the answer says so ("none", no secret):
		// RFC 7591 3.2.1 lets the server replace a requested value, and clients read the
		// method from the answer. Claude.ai's connector asks for client_secret_post and
		// failed to connect where that request was refused.
	default:
		writeJSON(w, http.StatusBadRequest, errorAnswer{errInvalidClientMetadata,
			fmt.Sprintf("token_endpoint_auth_method %q is not supported: clients are public (none) and prove themselves with PKCE", req.TokenEndpointAuthMethod)})
		return
	}
	for _, g := range req.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			writeJSON(w, http.StatusBadRequest, errorAnswer{errInvalidClientMetadata, "grant_types may hold authorization_code and refresh_token only"})
			return
		}
	}
	if len(req.ClientName) > MaxClientNameBytes {
		req.ClientName = req.ClientName[:MaxClientNameBytes]
	}
	var uris []string
	var refused []string
	for _, u := range req.RedirectURIs {
		if err := CheckRedirectURI(u); err != nil {
			refused = append(refused, err.Error())
			continue
		}
		if !slices.Contains(uris, u) && len(uris) < MaxRedirectURIs {
			uris = append(uris, u)
		}
	}
	if len(uris) == 0 {
		desc := "redirect_uris must hold at least one https, loopback http or private-use URI"
		if len(refused) > 0 {
			desc = strings.Join(refused, "; ")
		}
		writeJSON(w, http.StatusBadRequest, errorAnswer{errInvalidRedirectURI, desc})
		return
	}
	raw, _, err := auth.Generate(ClientIDPrefix)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorAnswer{"server_error", "could not register"})
		return
	}
	id := raw[:len(ClientIDPrefix)+24] // a public identifier: no checksum needed
	name := strings.ToValidUTF8(strings.ReplaceAll(req.ClientName, "\x00", ""), "")
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: id}, func(tx *pg.Tx) error {
		return s.deps.Q.OAuthClientInsert(ctx, tx, db.OAuthClientInsertParams{ClientID: id, ClientName: name, RedirectUris: uris, Source: sourceRegistration})
	})
	if err != nil {
		s.deps.Log.ErrorContext(ctx, "register client", "error", err.Error())
		writeJSON(w, http.StatusServiceUnavailable, errorAnswer{"temporarily_unavailable", "could not register: retry later"})
		return
	}
	writeJSON(w, http.StatusCreated, registered{
		ClientID: id, ClientIDIssuedAt: s.deps.Now().Unix(), ClientName: name, RedirectURIs: uris,
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
	})
}
