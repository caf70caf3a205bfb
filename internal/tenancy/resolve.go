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

// Resolver turns credentials into Scopes. Each method is one transaction, and each moves
// the caller's last_seen: presence must follow every authenticated call.
type Resolver struct {
	DB *pg.DB
	Q  *db.Queries
}

func unauthenticated(msg string) error { return apperr.New(apperr.Unauthenticated, "%s", msg) }

// verifyKey finds the agent behind a key. It must run first in its transaction: it sets
// the lookup tenant itself.
func (r *Resolver) verifyKey(ctx context.Context, tx *pg.Tx, key string) (Scope, error) {
	p, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	if err := tx.SetTenant(ctx, pg.Tenant{Lookup: p.ID}); err != nil {
		return Scope{}, err
	}
	rows, err := r.Q.AgentKeysByKeyID(ctx, tx, p.ID)
	if err != nil {
		return Scope{}, fmt.Errorf("verify key: %w", err)
	}
	for _, row := range rows {
		if p.Matches(row.SecretHash) {
			s := Scope{OrgID: row.OrgID, AgentID: row.AgentID}
			if err := tx.SetTenant(ctx, s.Tenant()); err != nil {
				return Scope{}, err
			}
			id, err := r.Q.AgentIdentity(ctx, tx, db.AgentIdentityParams{OrgID: row.OrgID, ID: row.AgentID})
			if err != nil {
				return Scope{}, fmt.Errorf("verify key: identity: %w", err)
			}
			s.AgentSlug, s.AgentName, s.AgentModel, s.AgentKind, s.OrgName = id.Slug, id.Name, id.Model, id.Kind, id.OrgName
			return s, nil
		}
	}
	return Scope{}, unauthenticated(MsgUnauthorized)
}

// Agent resolves an agent key alone (the all-rooms address).
func (r *Resolver) Agent(ctx context.Context, key string) (Scope, error) {
	if _, err := auth.Parse(auth.AgentKeyPrefix, key); err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized) // no database work for a mistyped key
	}
	var s Scope
	err := r.DB.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		var err error
		if s, err = r.verifyKey(ctx, tx, key); err != nil {
			return err
		}
		return r.Q.TouchAgentMemberships(ctx, tx, s.AgentID)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve agent", err)
	}
	return s, nil
}

// Room binds an agent to one room. An agent that is not a member gets the spec's refusal.
func (r *Resolver) Room(ctx context.Context, agent Scope, projectID uuid.UUID) (Scope, error) {
	s := agent
	s.ProjectID = projectID
	err := r.DB.InTenant(ctx, s.Tenant(), func(tx *pg.Tx) error {
		return r.bindRoom(ctx, tx, &s)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve room", err)
	}
	return s, nil
}

// RoomByKey verifies a key and binds it to one room in a single transaction.
func (r *Resolver) RoomByKey(ctx context.Context, key string, projectID uuid.UUID) (Scope, error) {
	if _, err := auth.Parse(auth.AgentKeyPrefix, key); err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	var s Scope
	err := r.DB.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		var err error
		if s, err = r.verifyKey(ctx, tx, key); err != nil {
			return err
		}
		s.ProjectID = projectID
		if err := tx.SetTenant(ctx, s.Tenant()); err != nil {
			return err
		}
		return r.bindRoom(ctx, tx, &s)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve room", err)
	}
	return s, nil
}

func (r *Resolver) bindRoom(ctx context.Context, tx *pg.Tx, s *Scope) error {
	m, err := r.Q.TouchMemberByAgent(ctx, tx, db.TouchMemberByAgentParams{ProjectID: s.ProjectID, AgentID: s.AgentID})
	if pg.IsNoRows(err) {
		return apperr.New(apperr.Forbidden, MsgNotParticipant)
	}
	if err != nil {
		return fmt.Errorf("bind room: member: %w", err)
	}
	s.MemberID, s.Part, s.IsMain, s.Nickname = m.ID, m.Part, m.IsMain, m.Nickname
	s.Access, s.Capabilities, s.ParkedUntil = m.Access, m.Capabilities, m.ParkedUntil
	return r.roomInfo(ctx, tx, s)
}

func (r *Resolver) roomInfo(ctx context.Context, tx *pg.Tx, s *Scope) error {
	info, err := r.Q.ProjectRoomInfo(ctx, tx, db.ProjectRoomInfoParams{ProjectID: s.ProjectID, OrgID: s.OrgID})
	if err != nil {
		return fmt.Errorf("bind room: info: %w", err)
	}
	s.ProjectName, s.HostOrgID, s.HostName = info.Name, info.HostOrgID, info.HostName
	s.AgreementStatus, s.Grants = "", nil
	if info.AgreementStatus != nil {
		s.AgreementStatus, s.Grants = *info.AgreementStatus, info.AgreementGrants
	}
	return nil
}

// Part resolves the threads endpoint: a connect code naming the project, the part asked
// for in the URL, and an agent key that must belong to the agent holding that part.
func (r *Resolver) Part(ctx context.Context, connectCode, part, key string) (Scope, error) {
	code, err := auth.Parse(auth.ConnectCodePrefix, connectCode)
	if err != nil {
		return Scope{}, unauthenticated("unknown connect code")
	}
	if _, err := auth.Parse(auth.AgentKeyPrefix, key); err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	var s Scope
	err = r.DB.InTenant(ctx, pg.Tenant{Lookup: code.ID}, func(tx *pg.Tx) error {
		codes, err := r.Q.ConnectCodesByCodeID(ctx, tx, code.ID)
		if err != nil {
			return fmt.Errorf("resolve part: connect code: %w", err)
		}
		var projectID uuid.UUID
		for _, c := range codes {
			if code.Matches(c.SecretHash) {
				projectID = c.ProjectID
			}
		}
		if projectID == uuid.Nil {
			return unauthenticated("unknown connect code")
		}
		if s, err = r.verifyKey(ctx, tx, key); err != nil {
			return err
		}
		s.ProjectID = projectID
		if err := tx.SetTenant(ctx, s.Tenant()); err != nil {
			return err
		}
		m, err := r.Q.TouchMemberByPart(ctx, tx, db.TouchMemberByPartParams{ProjectID: projectID, Part: part})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.Forbidden, "part %q is not a member of this project", part)
		}
		if err != nil {
			return fmt.Errorf("resolve part: member: %w", err)
		}
		if m.AgentID != s.AgentID {
			// A part may only act as itself: the key must be the part's own agent's.
			return apperr.New(apperr.Forbidden, "this agent key does not hold part %q", part)
		}
		s.MemberID, s.Part, s.IsMain, s.Nickname = m.ID, m.Part, m.IsMain, m.Nickname
		s.Access, s.Capabilities, s.ParkedUntil = m.Access, m.Capabilities, m.ParkedUntil
		return r.roomInfo(ctx, tx, &s)
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve part", err)
	}
	return s, nil
}
