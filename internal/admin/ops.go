package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
)

// The imperative commands. Creating and updating goes through Apply with a one-object
// file, so the CLI's `create` and a file share one validation and one write path.

// ListOrganisations lists every organisation.
func (s *Service) ListOrganisations(ctx context.Context) ([]OrganisationLine, error) {
	rows, err := operatorList(ctx, s, "list organisations", s.Q.OrganisationList)
	return lines(rows, func(r db.OrganisationListRow) OrganisationLine { return OrganisationLine(r) }), err
}

// ListUsers lists people with their organisations and roles.
// org (a slug; "" for every organisation) narrows the list to one organisation's people.
func (s *Service) ListUsers(ctx context.Context, org string) ([]UserLine, error) {
	rows, err := inOrgList(ctx, s, "list users", org, s.Q.UserList, func(r db.UserListRow) string { return r.OrgSlug })
	return lines(rows, func(r db.UserListRow) UserLine { return UserLine(r) }), err
}

// ListAgents lists every agent with its count of active keys.
// org (a slug; "" for every organisation) narrows the list to one organisation's agents.
func (s *Service) ListAgents(ctx context.Context, org string) ([]AgentLine, error) {
	rows, err := inOrgList(ctx, s, "list agents", org, s.Q.AgentList, func(r db.AgentListRow) string { return r.OrgSlug })
	return lines(rows, func(r db.AgentListRow) AgentLine { return AgentLine(r) }), err
}

// ListProjects lists every project.
// host (a slug; "" for every organisation) narrows the list to the projects it hosts.
func (s *Service) ListProjects(ctx context.Context, host string) ([]ProjectLine, error) {
	rows, err := inOrgList(ctx, s, "list projects", host, s.Q.ProjectList, func(r db.ProjectListRow) string { return r.HostSlug })
	return lines(rows, func(r db.ProjectListRow) ProjectLine { return ProjectLine(r) }), err
}

// ListMembers lists a project's parts; project is "host/slug".
func (s *Service) ListMembers(ctx context.Context, project string) ([]MemberLine, error) {
	rows, err := inProject(ctx, s, project, "list members", func(tx *pg.Tx, id uuid.UUID) ([]db.MembershipListRow, error) {
		return s.Q.MembershipList(ctx, tx, id)
	})
	return lines(rows, func(r db.MembershipListRow) MemberLine { return MemberLine(r) }), err
}

// ListAgreements lists a project's guest agreements.
func (s *Service) ListAgreements(ctx context.Context, project string) ([]AgreementLine, error) {
	rows, err := inProject(ctx, s, project, "list agreements", func(tx *pg.Tx, id uuid.UUID) ([]db.AgreementListRow, error) {
		return s.Q.AgreementList(ctx, tx, id)
	})
	return lines(rows, func(r db.AgreementListRow) AgreementLine { return AgreementLine(r) }), err
}

// operator runs fn in one operator transaction and returns what it made, its error told
// as op.
func operator[T any](ctx context.Context, s *Service, op string, fn func(tx *pg.Tx) (T, error)) (T, error) {
	var out T
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = fn(tx)
		return err
	})
	return out, wrap(op, err)
}

// operatorList reads one of the operator's listings (`relayroom admin ... list`).
func operatorList[T any](ctx context.Context, s *Service, op string, list func(context.Context, db.DBTX) ([]T, error)) ([]T, error) {
	return operator(ctx, s, op, func(tx *pg.Tx) ([]T, error) { return list(ctx, tx) })
}

// inOrgList reads one of the operator's listings, narrowed to the rows whose slug (of
// slugOf) is org when org is not "": an operator with many organisations asks for one.
// An org that names none is NotFound, so that a typo does not read as an empty list.
// The lists are the operator's and small; they are filtered here, not in one query each.
func inOrgList[T any](ctx context.Context, s *Service, op, org string, list func(context.Context, db.DBTX) ([]T, error), slugOf func(T) string) ([]T, error) {
	return operator(ctx, s, op, func(tx *pg.Tx) ([]T, error) {
		if org != "" {
			o, err := s.Q.OrganisationGetBySlug(ctx, tx, org)
			if _, err := found(o, err, fmt.Sprintf("unknown organisation %q", org)); err != nil {
				return nil, err
			}
		}
		rows, err := list(ctx, tx)
		if err != nil || org == "" {
			return rows, err
		}
		return slices.DeleteFunc(rows, func(r T) bool { return slugOf(r) != org }), nil
	})
}

// inProject is operator for one project, named "host/slug"; fn gets its id.
func inProject[T any](ctx context.Context, s *Service, project, op string, fn func(tx *pg.Tx, projectID uuid.UUID) (T, error)) (T, error) {
	return operator(ctx, s, op, func(tx *pg.Tx) (T, error) {
		p, err := s.project(ctx, tx, project)
		if err != nil {
			var zero T
			return zero, err
		}
		return fn(tx, p.ID)
	})
}

// RotateAgentKey revokes an agent's keys and issues a new one; agent is "org/slug".
func (s *Service) RotateAgentKey(ctx context.Context, agent string) (AgentOut, error) {
	return operator(ctx, s, "rotate key", func(tx *pg.Tx) (AgentOut, error) {
		org, slug, _ := strings.Cut(agent, "/")
		a, err := s.Q.AgentGetBySlug(ctx, tx, db.AgentGetBySlugParams{OrgSlug: org, AgentSlug: slug})
		if a, err = found(a, err, fmt.Sprintf("unknown agent %q", text.Cut(agent, text.MaxEcho))); err != nil {
			return AgentOut{}, err
		}
		out := AgentOut{ID: a.ID}
		if out.Key, err = s.ensureAgentKey(ctx, tx, a.OrgID, a.ID, true); err != nil {
			return out, err
		}
		return out, audit.RecordOperator(ctx, tx, audit.Event{OrgID: a.OrgID, Kind: audit.KindAgent, ObjectID: a.ID.String(), Action: "key_rotated"})
	})
}

// RotateConnectCode revokes a project's connect codes and issues a new one.
func (s *Service) RotateConnectCode(ctx context.Context, project string) (ProjectOut, error) {
	return inProject(ctx, s, project, "rotate connect code", func(tx *pg.Tx, id uuid.UUID) (ProjectOut, error) {
		out, err := s.rotateCode(ctx, tx, id)
		if err != nil {
			return out, err
		}
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return out, err
		}
		return out, audit.RecordOperator(ctx, tx, audit.Event{OrgID: p.HostOrgID, ProjectID: id, Kind: audit.KindProject, ObjectID: id.String(), Action: "connect_code_rotated"})
	})
}

// rotateCode revokes a project's connect codes and issues a new one, in tx, with the
// parts' threads URLs (which embed it).
func (s *Service) rotateCode(ctx context.Context, tx *pg.Tx, projectID uuid.UUID) (ProjectOut, error) {
	out := ProjectOut{ID: projectID}
	var err error
	if out.ConnectCode, err = s.ensureConnectCode(ctx, tx, projectID, true); err != nil {
		return out, err
	}
	members, err := s.Q.MembershipList(ctx, tx, projectID)
	if err != nil {
		return out, err
	}
	out.URLs = URLs{Room: s.url("/api/mcp/p/" + projectID.String()), AllRooms: s.url("/api/mcp"), Threads: map[string]string{}}
	for _, m := range members {
		out.URLs.Threads[m.Part] = ThreadsURL(s.PublicURL, out.ConnectCode, m.Part)
	}
	return out, nil
}

// SetAgreementStatus changes a guest's agreement (e.g. revokes it); it takes effect on
// the guest's next call, since every call reads the agreement. changed is false when the
// agreement had that status already: nothing is written, nor recorded in the trail (a
// revocation repeated by a script recorded one event per run).
func (s *Service) SetAgreementStatus(ctx context.Context, project, guest, status string) (changed bool, err error) {
	switch status {
	case "pending", "active", "revoked":
	default:
		return false, apperr.New(apperr.Invalid, "status must be pending, active or revoked, got %q", status)
	}
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		changed = false // a transaction retried runs again from its start
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return err
		}
		g, err := s.Q.OrganisationGetBySlug(ctx, tx, guest)
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "unknown organisation %q", guest)
		}
		if err != nil {
			return err
		}
		// In turns with the dashboard's changes of the agreement (AgreementLock).
		if err := s.Q.AgreementLock(ctx, tx, db.AgreementLockParams{ProjectID: p.ID, GuestOrgID: g.ID}); err != nil {
			return err
		}
		current, err := s.Q.AgreementGetForRoom(ctx, tx, db.AgreementGetForRoomParams{ProjectID: p.ID, GuestOrgID: g.ID})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "%q has no agreement in project %q", guest, project)
		}
		if err != nil {
			return err
		}
		if current.Status == status {
			return nil
		}
		if _, err := s.Q.AgreementSetStatus(ctx, tx, db.AgreementSetStatusParams{ProjectID: p.ID, GuestOrgID: g.ID, Status: status}); err != nil {
			return err
		}
		changed = true
		o := AgreementObject(p.HostOrgID, p.ID, g.ID)
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: o.OrgID, PartyOrgID: g.ID, ProjectID: p.ID, Kind: o.Kind, ObjectID: o.ID,
			Action: "status_set", Detail: map[string]string{"to": status}})
	})
	return changed, wrap("set agreement", err)
}

// SetAgreement is `agreement set`: it creates a guest's agreement or updates it. What is
// not given (keepStatus, keepGrants) keeps what is stored when the agreement is written,
// read in the same transaction, in turns with the dashboard's changes of it: read in a
// transaction of its own before, a revocation made in between was written back as active.
func (s *Service) SetAgreement(ctx context.Context, project string, g GuestSpec, keepStatus, keepGrants bool) (Result, error) {
	return operator(ctx, s, "set agreement", func(tx *pg.Tx) (Result, error) {
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return Result{}, err
		}
		org, err := s.Q.OrganisationGetBySlug(ctx, tx, g.Org)
		switch {
		case pg.IsNoRows(err): // no agreement to keep anything of; the file's checks name the guest
		case err != nil:
			return Result{}, err
		default:
			if err := s.Q.AgreementLock(ctx, tx, db.AgreementLockParams{ProjectID: p.ID, GuestOrgID: org.ID}); err != nil {
				return Result{}, err
			}
			current, err := s.Q.AgreementList(ctx, tx, p.ID)
			if err != nil {
				return Result{}, err
			}
			for _, cur := range current {
				if cur.GuestSlug != g.Org {
					continue
				}
				if keepStatus {
					g.Status = cur.Status
				}
				if keepGrants {
					g.Grants = cur.Grants
				}
			}
		}
		spec := ProjectSpec{Slug: p.Slug, Name: p.Name, Host: p.HostSlug, Guests: []GuestSpec{g}}
		return s.applyTx(ctx, tx, File{Projects: []ProjectSpec{spec}}, Options{})
	})
}

// MemberKeep names what SetMember keeps as stored: the fields its caller did not give.
type MemberKeep struct {
	Part, Main, Nickname, Access, Capabilities bool
}

// SetMember is `member add`: it adds an agent to a project as a part, or updates its
// membership. What keep names keeps what is stored when the membership is written, read
// in the same transaction with the project's members locked: read in a transaction of
// its own before, an access the host lowered in between was written back.
func (s *Service) SetMember(ctx context.Context, project string, m MemberSpec, keep MemberKeep) (Result, error) {
	return operator(ctx, s, "set member", func(tx *pg.Tx) (Result, error) {
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return Result{}, err
		}
		if err := s.Q.MembershipLockProject(ctx, tx, p.ID); err != nil {
			return Result{}, err
		}
		members, err := s.Q.MembershipList(ctx, tx, p.ID)
		if err != nil {
			return Result{}, err
		}
		for _, cur := range members {
			if cur.OrgSlug+"/"+cur.AgentSlug != m.Agent {
				continue
			}
			if keep.Part {
				m.Part = cur.Part
			}
			if keep.Main {
				m.Main = cur.IsMain
			}
			if keep.Nickname && cur.Nickname != nil {
				m.Nickname = *cur.Nickname
			}
			if keep.Access {
				m.Access = cur.Access
			}
			if keep.Capabilities {
				m.Capabilities = cur.Capabilities
			}
		}
		spec := ProjectSpec{Slug: p.Slug, Name: p.Name, Host: p.HostSlug, Members: []MemberSpec{m}}
		return s.applyTx(ctx, tx, File{Projects: []ProjectSpec{spec}}, Options{})
	})
}

// project finds "host/slug".
func (s *Service) project(ctx context.Context, tx *pg.Tx, ref string) (db.ProjectGetBySlugRow, error) {
	host, slug, ok := strings.Cut(ref, "/")
	if !ok {
		return db.ProjectGetBySlugRow{}, apperr.New(apperr.Invalid, "a project is named \"host/slug\", got %q", ref)
	}
	p, err := s.Q.ProjectGetBySlug(ctx, tx, db.ProjectGetBySlugParams{HostSlug: host, ProjectSlug: slug})
	return found(p, err, fmt.Sprintf("unknown project %q", text.Cut(ref, text.MaxEcho)))
}

// found is a lookup's answer with "no rows" as NotFound, told as what.
func found[T any](v T, err error, what string) (T, error) {
	if pg.IsNoRows(err) {
		return v, apperr.New(apperr.NotFound, "%s", what)
	}
	return v, err
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := apperr.As(err); ok {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ForgetPresence marks a project's parts as never seen. make run's demo seeds the
// dashboard by calling the tools as the demo's agents; presence then said they had been
// online a moment ago, and a wake for one of them was held for the online window (a
// minute) though no agent was connected yet.
func (s *Service) ForgetPresence(ctx context.Context, projectID uuid.UUID) error {
	return s.DB.Operator(ctx, func(tx *pg.Tx) error {
		return s.Q.MembershipForgetPresence(ctx, tx, projectID)
	})
}

// CredentialActive tells whether an agent key or a connect code still verifies. What an
// earlier `make run` saved may have been revoked or rotated since (on the dashboard, with
// this CLI); printed again, it was refused at the first call.
func (s *Service) CredentialActive(ctx context.Context, credential string) (bool, error) {
	params, kind := db.CredentialRowsParams{}, "key"
	p, err := auth.Parse(auth.AgentKeyPrefix, credential)
	if err == nil {
		params.KeyID = p.ID
	} else if p, err = auth.Parse(auth.ConnectCodePrefix, credential); err == nil {
		kind, params.CodeID = "code", p.ID
	} else {
		return false, nil // not a credential of this service: nothing verifies it
	}
	active := false
	err = s.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID}, func(tx *pg.Tx) error {
		rows, err := s.Q.CredentialRows(ctx, tx, params)
		if err != nil {
			return fmt.Errorf("verify a saved credential: %w", err)
		}
		for _, r := range rows {
			active = active || (r.Kind == kind && p.Matches(r.SecretHash))
		}
		return nil
	})
	return active, err
}
