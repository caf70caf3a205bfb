package tenancy

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
)

// MsgTokenPart refuses a threads call whose ?part= names another part than the one the
// person chose at consent.
const MsgTokenPart = "this token is bound to part %q: it cannot act as part %q"

// The methods below resolve an OAuth access token's grant (auth.TokenGrant, already
// verified by the authorization server) into the same Scope an agent key gives: the token
// acts as the agent the person chose, under exactly that agent's memberships and its
// organisation's agreements.

// AgentGrant resolves a token for the all-rooms address.
func (r *Resolver) AgentGrant(ctx context.Context, g auth.TokenGrant) (Scope, error) {
	s := Scope{OrgID: g.OrgID, AgentID: g.AgentID}
	err := r.DB.InTenant(ctx, resolving(s), func(tx *pg.Tx) error {
		if err := r.Q.MembershipTouchByAgent(ctx, tx, g.AgentID); err != nil {
			return fmt.Errorf("resolve agent: touch: %w", err)
		}
		id, err := r.Q.AgentGetIdentity(ctx, tx, db.AgentGetIdentityParams{OrgID: g.OrgID, ID: g.AgentID})
		if pg.IsNoRows(err) {
			return unauthenticated(MsgUnauthorized)
		}
		if err != nil {
			return fmt.Errorf("resolve agent: identity: %w", err)
		}
		s.AgentSlug, s.AgentName, s.AgentModel, s.AgentKind, s.OrgName = id.Slug, id.Name, id.Model, id.Kind, id.OrgName
		return nil
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve agent", err)
	}
	return s, nil
}

// RoomGrant resolves a token for one room's address (as RoomByKey does for a key).
func (r *Resolver) RoomGrant(ctx context.Context, g auth.TokenGrant, projectID uuid.UUID) (Scope, error) {
	s := Scope{OrgID: g.OrgID, AgentID: g.AgentID, ProjectID: projectID}
	err := r.DB.InTenant(ctx, resolving(s), func(tx *pg.Tx) error { return r.bindRoom(ctx, tx, &s) })
	if err != nil {
		return Scope{}, pg.Classify("resolve room", err)
	}
	return s, nil
}

// PartGrant resolves a token for the threads address: the connect code in the URL must
// still be valid, and the part is the token's (a ?part= naming another is refused).
func (r *Resolver) PartGrant(ctx context.Context, g auth.TokenGrant, connectCode, part string) (Scope, error) {
	if part == "" {
		part = g.Part
	}
	if part != g.Part {
		return Scope{}, apperr.New(apperr.Forbidden, MsgTokenPart, g.Part, part)
	}
	code, err := auth.Parse(auth.ConnectCodePrefix, connectCode)
	if err != nil {
		return Scope{}, unauthenticated("unknown connect code")
	}
	var s Scope
	err = r.DB.InTenant(ctx, pg.Tenant{Lookup: code.ID}, func(tx *pg.Tx) error {
		rows, err := r.Q.CredentialRows(ctx, tx, db.CredentialRowsParams{KeyID: "", CodeID: code.ID})
		if err != nil {
			return fmt.Errorf("verify connect code: %w", err)
		}
		var projectID uuid.UUID
		for _, row := range rows {
			if row.Kind == "code" && code.Matches(row.SecretHash) {
				projectID = row.OwnerID
			}
		}
		if projectID == uuid.Nil {
			return unauthenticated("unknown connect code")
		}
		s = Scope{OrgID: g.OrgID, AgentID: g.AgentID, ProjectID: projectID}
		tx.SetTenant(resolving(s))
		return r.bindPart(ctx, tx, &s, part)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve part", err)
	}
	return s, nil
}
