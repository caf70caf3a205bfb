package auth

import (
	"context"
	"errors"

	"github.com/google/uuid"
)

// Prefixes of the OAuth credentials the authorization server issues (internal/oauth).
const (
	AccessTokenPrefix  = "qyt_at_"
	RefreshTokenPrefix = "qyt_rt_"
	CodePrefix         = "qyt_ac_"
)

// ErrInvalidToken is an access token that is unknown, expired, revoked, or rests on
// something that no longer holds (its agent's keys revoked, its person removed from the
// organisation, its client revoked).
var ErrInvalidToken = errors.New("invalid_token")

// TokenGrant is what a verified access token acts as.
type TokenGrant struct {
	OrgID    uuid.UUID
	PersonID uuid.UUID
	// AgentID is the agent a rooms or threads token acts as (nil for the desk).
	AgentID uuid.UUID
	// Part is the threads part the token is bound to ("" elsewhere).
	Part string
	// Scopes the person granted (the desk's choice; the endpoint's scope elsewhere).
	Scopes []string
	// Resource is the endpoint URL the token was issued for (its audience).
	Resource string
}

// TokenVerifier checks `Authorization: Bearer qyt_at_…` for the MCP endpoints. The
// authorization server implements it; the endpoints depend on this interface only.
type TokenVerifier interface {
	VerifyAccessToken(ctx context.Context, token string) (TokenGrant, error)
}
