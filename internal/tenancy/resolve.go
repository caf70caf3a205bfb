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

// Messages of the rooms spec, verbatim: clients match on them.
const (
	MsgNotParticipant = "Agent is not a participant in this room"
	MsgUnauthorized   = "Unauthorized"
)

// Resolver turns credentials into Scopes. Each method is one transaction of at most two
// statements plus its COMMIT (the tenant settings travel pipelined with them), and each
// moves the caller's last_seen: presence must follow every authenticated call.
type Resolver struct {
	DB *pg.DB
	Q  *db.Queries
}

func unauthenticated(msg string) error { return apperr.New(apperr.Unauthenticated, "%s", msg) }

// credentials verifies an agent key and, when code is not nil, a connect code, in one
// query. It must be the transaction's first statement: the lookup tenant is its own.
func (r *Resolver) credentials(ctx context.Context, tx *pg.Tx, key auth.Parsed, code *auth.Parsed) (orgID, agentID, projectID uuid.UUID, err error) {
	lookup, codeID := key.ID, ""
	if code != nil {
		lookup, codeID = key.ID+","+code.ID, code.ID
	}
	tx.SetTenant(pg.Tenant{Lookup: lookup})
	rows, err := r.Q.CredentialRows(ctx, tx, db.CredentialRowsParams{KeyID: key.ID, CodeID: codeID})
	if err != nil {
		return orgID, agentID, projectID, fmt.Errorf("verify credentials: %w", err)
	}
	for _, row := range rows {
		switch {
		case row.Kind == "key" && key.Matches(row.SecretHash):
			orgID, agentID = row.OwnerID, row.AgentID
		case row.Kind == "code" && code != nil && code.Matches(row.SecretHash):
			projectID = row.OwnerID
		}
	}
	if code != nil && projectID == uuid.Nil {
		return orgID, agentID, projectID, unauthenticated("unknown connect code")
	}
	if agentID == uuid.Nil {
		return orgID, agentID, projectID, unauthenticated(MsgUnauthorized)
	}
	return orgID, agentID, projectID, nil
}

// Agent resolves an agent key alone (the all-rooms address).
func (r *Resolver) Agent(ctx context.Context, key string) (Scope, error) {
	k, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized) // no database work for a mistyped key
	}
	var s Scope
	err = r.DB.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		orgID, agentID, _, err := r.credentials(ctx, tx, k, nil)
		if err != nil {
			return err
		}
		s = Scope{OrgID: orgID, AgentID: agentID}
		tx.SetTenant(s.Tenant())
		if err := r.Q.TouchAgentMemberships(ctx, tx, agentID); err != nil {
			return fmt.Errorf("resolve agent: touch: %w", err)
		}
		id, err := r.Q.AgentIdentity(ctx, tx, db.AgentIdentityParams{OrgID: orgID, ID: agentID})
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

// Room binds an already verified agent to one room. An agent that is not a member gets
// the spec's refusal.
func (r *Resolver) Room(ctx context.Context, agent Scope, projectID uuid.UUID) (Scope, error) {
	s := Scope{OrgID: agent.OrgID, AgentID: agent.AgentID, ProjectID: projectID}
	// It runs inside a tool call (all-rooms address) and may write last_seen: that is not
	// the tool's write, so it must not commit the call's idempotency claim.
	err := r.DB.InTenant(pg.WithoutClaim(ctx), s.Tenant(), func(tx *pg.Tx) error {
		return r.bindRoom(ctx, tx, &s)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve room", err)
	}
	return s, nil
}

// RoomByKey verifies a key and binds it to one room in a single transaction.
func (r *Resolver) RoomByKey(ctx context.Context, key string, projectID uuid.UUID) (Scope, error) {
	k, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	var s Scope
	err = r.DB.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		orgID, agentID, _, err := r.credentials(ctx, tx, k, nil)
		if err != nil {
			return err
		}
		s = Scope{OrgID: orgID, AgentID: agentID, ProjectID: projectID}
		tx.SetTenant(s.Tenant())
		return r.bindRoom(ctx, tx, &s)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve room", err)
	}
	return s, nil
}

func (r *Resolver) bindRoom(ctx context.Context, tx *pg.Tx, s *Scope) error {
	row, err := r.Q.BindAgentRoom(ctx, tx, db.BindAgentRoomParams{ProjectID: s.ProjectID, AgentID: s.AgentID})
	if pg.IsNoRows(err) {
		return apperr.New(apperr.Forbidden, MsgNotParticipant)
	}
	if err != nil {
		return fmt.Errorf("bind room: %w", err)
	}
	fill(s, db.BindPartRow(row))
	return nil
}

// Part resolves the threads endpoint: a connect code naming the project, the part asked
// for in the URL, and an agent key that must belong to the agent holding that part.
func (r *Resolver) Part(ctx context.Context, connectCode, part, key string) (Scope, error) {
	code, err := auth.Parse(auth.ConnectCodePrefix, connectCode)
	if err != nil {
		return Scope{}, unauthenticated("unknown connect code")
	}
	k, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	var s Scope
	err = r.DB.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		orgID, agentID, projectID, err := r.credentials(ctx, tx, k, &code)
		if err != nil {
			return err
		}
		s = Scope{OrgID: orgID, AgentID: agentID, ProjectID: projectID}
		tx.SetTenant(s.Tenant())
		row, err := r.Q.BindPart(ctx, tx, db.BindPartParams{ProjectID: projectID, Part: part})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.Forbidden, "part %q is not a member of this project", part)
		}
		if err != nil {
			return fmt.Errorf("resolve part: %w", err)
		}
		if row.AgentID != agentID {
			// A part may only act as itself: the key must be the part's own agent's. The
			// UPDATE that moved its last_seen is rolled back with this error.
			return apperr.New(apperr.Forbidden, "this agent key does not hold part %q", part)
		}
		fill(&s, row)
		return nil
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve part", err)
	}
	return s, nil
}

func fill(s *Scope, m db.BindPartRow) {
	s.MemberID, s.Part, s.IsMain, s.Nickname = m.ID, m.Part, m.IsMain, m.Nickname
	s.Access, s.Capabilities, s.ParkedUntil = m.Access, m.Capabilities, m.ParkedUntil
	s.AgentSlug, s.AgentName, s.AgentModel, s.AgentKind, s.OrgName = m.AgentSlug, m.AgentName, m.AgentModel, m.AgentKind, m.OrgName
	s.ProjectName, s.HostOrgID, s.HostName = m.ProjectName, m.HostOrgID, m.HostName
	s.AgreementStatus, s.Grants = "", nil
	if m.AgreementStatus != nil {
		s.AgreementStatus, s.Grants = *m.AgreementStatus, m.AgreementGrants
	}
}
