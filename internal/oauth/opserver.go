package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/throttle"
)

// opServer is what op's router calls once it has parsed and checked a request. Only the
// authorization, token and revocation endpoints are routed to it; the rest of op.Server
// answers "not implemented".
type opServer struct {
	op.UnimplementedServer
	s *Server
}

// errInvalidTarget is RFC 8707's error for a resource that is not ours or differs from the
// one the grant was given for.
func errInvalidTarget(desc string) *oidc.Error {
	return &oidc.Error{ErrorType: "invalid_target", Description: desc}
}

// errTemporarilyUnavailable is RFC 6749 4.1.2.1's error for an authorization server that
// cannot take the request now (here: the address's pending-request limit).
func errTemporarilyUnavailable(desc string) *oidc.Error {
	return &oidc.Error{ErrorType: "temporarily_unavailable", Description: desc}
}

// errUnavailable is the error for a request the database could not serve (an outage:
// pg.IsInfrastructure), which clients retry; cause is kept for the log.
func errUnavailable(cause error) *oidc.Error {
	return errTemporarilyUnavailable(pg.MsgUnavailable).WithParent(cause)
}

// storeError is the answer to a request whose database call failed (what names the call,
// for the log): an outage (the database unreachable, restarting, a statement past its
// timeout) is 503 errUnavailable, as /register answers; anything else stays server_error
// (500).
func storeError(what string, err error) error {
	cause := fmt.Errorf("%s: %w", what, err)
	if pg.IsInfrastructure(err) {
		return op.NewStatusError(errUnavailable(cause), http.StatusServiceUnavailable)
	}
	return oidc.ErrServerError().WithParent(cause)
}

// VerifyAuthRequest finds the client (op checks the redirect URI against it next). A
// request that names none of its resource's scopes gets them all: op refuses an empty
// scope, MCP clients that skip the challenge's scope must still connect, and clients add
// offline_access or openid on their own (the desk's consent then offered no permission
// at all, and its Allow could never succeed).
func (o *opServer) VerifyAuthRequest(ctx context.Context, r *op.Request[oidc.AuthRequest]) (*op.ClientRequest[oidc.AuthRequest], error) {
	c, err := o.s.clientByID(ctx, r.Data.ClientID)
	if err != nil {
		return nil, err
	}
	if err := checkRequestedRedirect(c, r.Data.RedirectURI); err != nil {
		return nil, err
	}
	if res, ok := auth.ParseResource(o.s.issuer, r.Form.Get("resource")); ok {
		own := res.Scopes()
		if !slices.ContainsFunc(r.Data.Scopes, func(sc string) bool { return slices.Contains(own, sc) }) {
			r.Data.Scopes = append(r.Data.Scopes, own...)
		}
	} else if len(r.Data.Scopes) == 0 {
		// No resource of ours and no scope: op would refuse the empty scope before
		// Authorize ran, as invalid_request "The scope of your request is missing", which
		// sends the client looking for the wrong parameter. A scope op keeps lets the
		// request reach Authorize, which refuses the resource (invalid_target) before
		// anything is stored.
		r.Data.Scopes = []string{oidc.ScopeOpenID}
	}
	return &op.ClientRequest[oidc.AuthRequest]{Request: r, Client: c}, nil
}

// s256Challenge is an S256 code challenge: BASE64URL(SHA256(verifier)) without padding,
// 43 characters (RFC 7636 4.2). Anything else could never match a verifier.
var s256Challenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// Authorize runs with a redirect URI the client registered: it requires PKCE S256 and a
// resource that is one of our endpoints, keeps the request, and sends the person to the
// consent page (which signs them in first).
func (o *opServer) Authorize(ctx context.Context, r *op.ClientRequest[oidc.AuthRequest]) (*op.Redirect, error) {
	d := r.Data
	if reason, _ := ctx.Value(refusedStateKey{}).(string); reason != "" {
		// First: the state was taken out of the request, and no other error may be
		// answered as if the client had sent none.
		return o.s.errorRedirect(d.RedirectURI, "", oidc.ErrInvalidRequest().WithDescription("%s", reason))
	}
	if d.ResponseType != oidc.ResponseTypeCode {
		return o.s.errorRedirect(d.RedirectURI, d.State, oidc.ErrInvalidRequest().WithDescription("only response_type=code is supported"))
	}
	if d.CodeChallenge == "" || d.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return o.s.errorRedirect(d.RedirectURI, d.State, oidc.ErrInvalidRequest().WithDescription("PKCE is required with code_challenge_method=S256"))
	}
	if len(d.CodeChallenge) > MaxCodeChallengeBytes {
		return o.s.errorRedirect(d.RedirectURI, d.State, oidc.ErrInvalidRequest().WithDescription("code_challenge is longer than %d characters", MaxCodeChallengeBytes))
	}
	if !s256Challenge.MatchString(d.CodeChallenge) {
		return o.s.errorRedirect(d.RedirectURI, d.State, oidc.ErrInvalidRequest().WithDescription("code_challenge must be the 43 base64url characters of an S256 challenge"))
	}
	if slices.Contains(d.Prompt, oidc.PromptNone) {
		// OIDC Core 3.1.2.1: no page may be shown. Consent is asked every time here, so a
		// silent authorization never succeeds; the client is told at once instead of
		// waiting on a page it cannot show.
		return o.s.errorRedirect(d.RedirectURI, d.State, &oidc.Error{ErrorType: "consent_required",
			Description: "every authorization asks the person's consent: prompt=none cannot succeed"})
	}
	resources := r.Form["resource"]
	if len(resources) != 1 {
		return o.s.errorRedirect(d.RedirectURI, d.State, errInvalidTarget("exactly one resource (the MCP endpoint URL) is required"))
	}
	if len(resources[0]) > MaxResourceBytes || text.Check(resources[0]) != nil {
		// Before it is parsed: a threads resource takes any path segment as its connect
		// code, so a NUL or invalid UTF-8 reached the database (server_error, and an ERROR
		// log line per anonymous request) and a megabyte-long one was stored.
		return o.s.errorRedirect(d.RedirectURI, d.State, errInvalidTarget(
			fmt.Sprintf("the resource must be text of at most %d bytes", MaxResourceBytes)))
	}
	res, ok := auth.ParseResource(o.s.issuer, resources[0])
	if !ok {
		return o.s.errorRedirect(d.RedirectURI, d.State, errInvalidTarget("the resource is not an MCP endpoint of this server"))
	}
	// op keeps every allowed scope as often as it is sent: "rooms rooms …" filling the
	// request line was stored as an array of a hundred thousand.
	scopes := make([]string, 0, len(d.Scopes))
	for _, sc := range d.Scopes {
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if t := o.s.deps.AuthRequests; t != nil {
		address, _ := ctx.Value(clientAddressKey{}).(string)
		at := throttle.Attempt{Address: "authorize/" + address, Always: true}
		if err := t.Admit(ctx, at); err != nil {
			return o.s.errorRedirect(d.RedirectURI, d.State, errTemporarilyUnavailable("too many authorization requests from this address: retry in a minute"))
		}
		// Every kept request counts: the limit is on how many are stored, not on failures.
		defer t.Refused(ctx, at)
	}
	id := uuid.NewString() // random (v4): it names a pending request in the consent URL
	err := o.s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: id}, func(tx *pg.Tx) error {
		return o.s.deps.Q.AuthRequestInsert(ctx, tx, db.AuthRequestInsertParams{
			ID: id, ClientID: r.Client.GetID(), RedirectUri: d.RedirectURI, State: d.State,
			CodeChallenge: d.CodeChallenge, Resource: res.URL, Scopes: scopes,
			LifetimeSeconds: AuthRequestLifetime.Seconds(),
		})
	})
	if err != nil {
		e := oidc.ErrServerError().WithParent(fmt.Errorf("keep authorization request: %w", err))
		if pg.IsInfrastructure(err) {
			// RFC 6749 4.1.2.1: the client is told to try again, as /token's 503 tells it.
			e = errUnavailable(e.Parent)
		}
		return o.s.errorRedirect(d.RedirectURI, d.State, e)
	}
	return op.NewRedirect(r.Client.LoginURL(id)), nil
}

// errorRedirect sends an authorization error to the client's redirect URI with state and
// iss (RFC 9207).
func (s *Server) errorRedirect(redirectURI, state string, e *oidc.Error) (*op.Redirect, error) {
	if e.ErrorType == oidc.ServerError {
		s.deps.Log.Error("authorization request failed", "error", e.Error())
		e.Description = "the server could not handle the request: retry later"
	}
	return op.NewRedirect(s.responseURL(redirectURI, url.Values{"error": {string(e.ErrorType)}, "error_description": {e.Description}}, state)), nil
}

// responseURL adds the authorization response's parameters, state and iss to a
// redirect URI (keeping any query it has).
func (s *Server) responseURL(redirectURI string, v url.Values, state string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return redirectURI // registered and checked: cannot happen
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// VerifyClient: every client is public (token_endpoint_auth_method none), identified by
// its client_id; PKCE proves the code's holder.
func (o *opServer) VerifyClient(ctx context.Context, r *op.Request[op.ClientCredentials]) (op.Client, error) {
	c, err := o.verifyClient(ctx, r)
	var oe *oidc.Error
	basic := len(r.Header.Get("Authorization")) > 6 && strings.EqualFold(r.Header.Get("Authorization")[:6], "basic ")
	if err != nil && basic && errors.As(err, &oe) && oe.ErrorType == oidc.InvalidClient {
		// RFC 6749 5.2: a client that authenticated with the Authorization header (HTTP
		// Basic, the one op reads) and failed MUST get 401 with WWW-Authenticate
		// (clientChallenge adds it), not op's 400.
		return nil, op.NewStatusError(err, http.StatusUnauthorized)
	}
	return c, err
}

func (o *opServer) verifyClient(ctx context.Context, r *op.Request[op.ClientCredentials]) (op.Client, error) {
	if r.Data.ClientSecret != "" || r.Data.ClientAssertion != "" {
		return nil, oidc.ErrInvalidClient().WithDescription("clients are public: no secret or assertion")
	}
	return o.s.clientByID(ctx, r.Data.ClientID)
}

func (o *opServer) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	resp, err := o.s.exchangeCode(ctx, r.Client.GetID(), r.Data, r.Form)
	if err != nil {
		return nil, o.s.tokenError(err)
	}
	return op.NewResponse(resp), nil
}

func (o *opServer) RefreshToken(ctx context.Context, r *op.ClientRequest[oidc.RefreshTokenRequest]) (*op.Response, error) {
	resp, err := o.s.refresh(ctx, r.Client.GetID(), r.Data.RefreshToken, r.Form)
	if err != nil {
		return nil, o.s.tokenError(err)
	}
	return op.NewResponse(resp), nil
}

// Revocation (RFC 7009): an access token ends alone; a refresh token ends its whole grant.
// Unknown tokens and other clients' tokens are answered 200 like known ones.
func (o *opServer) Revocation(ctx context.Context, r *op.ClientRequest[oidc.RevocationRequest]) (*op.Response, error) {
	if err := o.s.revoke(ctx, r.Client.GetID(), r.Data.Token); err != nil {
		return nil, storeError("revoke", err)
	}
	return op.NewResponse(nil), nil
}

// tokenError keeps RFC 6749 errors (with the status storeError gave one) and hides other
// failures' causes: a database outage is 503 temporarily_unavailable, anything else
// server_error.
func (s *Server) tokenError(err error) error {
	var se op.StatusError
	if errors.As(err, &se) {
		return se
	}
	var oe *oidc.Error
	if errors.As(err, &oe) {
		return oe
	}
	s.deps.Log.Error("token request failed", "error", err.Error())
	if pg.IsInfrastructure(err) {
		return storeError("token request", err)
	}
	return oidc.ErrServerError().WithDescription("the server could not handle the request: retry later")
}
