package desk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// TokenPrefix starts a personal access token (qyt_pt_…, the logger masks every qyt_xx_…).
const TokenPrefix = "qyt_pt_"

// Bounds of a personal access token's lifetime.
const (
	DefaultTokenTTL = 90 * 24 * time.Hour
	MaxTokenTTL     = 366 * 24 * time.Hour
)

// Messages of the HTTP-level refusals: the client starts sign-in or refreshes its token.
const (
	MsgUnauthorized = tenancy.MsgUnauthorized
	MsgTokenExpired = "The token has expired; refresh it or sign in again."
)

// Grant is what a verified token says: whose it is, in which workspace, with which scopes.
type Grant struct {
	OrgID  uuid.UUID
	UserID uuid.UUID
	Scopes []string
}

// AccessTokens verifies tokens issued by sign-in (OAuth access tokens). Verify answers an
// *apperr.Error with code Unauthenticated for a token it does not accept (unknown,
// malformed, expired), so that the endpoint answers 401 and the client signs in or
// refreshes. The grant then goes through the same membership and scope checks as a
// personal access token's.
type AccessTokens interface {
	Verify(ctx context.Context, token string) (Grant, error)
}

func unauthorized(msg string) error { return apperr.New(apperr.Unauthenticated, "%s", msg) }

// Authenticate resolves a bearer token into the caller's Scope: the workspace the token
// fixes, the person, their current role, the workspace's plan and timezone, and the
// token's scopes. A missing, malformed, unknown, revoked or expired token is
// Unauthenticated (HTTP 401 with the sign-in challenge). A token that verifies but whose
// holder is no longer a member of the workspace still resolves, with no role: every tool
// then answers AUTH_REQUIRED.
func (s *Service) Authenticate(ctx context.Context, token string) (tenancy.Scope, error) {
	if token == "" {
		return tenancy.Scope{}, unauthorized(MsgUnauthorized)
	}
	if !strings.HasPrefix(token, TokenPrefix) {
		if s.tokens == nil {
			return tenancy.Scope{}, unauthorized(MsgUnauthorized)
		}
		g, err := s.tokens.Verify(ctx, token)
		if err != nil {
			return tenancy.Scope{}, err
		}
		return s.resolve(ctx, func(*pg.Tx) (Grant, error) { return g, nil })
	}
	p, err := auth.Parse(TokenPrefix, token)
	if err != nil {
		return tenancy.Scope{}, unauthorized(MsgUnauthorized) // no database work for a mistyped token
	}
	return s.resolve(ctx, func(tx *pg.Tx) (Grant, error) {
		tx.SetTenant(pg.Tenant{Lookup: p.ID})
		rows, err := s.q.DeskTokenRows(ctx, tx, p.ID)
		if err != nil {
			return Grant{}, fmt.Errorf("desk: verify token: %w", err)
		}
		for _, r := range rows {
			if !p.Matches(r.SecretHash) {
				continue
			}
			if !s.clock().Before(r.ExpiresAt) {
				return Grant{}, unauthorized(MsgTokenExpired)
			}
			return Grant{OrgID: r.OrgID, UserID: r.UserID, Scopes: r.Scopes}, nil
		}
		return Grant{}, unauthorized(MsgUnauthorized)
	})
}

// resolve runs verify (the token's own lookup, when it has one) and reads the holder's
// membership in one transaction.
func (s *Service) resolve(ctx context.Context, verify func(*pg.Tx) (Grant, error)) (tenancy.Scope, error) {
	var sc tenancy.Scope
	err := s.db.InTenant(pg.WithoutClaim(ctx), pg.Tenant{}, func(tx *pg.Tx) error {
		g, err := verify(tx)
		if err != nil {
			return err
		}
		tx.SetTenant(pg.Tenant{OrgID: g.OrgID})
		sc = tenancy.Scope{OrgID: g.OrgID, Person: &tenancy.Person{UserID: g.UserID, Scopes: slices.Clone(g.Scopes)}}
		m, err := s.q.DeskMemberGrant(ctx, tx, db.DeskMemberGrantParams{OrgID: g.OrgID, UserID: g.UserID})
		switch {
		case pg.IsNoRows(err):
			return nil // verified, but no longer a member: AUTH_REQUIRED from every tool
		case err != nil:
			return fmt.Errorf("desk: read membership: %w", err)
		case m.Deactivated:
			return nil // verified, but deactivated: AUTH_REQUIRED from every tool, like a removed member
		}
		sc.Person.Role, sc.Person.Plan, sc.Person.Timezone = m.Role, m.Plan, m.Timezone
		return nil
	})
	if err != nil {
		return tenancy.Scope{}, pg.Classify("desk: authenticate", err)
	}
	return sc, nil
}

// Token is a personal access token as listed (never its secret).
type Token struct {
	ID        uuid.UUID  `json:"id"`
	Email     string     `json:"email"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// NewToken is a token just created: the only time its secret is shown.
type NewToken struct {
	ID    uuid.UUID `json:"id"`
	Token string    `json:"token"`
	// Email and Scopes say what was issued, to whom (the output said neither).
	Email     string    `json:"email"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CheckScopes refuses an empty list, an unknown scope and a repeated one.
func CheckScopes(scopes []string) error {
	if len(scopes) == 0 {
		return fmt.Errorf("at least one scope is required (%s)", strings.Join(TokenScopes, ", "))
	}
	for i, sc := range scopes {
		if !slices.Contains(TokenScopes, sc) {
			return fmt.Errorf("unknown scope %q (scopes: %s)", sc, strings.Join(TokenScopes, ", "))
		}
		if slices.Contains(scopes[:i], sc) {
			return fmt.Errorf("scope %q is listed twice", sc)
		}
	}
	return nil
}

// CreateToken issues a personal access token to a member of a workspace (owner's pool:
// `relayroom admin desk token create`).
func (s *Service) CreateToken(ctx context.Context, orgID uuid.UUID, email string, scopes []string, ttl time.Duration) (NewToken, error) {
	if err := CheckScopes(scopes); err != nil {
		return NewToken{}, err
	}
	if ttl <= 0 || ttl > MaxTokenTTL {
		return NewToken{}, fmt.Errorf("the token's lifetime must be between 1s and %s", MaxTokenTTL)
	}
	raw, p, err := auth.Generate(TokenPrefix)
	if err != nil {
		return NewToken{}, fmt.Errorf("desk: generate token: %w", err)
	}
	out := NewToken{ID: uuid.Must(uuid.NewV7()), Token: raw, Email: strings.ToLower(email), Scopes: scopes, ExpiresAt: s.clock().Add(ttl).Truncate(time.Second)}
	err = s.db.Operator(ctx, func(tx *pg.Tx) error {
		m, err := s.q.DeskMemberGetIDByEmail(ctx, tx, db.DeskMemberGetIDByEmailParams{OrgID: orgID, Email: strings.ToLower(email)})
		if pg.IsNoRows(err) {
			return fmt.Errorf("%s is not a member of this workspace", email)
		} else if err != nil {
			return fmt.Errorf("desk: find member: %w", err)
		}
		if m.Deactivated {
			return fmt.Errorf("%s is deactivated in this workspace (reactivate them first)", email)
		}
		if err := s.q.DeskTokenInsert(ctx, tx, db.DeskTokenInsertParams{OrgID: orgID, ID: out.ID, UserID: m.UserID, TokenID: p.ID,
			SecretHash: p.Hash(), Scopes: scopes, ExpiresAt: out.ExpiresAt}); err != nil {
			return err
		}
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: orgID, Kind: audit.KindPerson, ObjectID: m.UserID.String(), Action: "desk_token_created",
			Detail: map[string]string{"token": out.ID.String(), "scopes": strings.Join(scopes, ","), "expires_at": out.ExpiresAt.UTC().Format(time.RFC3339)}})
	})
	if err != nil {
		return NewToken{}, err
	}
	return out, nil
}

// ListTokens lists a workspace's tokens, revoked and expired ones included.
func (s *Service) ListTokens(ctx context.Context, orgID uuid.UUID) ([]Token, error) {
	var out []Token
	err := s.db.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := s.q.DeskTokenList(ctx, tx, orgID)
		if err != nil {
			return fmt.Errorf("desk: list tokens: %w", err)
		}
		out = make([]Token, 0, len(rows))
		for _, r := range rows {
			out = append(out, Token{ID: r.ID, Email: r.Email, Prefix: TokenPrefix + r.TokenID + "…", Scopes: r.Scopes,
				CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt})
		}
		return nil
	})
	return out, err
}

// RevokeToken revokes a token from its next call on; false when it was revoked already,
// NotFound when the workspace has no such token.
func (s *Service) RevokeToken(ctx context.Context, orgID, id uuid.UUID) (bool, error) {
	var n int
	err := s.db.Operator(ctx, func(tx *pg.Tx) error {
		holders, err := s.q.DeskTokenRevoke(ctx, tx, db.DeskTokenRevokeParams{OrgID: orgID, ID: id, At: new(s.clock())})
		if err != nil {
			return err
		}
		if n = len(holders); n > 0 {
			// In its holder's history, beside its creation.
			return audit.RecordOperator(ctx, tx, audit.Event{OrgID: orgID, Kind: audit.KindPerson, ObjectID: holders[0].String(), Action: "desk_token_revoked",
				Detail: map[string]string{"token": id.String()}})
		}
		exists, err := s.q.DeskTokenExists(ctx, tx, db.DeskTokenExistsParams{OrgID: orgID, ID: id})
		if err == nil && !exists {
			err = apperr.New(apperr.NotFound, "no token %s in this workspace", id)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("desk: revoke token: %w", err)
	}
	return n == 1, nil
}

// WorkspaceID finds a workspace by its organisation's slug (owner's pool, for admin).
func (s *Service) WorkspaceID(ctx context.Context, slug string) (uuid.UUID, error) {
	var id uuid.UUID
	err := s.db.Operator(ctx, func(tx *pg.Tx) error {
		o, err := s.q.OrganisationGetBySlug(ctx, tx, slug)
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no workspace %q", slug)
		} else if err != nil {
			return fmt.Errorf("desk: find workspace: %w", err)
		}
		id = o.ID
		return nil
	})
	return id, err
}

// SetDeactivated deactivates a member of a workspace, or reactivates one (owner's pool:
// `relayroom admin desk member deactivate|reactivate`). A deactivated member keeps their
// role, restricted inboxes, assignments and everything they wrote; every token of theirs
// still verifies and is answered AUTH_REQUIRED (the ingest API: 401) from the next call
// on, no new token is issued to them, and they cannot be named as a reply's author or an
// assignee. Deactivating keeps the first time. member is false when the person is not a
// member; changed is false when they were so already (nothing written, nothing recorded).
func (s *Service) SetDeactivated(ctx context.Context, orgID uuid.UUID, email string, deactivated bool) (member, changed bool, err error) {
	err = s.db.Operator(ctx, func(tx *pg.Tx) error {
		member, changed = false, false // a transaction retried runs again from its start
		m, err := s.q.DeskMemberGetIDByEmail(ctx, tx, db.DeskMemberGetIDByEmailParams{OrgID: orgID, Email: strings.ToLower(email)})
		if pg.IsNoRows(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("find member: %w", err)
		}
		member = true
		n, err := s.q.DeskMemberSetDeactivated(ctx, tx, db.DeskMemberSetDeactivatedParams{OrgID: orgID, UserID: m.UserID,
			Deactivated: deactivated, At: s.clock()})
		if err != nil || n == 0 {
			return err
		}
		changed = true
		action := "desk_reactivated"
		if deactivated {
			action = "desk_deactivated"
		}
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: orgID, Kind: audit.KindPerson, ObjectID: m.UserID.String(), Action: action})
	})
	if err != nil {
		return false, false, fmt.Errorf("desk: set deactivated: %w", err)
	}
	return member, changed, nil
}
