package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/throttle"
	"github.com/relayroom/relayroom/internal/web"
)

// Limits of people's sign-in and of client registration (docs/auth.md). They count in the
// same shared table as the MCP endpoints' failed authentications, under subjects of their
// own, and use its window so the one prune job serves all of them.
const (
	loginFailuresPerAccount = 5
	loginFailuresPerAddress = 20
)

// newSignIn builds the people's pages and the authorization server.
func (a *App) newSignIn() error {
	w := a.cfg.AuthFailures
	logins := throttle.New(a.db, throttle.Limits{Window: w.Window, PerAddress: loginFailuresPerAddress, PerKey: loginFailuresPerAccount, BlockedDelay: w.BlockedDelay}, a.log, nil)
	regs := throttle.New(a.db, throttle.Limits{Window: w.Window, PerAddress: a.cfg.RegistrationsPerAddress}, a.log, nil)
	authRequests := throttle.New(a.db, throttle.Limits{Window: w.Window, PerAddress: oauth.AuthRequestsPerAddress}, a.log, nil)
	site, err := web.NewHandler(web.Deps{DB: a.db, PublicURL: a.publicURL, Throttle: logins, ClientAddress: a.clientAddress, Log: a.log})
	if err != nil {
		return err
	}
	as, err := oauth.NewHandler(oauth.Deps{DB: a.db, PublicURL: a.publicURL, Site: site, Log: a.log, Registrations: regs, AuthRequests: authRequests, ClientAddress: a.clientAddress,
		MetadataDocumentsAllowPrivate: a.cfg.OAuthMetadataDocumentsAllowPrivate, MetadataDocumentRoots: a.cfg.OAuthMetadataDocumentRoots})
	if err != nil {
		return err
	}
	a.site, a.oauth, a.tokens = site, as, as
	return nil
}

// signInRoutes mounts the people's pages and the authorization server.
func (a *App) signInRoutes(e *echo.Echo) {
	site, as := echo.WrapHandler(a.site), echo.WrapHandler(a.oauth)
	e.Any(web.RouteLogin, site)
	e.Any(web.RouteLogout, site)
	e.Any(web.RouteAccount, site)
	e.GET(web.RouteAssets+"*", site)
	e.HEAD(web.RouteAssets+"*", site)
	for _, p := range []string{oauth.RouteAuthorize, oauth.RouteToken, oauth.RouteRevoke, oauth.RouteRegister, oauth.RouteConsent,
		oauth.RouteASMeta, oauth.RouteASMeta + "/*", oauth.RouteOIDCMeta, oauth.RouteOIDCMeta + "/*"} {
		e.Any(p, as)
	}
}

// bearerToken returns an OAuth access token presented as `Authorization: Bearer qyt_at_…`.
func bearerToken(r *http.Request) string {
	if b := auth.BearerToken(r); len(b) > len(auth.AccessTokenPrefix) && b[:len(auth.AccessTokenPrefix)] == auth.AccessTokenPrefix {
		return b
	}
	return ""
}

// credential is what the failed-authentication limits see of a request: an agent key or
// an access token.
func credential(r *http.Request) string {
	if k := auth.AgentKey(r); k != "" {
		return k
	}
	return bearerToken(r)
}

// tokenGrant verifies a request's access token for the endpoint it was sent to: a token
// works only at the resource it was issued for (its audience), elsewhere it is
// invalid_token, answered with this endpoint's challenge.
func (a *App) tokenGrant(ctx context.Context, r *http.Request, kind string) (auth.TokenGrant, error) {
	res, ok := auth.ResourceAt(a.public(), r.URL.EscapedPath())
	return a.tokenAt(ctx, bearerToken(r), res, ok && res.Kind == kind)
}

// tokenAt verifies an access token for one resource; ok is false when the request's
// address is not that resource (the token is then refused whatever its audience).
func (a *App) tokenAt(ctx context.Context, token string, res auth.Resource, ok bool) (auth.TokenGrant, error) {
	g, err := a.tokens.VerifyAccessToken(ctx, token)
	if errors.Is(err, auth.ErrInvalidToken) {
		return g, apperr.New(apperr.Unauthenticated, "invalid_token: the access token is invalid, expired or revoked")
	}
	if err != nil {
		return g, pg.Classify("verify access token", err)
	}
	if !ok || res.URL != g.Resource {
		return g, apperr.New(apperr.Unauthenticated, "invalid_token: this access token was issued for another endpoint")
	}
	return g, nil
}

// deskTokens lets the desk accept OAuth access tokens (desk.AccessTokens): a token issued
// for the desk endpoint gives the workspace, the person and the scopes they consented
// to; the desk then reads the person's role in the workspace, as for a personal access
// token. A token issued for another endpoint, or not an access token, is invalid_token.
type deskTokens struct{ app *App }

func (d deskTokens) Verify(ctx context.Context, token string) (desk.Grant, error) {
	if !strings.HasPrefix(token, auth.AccessTokenPrefix) {
		return desk.Grant{}, apperr.New(apperr.Unauthenticated, "%s", tenancy.MsgUnauthorized)
	}
	res, ok := auth.ResourceAt(d.app.public(), routeDeskMCP)
	g, err := d.app.tokenAt(ctx, token, res, ok)
	if err != nil {
		return desk.Grant{}, err
	}
	return desk.Grant{OrgID: g.OrgID, UserID: g.PersonID, Scopes: g.Scopes}, nil
}

// tokenScope resolves a request that carries an access token into its Scope, for the
// endpoint kind; ok is false when the request carries none (a key is then looked for).
func (a *App) tokenScope(ctx context.Context, r *http.Request, kind string) (s tenancy.Scope, ok bool, err error) {
	if bearerToken(r) == "" || auth.AgentKey(r) != "" {
		return s, false, nil // an agent key, when sent, is what the caller means (Cursor sends both)
	}
	g, err := a.tokenGrant(ctx, r, kind)
	if err != nil {
		return s, true, err
	}
	res, _ := auth.ResourceAt(a.public(), r.URL.EscapedPath())
	switch kind {
	case auth.ResourceThreads:
		s, err = a.resolver.PartGrant(ctx, g, res.ConnectCode, r.URL.Query().Get("part"))
	case auth.ResourceRoom:
		s, err = a.resolver.RoomGrant(ctx, g, res.ProjectID)
	case auth.ResourceAllRooms:
		s, err = a.resolver.AgentGrant(ctx, g)
	default:
		err = fmt.Errorf("tokenScope: endpoint kind %q resolves its tokens itself", kind)
	}
	return s, true, err
}
