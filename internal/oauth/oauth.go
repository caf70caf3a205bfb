// Package oauth is relayroom's OAuth 2.1 authorization server for MCP clients
// (docs/auth.md). github.com/zitadel/oidc/v3's op package parses and validates the
// authorization, token and revocation requests, checks redirect URIs (RFC 8252 loopback
// ports included) and writes RFC 6749 errors; this package adds what it does not do and
// keeps everything in Postgres: dynamic client registration, the `resource` parameter
// bound into the grant, PKCE S256 required, the consent page, `iss` in the authorization
// response, refresh tokens without offline_access, rotation with a one-step grace, and
// opaque `qyt_at_` / `qyt_rt_` tokens stored hashed.
package oauth

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/throttle"
	"github.com/relayroom/relayroom/internal/web"
)

// Routes of the authorization server.
const (
	RouteAuthorize = "/authorize"
	RouteToken     = "/token"
	RouteRevoke    = "/revoke"
	RouteRegister  = "/register"
	RouteConsent   = "/consent"
	RouteASMeta    = "/.well-known/oauth-authorization-server"
	RouteOIDCMeta  = "/.well-known/openid-configuration"
)

// Lifetimes and bounds.
const (
	AuthRequestLifetime = 10 * time.Minute
	CodeLifetime        = 60 * time.Second
	AccessTokenLifetime = time.Hour
	// RefreshTokenLifetime is sliding: each rotation issues a new one for this long.
	RefreshTokenLifetime = 30 * 24 * time.Hour
	// RefreshReuseGrace is how long after its first use a refresh token is still accepted
	// (while its successor is unused): long enough for a client that lost the answer to
	// retry, or for two of its processes refreshing at once. Presented later, it is reuse
	// and revokes the grant; without the bound a token copied after its use could fork the
	// grant for as long as the client sat idle.
	RefreshReuseGrace = time.Minute
	// ClientIdleDays: a client unused this long is deleted with its grants.
	ClientIdleDays = 90
	// Registration bounds (RFC 7591 requests are anonymous).
	MaxRedirectURIs      = 20
	MaxRedirectURIBytes  = 2000
	MaxClientNameBytes   = 200
	MaxRegistrationBytes = 16 << 10
	// Authorization request bounds (anonymous requests too: the pending request is
	// stored until consent). MaxStateBytes: clients send a random value of tens of bytes;
	// unbounded, a request could store up to the request line's megabyte. A longer state
	// is refused without being echoed back. MaxCodeChallengeBytes: an S256 challenge is
	// 43 characters (RFC 7636 4.2); a longer one could never match a verifier.
	MaxStateBytes         = 2048
	MaxCodeChallengeBytes = 128
	// MaxResourceBytes: our endpoints' URLs are well under it (a threads connect code is
	// tens of characters); a longer resource is none of them.
	MaxResourceBytes = 2048
	// AuthRequestsPerAddress bounds the authorization requests one client address may
	// have kept per window of the failed-authentication limits (one minute by default):
	// each is a row until consent or AuthRequestLifetime, so with the default window an
	// address holds at most ten windows' worth. A person signs in a few times a minute at
	// most, an office behind one address a few dozen; past it, /authorize answers
	// temporarily_unavailable until the window ends.
	AuthRequestsPerAddress = 60
)

// ScopeOfflineAccess is accepted and advertised; refresh tokens are issued without it.
const ScopeOfflineAccess = "offline_access"

// Deps are what the authorization server needs.
type Deps struct {
	DB        *pg.DB
	Q         *db.Queries
	PublicURL string // its origin is the issuer
	Site      *web.Site
	Log       *slog.Logger
	// Registrations limits POST /register per client address (counted in the shared
	// Postgres counters, like failed authentications); nil: unlimited.
	Registrations *throttle.Throttle
	// AuthRequests limits the authorization requests kept for consent per client address
	// (each is a row until it expires; anyone may ask); nil: unlimited.
	AuthRequests  *throttle.Throttle
	ClientAddress func(*http.Request) string
	// MetadataDocumentsAllowPrivate lets client ID metadata documents be fetched from
	// loopback and private addresses (and over http on 127.0.0.1): for tests only.
	MetadataDocumentsAllowPrivate bool
	// MetadataDocumentRoots, when not nil, are the certificate authorities trusted for
	// metadata documents (tests: a local TLS server's); nil: the system's.
	MetadataDocumentRoots *x509.CertPool
	Now                   func() time.Time
}

// Server is the authorization server: an http.Handler for its routes, and the access
// token verifier of the MCP endpoints (auth.TokenVerifier).
type Server struct {
	deps   Deps
	issuer string
	op     http.Handler
}

// NewHandler builds the authorization server.
func NewHandler(d Deps) (*Server, error) {
	if d.Q == nil {
		d.Q = db.New()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Server{deps: d, issuer: strings.TrimRight(d.PublicURL, "/")}
	s.op = op.RegisterServer(&opServer{s: s}, op.Endpoints{
		Authorization: op.NewEndpoint(RouteAuthorize),
		Token:         op.NewEndpoint(RouteToken),
		Revocation:    op.NewEndpoint(RouteRevoke),
	},
		// The server's Origin check answers CORS for these routes (any origin, no
		// credentials: docs/auth.md); the library's own echoed the origin and allowed
		// credentials, replacing it.
		op.WithServerCORSOptions(nil))
	return s, nil
}

// ServeHTTP serves every route of the authorization server.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == RouteASMeta || strings.HasPrefix(p, RouteASMeta+"/") || p == RouteOIDCMeta || strings.HasPrefix(p, RouteOIDCMeta+"/"):
		s.metadata(w, r)
	case p == RouteRegister:
		s.register(w, r)
	case p == RouteConsent:
		s.consent(w, r)
	case p == RouteToken || p == RouteRevoke:
		// Token answers hold credentials: no cache may keep them (RFC 6749 5.1; op sets
		// only the content type).
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		if r.Method != http.MethodPost {
			// op reads a form from any method: a GET carried the code, its verifier or a
			// refresh token in the URL, which proxies and browser histories keep.
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, errorAnswer{"invalid_request", "send this request with POST, its parameters in the body"})
			return
		}
		// Parameters are read from the body only (RFC 6749 3.2, RFC 7009 2.1), never the URL.
		r = r.Clone(r.Context())
		r.URL.RawQuery = ""
		if err := r.ParseForm(); err != nil {
			// As op answers it (it would read the same error): malformed, cut short, or
			// over net/http's 10 MB for a form.
			writeJSON(w, http.StatusBadRequest, errorAnswer{"invalid_request", "the body cannot be read as a form (application/x-www-form-urlencoded, at most 10 MB)"})
			return
		}
		if name := repeatedParameter(r.PostForm); name != "" {
			writeJSON(w, http.StatusBadRequest, errorAnswer{"invalid_request", fmt.Sprintf("the parameter %q is sent more than once", text.Cut(name, 64))})
			return
		}
		s.op.ServeHTTP(&clientChallenge{ResponseWriter: w, issuer: s.issuer}, s.withClientAddress(r))
	case p == RouteAuthorize:
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			// RFC 6749 3.1 names GET (and allows POST); op served any method as GET, so a
			// PUT or DELETE kept a pending request like a GET.
			w.Header().Set("Allow", "GET, POST")
			writeJSON(w, http.StatusMethodNotAllowed, errorAnswer{"invalid_request", "open this address with GET (or POST a form)"})
			return
		}
		if err := r.ParseForm(); err != nil {
			// As op answers it; parsed here, op would not parse it again and see the error.
			op.WriteError(w, r, oidc.ErrInvalidRequest().WithDescription("error parsing form").WithParent(err), nil)
			return
		}
		if reason := refusedState(r.Form["state"]); reason != "" {
			// Taken out before op reads the request: every error redirect, op's own (a
			// response type, prompt or scope it refuses) and ours (PKCE, resource) alike,
			// would echo it back. Authorize refuses the request for it.
			r.Form.Del("state")
			r = r.WithContext(context.WithValue(r.Context(), refusedStateKey{}, reason))
		}
		s.op.ServeHTTP(&issuerRedirects{ResponseWriter: w, issuer: s.issuer}, s.withClientAddress(r))
	default:
		http.NotFound(w, r)
	}
}

// refusedStateKey carries why an authorization request's state was refused (and taken
// out of the request) to Authorize.
type refusedStateKey struct{}

// refusedState says why a state cannot be echoed back, "" when it can: longer than
// MaxStateBytes (clients send tens of bytes; unbounded, a request could make us store and
// redirect with up to the request line's megabyte), not text (a NUL or invalid UTF-8 has
// no place in a URL the client reads), or sent more than once (RFC 6749 3.1).
func refusedState(values []string) string {
	if len(values) > 1 {
		return "state is sent more than once"
	}
	for _, v := range values {
		if len(v) > MaxStateBytes {
			return fmt.Sprintf("state is longer than %d bytes", MaxStateBytes)
		}
		if text.Check(v) != nil {
			return "state must be text"
		}
	}
	return ""
}

// clientAddressKey carries the client address of an /authorize, /token or /revoke
// request to what op calls with the request's context only (Authorize's pending-request
// limit, the metadata document fetch's limit).
type clientAddressKey struct{}

func (s *Server) withClientAddress(r *http.Request) *http.Request {
	if s.deps.ClientAddress == nil {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), clientAddressKey{}, s.deps.ClientAddress(r)))
}

// issuerRedirects adds iss to the error redirects op writes itself (a prompt, scope,
// response type or challenge method it refuses before our Authorize runs): RFC 9207 wants
// it on every authorization response, errors included, and the metadata promises it. The
// responses we build carry it already (errorRedirect, responseURL).
type issuerRedirects struct {
	http.ResponseWriter
	issuer string
}

func (w *issuerRedirects) WriteHeader(status int) {
	if status == http.StatusFound || status == http.StatusSeeOther {
		if u, err := url.Parse(w.Header().Get("Location")); err == nil {
			if q := u.Query(); q.Has("error") && !q.Has("iss") {
				q.Set("iss", w.issuer)
				u.RawQuery = q.Encode()
				w.Header().Set("Location", u.String())
			}
			// op answers in the fragment when the request asks response_mode=fragment:
			// the response is there, so iss goes there too.
			if f, err := url.ParseQuery(u.Fragment); err == nil && f.Has("error") && !f.Has("iss") {
				f.Set("iss", w.issuer)
				u.Fragment, u.RawFragment = f.Encode(), ""
				w.Header().Set("Location", u.String())
			}
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

// clientChallenge adds the WWW-Authenticate header RFC 6749 5.2 requires on a token or
// revocation endpoint's 401 (VerifyClient answers invalid_client with 401 to a client that
// authenticated with the Authorization header); op writes the status alone.
type clientChallenge struct {
	http.ResponseWriter
	issuer string
}

func (w *clientChallenge) WriteHeader(status int) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+w.issuer+`"`)
	}
	w.ResponseWriter.WriteHeader(status)
}

// repeatedParameter names a parameter the form body of a token or revocation request
// holds more than once, "" when none does. Such a request must be refused (RFC 6749 3.1
// and 3.2: parameters "MUST NOT be included more than once"); op took one of the values
// and answered as if it were the request, invalid_grant for a repeated grant type. The
// resource may be repeated (RFC 8707 2), and is checked value by value (checkResource).
// The form is parsed before op sees the request, and op reads it as parsed.
func repeatedParameter(form url.Values) string {
	for name, values := range form {
		if len(values) > 1 && name != "resource" {
			return name
		}
	}
	return ""
}
