package tenancy

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
)

// Roles of a person in an organisation (org_member.role).
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// IsPerson reports whether the caller is a person rather than an agent.
func (s Scope) IsPerson() bool { return s.Person != nil && s.Person.UserID != uuid.Nil }

// IsOrgAdmin reports a person who is an owner or admin of the caller's organisation.
func (s Scope) IsOrgAdmin() bool {
	return s.IsPerson() && (s.Person.Role == RoleOwner || s.Person.Role == RoleAdmin)
}

// PersonOrgs returns the organisations of a signed-in person (by session id), oldest
// membership first: the dashboard acts for one of them at a time.
func (r *Resolver) PersonOrgs(ctx context.Context, sessionID string) ([]db.WebSessionListOrgsRow, error) {
	var orgs []db.WebSessionListOrgsRow
	err := r.DB.InTenant(ctx, pg.Tenant{Lookup: sessionID, SignIn: true}, func(tx *pg.Tx) (err error) {
		orgs, err = r.Q.WebSessionListOrgs(ctx, tx, sessionID)
		return err
	})
	if err != nil {
		return nil, pg.Classify("person organisations", err)
	}
	return orgs, nil
}

// OrgName is one organisation of a person, with their role there, as the dashboard
// offers it to switch to.
type OrgName struct {
	ID   uuid.UUID
	Name string
	Role string
}

// PersonOrgNames names the organisations of a signed-in person that order lists (in
// that order) and in which they are an active member; any other id is left out. One
// transaction: the memberships read as the session's person, each name as its own tenant.
func (r *Resolver) PersonOrgNames(ctx context.Context, sessionID string, order []uuid.UUID) ([]OrgName, error) {
	out := make([]OrgName, 0, len(order))
	err := r.DB.InTenant(ctx, pg.Tenant{Lookup: sessionID, SignIn: true}, func(tx *pg.Tx) error {
		rows, err := r.Q.WebSessionListOrgs(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		for _, id := range order {
			i := slices.IndexFunc(rows, func(m db.WebSessionListOrgsRow) bool { return m.OrgID == id && !m.Deactivated })
			if i < 0 {
				continue
			}
			tx.SetTenant(pg.Tenant{OrgID: id})
			name, err := r.Q.OrganisationGetName(ctx, tx, id)
			if err != nil {
				return fmt.Errorf("organisation %s: %w", id, err)
			}
			out = append(out, OrgName{ID: id, Name: name, Role: rows[i].Role})
		}
		return nil
	})
	if err != nil {
		return nil, pg.Classify("person organisation names", err)
	}
	return out, nil
}

// PersonRoom resolves a signed-in person (their session) in a room, acting for orgID,
// into the Scope the services take, as RoomByKey does for an agent: the organisation must
// host the room or have an agreement with its host (Scope.Admitted then decides whether
// it may act, exactly as for that organisation's agents). ok is false when the person
// is not a member of orgID or the organisation has nothing to do with the room: the
// dashboard answers 404 then, as for a room that does not exist.
func (r *Resolver) PersonRoom(ctx context.Context, sessionID string, userID, orgID, projectID uuid.UUID) (Scope, bool, error) {
	s := Scope{OrgID: orgID, ProjectID: projectID}
	var row db.ScopeBindPersonRoomRow
	found := false
	err := r.DB.InTenant(ctx, pg.Tenant{OrgID: orgID, ProjectID: projectID, Lookup: sessionID, SignIn: true}, func(tx *pg.Tx) error {
		var err error
		row, err = r.Q.ScopeBindPersonRoom(ctx, tx, db.ScopeBindPersonRoomParams{SessionID: sessionID, ProjectID: projectID, OrgID: orgID})
		if pg.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bind person: %w", err)
		}
		found = true
		return nil
	})
	if err != nil {
		return Scope{}, false, pg.Classify("resolve person", err)
	}
	if !found {
		return Scope{}, false, nil
	}
	s.Person = &Person{UserID: userID, Name: row.UserName, Role: row.Role, Plan: row.Plan, Timezone: row.Timezone}
	s.OrgName = row.OrgName
	s.ProjectName, s.HostOrgID, s.HostName = row.ProjectName, row.HostOrgID, row.HostName
	if row.AgreementStatus != nil {
		s.AgreementStatus, s.Grants = *row.AgreementStatus, row.AgreementGrants
	}
	// A person's access follows their role: admins manage, members write.
	s.Access = AccessWrite
	if s.IsOrgAdmin() {
		s.Access = AccessManager
	}
	return s, true, nil
}
