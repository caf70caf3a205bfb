package oauth

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
)

// Operator commands (`relayroom admin oauth clients|grants list|revoke`), across tenants
// on the owner's pool. Revoking ends every token at its next call (OAuthGrantGetLive).

// ListClients lists registered and document clients, most recently used first.
func ListClients(ctx context.Context, d *pg.DB) ([]ClientLine, error) {
	rows, err := operator(ctx, d, "list clients", db.New().OAuthClientList)
	out := make([]ClientLine, len(rows))
	for i, r := range rows {
		out[i] = ClientLine(r)
	}
	return out, err
}

// ClientLine is a line of `admin oauth clients list`, with the query's row's fields in
// its order (a row converts to it) and the snake_case keys of every admin output.
type ClientLine struct {
	ClientID     string     `json:"client_id"`
	ClientName   string     `json:"client_name"`
	Source       string     `json:"source"`
	RedirectUris []string   `json:"redirect_uris"`
	CreatedAt    time.Time  `json:"created_at"`
	LastUsedAt   time.Time  `json:"last_used_at"`
	RevokedAt    *time.Time `json:"revoked_at"`
}

// GrantLine is a line of `admin oauth grants list`, as ClientLine.
type GrantLine struct {
	OrgID      uuid.UUID  `json:"org_id"`
	ID         uuid.UUID  `json:"id"`
	ClientID   string     `json:"client_id"`
	ClientName string     `json:"client_name"`
	Email      string     `json:"email"`
	Resource   string     `json:"resource"`
	AgentID    *uuid.UUID `json:"agent_id"`
	Part       *string    `json:"part"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// RevokeClient revokes a client: its tokens stop working and it cannot authorize again.
// False when it was revoked already and nothing of it was live; NotFound when there is no
// such client. Its grants and their tokens end with it, each organisation's in its
// history (the operator's `oauth clients revoke`; a client that no organisation consented
// to has no history to be in).
func RevokeClient(ctx context.Context, d *pg.DB, clientID string) (bool, error) {
	q := db.New()
	var n int64
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		// n is set here first: a transaction retried runs again from its start.
		if n, err = q.OAuthClientRevoke(ctx, tx, clientID); err != nil {
			return err
		}
		if n == 0 {
			if err := mustExist(q.OAuthClientExists(ctx, tx, clientID))("no OAuth client %q", clientID); err != nil {
				return err
			}
		}
		// Its grants and their tokens end too (again on a second revoke, for a client
		// revoked before this was done): they already failed, but were listed as live.
		grants, err := q.OAuthGrantRevokeByClient(ctx, tx, clientID)
		if err != nil || len(grants) == 0 {
			return err
		}
		// Grants ended now count as a change, though the client was revoked before.
		ids, perOrg := make([]uuid.UUID, len(grants)), map[uuid.UUID]int{}
		for i, g := range grants {
			ids[i] = g.ID
			perOrg[g.OrgID]++
		}
		n += int64(len(grants))
		orgs := slices.Collect(maps.Keys(perOrg))
		if err := q.OAuthTokenRevokeByGrantIDs(ctx, tx, db.OAuthTokenRevokeByGrantIDsParams{OrgIds: orgs, GrantIds: ids}); err != nil {
			return err
		}
		for org, consents := range perOrg {
			if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: org, Kind: audit.KindOAuthClient, ObjectID: clientID,
				Action: "revoked", Detail: map[string]string{"consents": fmt.Sprint(consents)}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("oauth: revoke client: %w", err)
	}
	return n > 0, nil
}

// mustExist turns an existence check into NotFound with the message given, or its error.
func mustExist(exists bool, err error) func(format string, args ...any) error {
	return func(format string, args ...any) error {
		if err != nil || exists {
			return err
		}
		return apperr.New(apperr.NotFound, format, args...)
	}
}

// ListGrants lists what people consented to, newest first.
func ListGrants(ctx context.Context, d *pg.DB) ([]GrantLine, error) {
	rows, err := operator(ctx, d, "list grants", db.New().OAuthGrantList)
	out := make([]GrantLine, len(rows))
	for i, r := range rows {
		out[i] = GrantLine(r)
	}
	return out, err
}

// RevokeGrant revokes one consent and every token issued under it, in its organisation's
// history as the dashboard's disconnect is.
func RevokeGrant(ctx context.Context, d *pg.DB, id uuid.UUID) (bool, error) {
	q := db.New()
	revoked := false
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := q.OAuthGrantRevokeByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if revoked = len(rows) > 0; !revoked {
			return mustExist(q.OAuthGrantExists(ctx, tx, id))("no OAuth grant %s", id)
		}
		if err := q.OAuthTokenRevokeByGrantID(ctx, tx, id); err != nil {
			return err
		}
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: rows[0].OrgID, Kind: audit.KindOAuthClient, ObjectID: rows[0].ClientID,
			Action: "consent_revoked", Detail: map[string]string{"grant": id.String()}})
	})
	if err != nil {
		return false, fmt.Errorf("oauth: revoke grant: %w", err)
	}
	return revoked, nil
}

// operator runs one operator transaction across tenants, its error told as op.
func operator[T any](ctx context.Context, d *pg.DB, op string, fn func(context.Context, db.DBTX) (T, error)) (T, error) {
	var out T
	err := d.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = fn(ctx, tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("oauth: %s: %w", op, err)
	}
	return out, nil
}
