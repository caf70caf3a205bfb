package oauth

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
)

// Operator commands (`relayroom admin oauth clients|grants list|revoke`), across tenants
// on the owner's pool. Revoking ends every token at its next call (OAuthGrantGetLive).

// ListClients lists registered and document clients, most recently used first.
func ListClients(ctx context.Context, d *pg.DB) ([]db.OAuthClientListRow, error) {
	q := db.New()
	var rows []db.OAuthClientListRow
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		rows, err = q.OAuthClientList(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("oauth: list clients: %w", err)
	}
	return rows, nil
}

// RevokeClient revokes a client: its tokens stop working and it cannot authorize again.
func RevokeClient(ctx context.Context, d *pg.DB, clientID string) (bool, error) {
	q := db.New()
	var n int64
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		n, err = q.OAuthClientRevoke(ctx, tx, clientID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("oauth: revoke client: %w", err)
	}
	return n > 0, nil
}

// ListGrants lists what people consented to, newest first.
func ListGrants(ctx context.Context, d *pg.DB) ([]db.OAuthGrantListRow, error) {
	q := db.New()
	var rows []db.OAuthGrantListRow
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		rows, err = q.OAuthGrantList(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("oauth: list grants: %w", err)
	}
	return rows, nil
}

// RevokeGrant revokes one consent and every token issued under it.
func RevokeGrant(ctx context.Context, d *pg.DB, id uuid.UUID) (bool, error) {
	q := db.New()
	var n int64
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		if n, err = q.OAuthGrantRevokeByID(ctx, tx, id); err != nil {
			return err
		}
		return q.OAuthTokenRevokeByGrantID(ctx, tx, id)
	})
	if err != nil {
		return false, fmt.Errorf("oauth: revoke grant: %w", err)
	}
	return n > 0, nil
}
