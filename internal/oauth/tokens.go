package oauth

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
)

// Token kinds as stored.
const (
	kindAccess  = "access"
	kindRefresh = "refresh"
)

var errBadGrant = oidc.ErrInvalidGrant().WithDescription("the code or refresh token is invalid, expired, revoked or was issued to another client")

// issue makes an access token and a refresh token for a grant, in tx (its tenant is the
// grant's organisation); parent is the refresh token rotated, nil for a code's first pair.
func (s *Server) issue(ctx context.Context, tx *pg.Tx, orgID, grantID uuid.UUID, scopes []string, parent *string) (*oidc.AccessTokenResponse, error) {
	now := s.deps.Now()
	access, ap, err := auth.Generate(auth.AccessTokenPrefix)
	if err != nil {
		return nil, fmt.Errorf("issue token: %w", err)
	}
	refresh, rp, err := auth.Generate(auth.RefreshTokenPrefix)
	if err != nil {
		return nil, fmt.Errorf("issue token: %w", err)
	}
	for _, t := range []db.OAuthTokenInsertParams{
		{OrgID: orgID, TokenID: ap.ID, GrantID: grantID, Kind: kindAccess, SecretHash: ap.Hash(), ExpiresAt: now.Add(AccessTokenLifetime)},
		{OrgID: orgID, TokenID: rp.ID, GrantID: grantID, Kind: kindRefresh, SecretHash: rp.Hash(), ExpiresAt: now.Add(RefreshTokenLifetime), ParentID: parent},
	} {
		if err := s.deps.Q.OAuthTokenInsert(ctx, tx, t); err != nil {
			return nil, fmt.Errorf("issue token: %w", err)
		}
	}
	return &oidc.AccessTokenResponse{
		AccessToken: access, TokenType: oidc.BearerToken, RefreshToken: refresh,
		ExpiresIn: uint64(AccessTokenLifetime.Seconds()), Scope: scopes,
	}, nil
}

// checkResource: a token request may repeat the resource (RFC 8707); it must be the
// grant's.
func checkResource(issuer string, form url.Values, granted string) error {
	for _, r := range form["resource"] {
		// Read as at /authorize: a query the client repeats (a threads URL's ?part=) is
		// not part of the resource.
		if res, ok := auth.ParseResource(issuer, r); !ok || res.URL != granted {
			return errInvalidTarget("the resource differs from the one authorized")
		}
	}
	return nil
}

// exchangeCode is the authorization_code grant. A code is single-use and valid for
// CodeLifetime; a code presented again revokes the grant it created and its tokens
// (RFC 9700 4.3: someone else may hold them).
func (s *Server) exchangeCode(ctx context.Context, clientID string, req *oidc.AccessTokenRequest, form url.Values) (*oidc.AccessTokenResponse, error) {
	code, err := auth.Parse(auth.CodePrefix, req.Code)
	if err != nil {
		return nil, errBadGrant
	}
	var resp *oidc.AccessTokenResponse
	var replayed *grantKey
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: code.ID}, func(tx *pg.Tx) error {
		rows, err := s.deps.Q.OAuthGrantListByCode(ctx, tx, code.ID)
		if err != nil {
			return fmt.Errorf("read code: %w", err)
		}
		var g *db.OAuthGrantListByCodeRow
		for i := range rows {
			if code.Matches(rows[i].CodeHash) {
				g = &rows[i]
			}
		}
		switch {
		case g == nil || g.ClientID != clientID || g.RevokedAt != nil:
			return errBadGrant
		case g.CodeUsedAt != nil:
			replayed = &grantKey{g.OrgID, g.ID}
			return errBadGrant
		case !g.CodeLive: // on the database's clock, which set the code's end
			return errBadGrant
		case req.RedirectURI != g.RedirectUri:
			return oidc.ErrInvalidGrant().WithDescription("redirect_uri differs from the authorization request's")
		}
		if err := op.AuthorizeCodeChallenge(req.CodeVerifier, &oidc.CodeChallenge{Challenge: g.CodeChallenge, Method: oidc.CodeChallengeMethodS256}); err != nil {
			return oidc.ErrInvalidGrant().WithDescription("code_verifier does not match the code_challenge")
		}
		if err := checkResource(s.issuer, form, g.Resource); err != nil {
			return err
		}
		tx.SetTenant(grantTenant(g.OrgID, g.ID))
		n, err := s.deps.Q.OAuthGrantUseCode(ctx, tx, db.OAuthGrantUseCodeParams{OrgID: g.OrgID, ID: g.ID})
		if err != nil {
			return fmt.Errorf("use code: %w", err)
		}
		if n != 1 {
			// Spent by an exchange that committed while this one waited for the row: the
			// code was presented twice, so what the other exchange issued is revoked too.
			replayed = &grantKey{g.OrgID, g.ID}
			return errBadGrant
		}
		live, err := s.liveGrant(ctx, tx, g.OrgID, g.ID, errBadGrant)
		if err != nil {
			return err
		}
		resp, err = s.issue(ctx, tx, g.OrgID, g.ID, live.Scopes, nil)
		return err
	})
	return s.answer(ctx, resp, err, replayed)
}

// grantKey names one grant.
type grantKey struct{ orgID, id uuid.UUID }

// answer is a token request's outcome. A replayed credential (a spent code, a refresh
// token past its grace) first revokes its whole grant, in a transaction of its own since
// the request's rolled back: someone else may hold its tokens.
func (s *Server) answer(ctx context.Context, resp *oidc.AccessTokenResponse, err error, replayed *grantKey) (*oidc.AccessTokenResponse, error) {
	if replayed != nil {
		if rerr := s.revokeGrant(ctx, replayed.orgID, replayed.id); rerr != nil {
			return nil, rerr
		}
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// liveGrant reads a grant that still stands, with what it rests on; one revoked or gone is
// the caller's missing error.
func (s *Server) liveGrant(ctx context.Context, tx *pg.Tx, orgID, grantID uuid.UUID, missing error) (db.OAuthGrantGetLiveRow, error) {
	live, err := s.deps.Q.OAuthGrantGetLive(ctx, tx, db.OAuthGrantGetLiveParams{OrgID: orgID, ID: grantID})
	if pg.IsNoRows(err) {
		return live, missing
	}
	if err != nil {
		return live, fmt.Errorf("read grant: %w", err)
	}
	return live, nil
}

func (s *Server) revokeGrant(ctx context.Context, orgID, grantID uuid.UUID) error {
	return s.deps.DB.InTenant(ctx, pg.Tenant{OrgID: orgID}, func(tx *pg.Tx) error {
		return s.revokeGrantTx(ctx, tx, orgID, grantID)
	})
}

// revokeGrantTx revokes a grant and every token issued under it, in tx.
func (s *Server) revokeGrantTx(ctx context.Context, tx *pg.Tx, orgID, grantID uuid.UUID) error {
	if _, err := s.deps.Q.OAuthGrantRevoke(ctx, tx, db.OAuthGrantRevokeParams{OrgID: orgID, ID: grantID}); err != nil {
		return fmt.Errorf("revoke grant: %w", err)
	}
	if err := s.deps.Q.OAuthTokenRevokeByGrants(ctx, tx, db.OAuthTokenRevokeByGrantsParams{OrgID: orgID, GrantIds: []uuid.UUID{grantID}}); err != nil {
		return fmt.Errorf("revoke grant: %w", err)
	}
	return nil
}

// grantTenant is the tenant that reads one grant with its client (OAuthGrantGetLive): its
// organisation, and the grant named so that its client shows (rr_set_signin).
func grantTenant(orgID, grantID uuid.UUID) pg.Tenant {
	return pg.Tenant{OrgID: orgID, Lookup: grantID.String(), SignIn: true}
}

// findToken returns the stored token a credential names, of the given kind.
func (s *Server) findToken(ctx context.Context, tx *pg.Tx, p auth.Parsed, kind string) (*db.OauthToken, error) {
	rows, err := s.deps.Q.OAuthTokenRows(ctx, tx, p.ID)
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	for i := range rows {
		if rows[i].Kind == kind && p.Matches(rows[i].SecretHash) {
			return &rows[i], nil
		}
	}
	return nil, nil
}

// refresh is the refresh_token grant: rotation with a one-step grace. A refresh token
// stays accepted for RefreshReuseGrace after its first use, until one of its successors
// is first used (clients refresh from two places at once, or lose the answer); each use
// in that minute gets a successor of its own. Presented after its grace, it is reuse and
// revokes its whole grant, unless none of its successors was ever used: then the client
// lost the answer (Claude Code came back days later with such a token), the unused
// successors are revoked and it gets a new one, so one chain stays live.
func (s *Server) refresh(ctx context.Context, clientID, raw string, form url.Values) (*oidc.AccessTokenResponse, error) {
	p, err := auth.Parse(auth.RefreshTokenPrefix, raw)
	if err != nil {
		return nil, errBadGrant
	}
	var resp *oidc.AccessTokenResponse
	var reused *grantKey
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID}, func(tx *pg.Tx) error {
		t, err := s.findToken(ctx, tx, p, kindRefresh)
		if err != nil {
			return err
		}
		if t == nil || !s.deps.Now().Before(t.ExpiresAt) {
			return errBadGrant
		}
		if t.RevokedAt != nil {
			reused = &grantKey{t.OrgID, t.GrantID}
			return errBadGrant
		}
		tx.SetTenant(grantTenant(t.OrgID, t.GrantID))
		live, err := s.liveGrant(ctx, tx, t.OrgID, t.GrantID, errBadGrant)
		if err != nil {
			return err
		}
		if live.ClientID != clientID {
			return errBadGrant
		}
		if err := checkResource(s.issuer, form, live.Resource); err != nil {
			return err
		}
		if t.UsedAt == nil {
			// First use: its predecessor's grace ends now.
			if _, err := s.deps.Q.OAuthTokenMarkRefreshUsed(ctx, tx, db.OAuthTokenMarkRefreshUsedParams{OrgID: t.OrgID, TokenID: t.TokenID}); err != nil {
				return fmt.Errorf("use refresh token: %w", err)
			}
			if err := s.deps.Q.OAuthTokenEndPredecessorGrace(ctx, tx, db.OAuthTokenEndPredecessorGraceParams{
				OrgID: t.OrgID, GrantID: t.GrantID, ParentID: t.ParentID, Before: t.CreatedAt}); err != nil {
				return fmt.Errorf("end grace: %w", err)
			}
		} else {
			// The database stamped the first use, so it tells whether the grace is over:
			// every replica then draws the line at the same instant.
			over, err := s.deps.Q.OAuthTokenRefreshGraceOver(ctx, tx, db.OAuthTokenRefreshGraceOverParams{
				OrgID: t.OrgID, TokenID: t.TokenID, GraceSeconds: RefreshReuseGrace.Seconds()})
			if err != nil {
				return fmt.Errorf("read refresh grace: %w", err)
			}
			if over {
				lost, err := s.successorsLost(ctx, tx, t)
				if err != nil {
					return err
				}
				if !lost {
					reused = &grantKey{t.OrgID, t.GrantID}
					return errBadGrant
				}
			}
		}
		resp, err = s.issue(ctx, tx, t.OrgID, t.GrantID, live.Scopes, &t.TokenID)
		return err
	})
	return s.answer(ctx, resp, err, reused)
}

// successorsLost reports whether a used refresh token, presented after its grace, had
// successors none of which was ever used, and if so revokes them. A token whose
// successors were not recorded (issued before they were) is reuse, as it was then.
func (s *Server) successorsLost(ctx context.Context, tx *pg.Tx, t *db.OauthToken) (bool, error) {
	succ, err := s.deps.Q.OAuthTokenSuccessors(ctx, tx, db.OAuthTokenSuccessorsParams{OrgID: t.OrgID, GrantID: t.GrantID, ParentID: t.TokenID})
	if err != nil {
		return false, fmt.Errorf("read successors: %w", err)
	}
	if len(succ) == 0 || slices.ContainsFunc(succ, func(r db.OAuthTokenSuccessorsRow) bool { return r.Used }) {
		return false, nil
	}
	if err := s.deps.Q.OAuthTokenRevokeSuccessors(ctx, tx, db.OAuthTokenRevokeSuccessorsParams{OrgID: t.OrgID, GrantID: t.GrantID, ParentID: t.TokenID}); err != nil {
		return false, fmt.Errorf("revoke successors: %w", err)
	}
	return true, nil
}

// revoke is RFC 7009 for one client's token.
func (s *Server) revoke(ctx context.Context, clientID, raw string) error {
	kind, prefix := kindAccess, auth.AccessTokenPrefix
	if strings.HasPrefix(raw, auth.RefreshTokenPrefix) {
		kind, prefix = kindRefresh, auth.RefreshTokenPrefix
	}
	p, err := auth.Parse(prefix, raw)
	if err != nil {
		return nil
	}
	return s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID}, func(tx *pg.Tx) error {
		t, err := s.findToken(ctx, tx, p, kind)
		if err != nil || t == nil {
			return err
		}
		tx.SetTenant(grantTenant(t.OrgID, t.GrantID))
		g, err := s.deps.Q.OAuthGrantGetLive(ctx, tx, db.OAuthGrantGetLiveParams{OrgID: t.OrgID, ID: t.GrantID})
		if pg.IsNoRows(err) {
			return nil // already ended
		}
		if err != nil {
			return fmt.Errorf("read grant: %w", err)
		}
		if g.ClientID != clientID {
			return nil
		}
		if kind == kindAccess {
			return s.deps.Q.OAuthTokenRevoke(ctx, tx, db.OAuthTokenRevokeParams{OrgID: t.OrgID, TokenID: t.TokenID})
		}
		return s.revokeGrantTx(ctx, tx, t.OrgID, t.GrantID)
	})
}

// VerifyAccessToken implements auth.TokenVerifier: one transaction, two statements (the
// token by its public id, then its grant under its organisation, with everything the
// grant rests on).
func (s *Server) VerifyAccessToken(ctx context.Context, raw string) (auth.TokenGrant, error) {
	p, err := auth.Parse(auth.AccessTokenPrefix, raw)
	if err != nil {
		return auth.TokenGrant{}, auth.ErrInvalidToken
	}
	var g auth.TokenGrant
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID}, func(tx *pg.Tx) error {
		t, err := s.findToken(ctx, tx, p, kindAccess)
		if err != nil {
			return err
		}
		if t == nil || t.RevokedAt != nil || !s.deps.Now().Before(t.ExpiresAt) {
			return auth.ErrInvalidToken
		}
		tx.SetTenant(grantTenant(t.OrgID, t.GrantID))
		live, err := s.liveGrant(ctx, tx, t.OrgID, t.GrantID, auth.ErrInvalidToken)
		if err != nil {
			return err
		}
		g = auth.TokenGrant{OrgID: t.OrgID, PersonID: live.UserID, Scopes: live.Scopes, Resource: live.Resource}
		if live.AgentID != nil {
			g.AgentID = *live.AgentID
		}
		if live.Part != nil {
			g.Part = *live.Part
		}
		return nil
	})
	if err != nil {
		return auth.TokenGrant{}, err
	}
	return g, nil
}

// Prune deletes what has ended (a periodic job, on the owner's pool): expired sessions,
// authorization requests and tokens, and clients idle for ClientIdleDays with their grants.
func (s *Server) Prune(ctx context.Context) (int64, error) {
	var n int64
	err := s.deps.DB.Operator(ctx, func(tx *pg.Tx) error {
		for _, f := range []func() (int64, error){
			func() (int64, error) { return s.deps.Q.WebSessionPrune(ctx, tx) },
			func() (int64, error) { return s.deps.Q.AuthRequestPrune(ctx, tx) },
			func() (int64, error) { return s.deps.Q.OAuthTokenPrune(ctx, tx) },
			func() (int64, error) { return s.deps.Q.OAuthClientPrune(ctx, tx, ClientIdleDays) },
		} {
			k, err := f()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("oauth: prune: %w", err)
	}
	return n, nil
}
