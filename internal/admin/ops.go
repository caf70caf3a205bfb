package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
)

// The imperative commands. Creating and updating goes through Apply with a one-object
// file, so the CLI's `create` and a file share one validation and one write path.

// ListOrganisations lists every organisation.
func (s *Service) ListOrganisations(ctx context.Context) ([]db.OrganisationListRow, error) {
	var out []db.OrganisationListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = s.Q.OrganisationList(ctx, tx)
		return err
	})
	return out, wrap("list organisations", err)
}

// ListUsers lists people with their organisations and roles.
func (s *Service) ListUsers(ctx context.Context) ([]db.UserListRow, error) {
	var out []db.UserListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = s.Q.UserList(ctx, tx)
		return err
	})
	return out, wrap("list users", err)
}

// ListAgents lists every agent with its count of active keys.
func (s *Service) ListAgents(ctx context.Context) ([]db.AgentListRow, error) {
	var out []db.AgentListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = s.Q.AgentList(ctx, tx)
		return err
	})
	return out, wrap("list agents", err)
}

// ListProjects lists every project.
func (s *Service) ListProjects(ctx context.Context) ([]db.ProjectListRow, error) {
	var out []db.ProjectListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = s.Q.ProjectList(ctx, tx)
		return err
	})
	return out, wrap("list projects", err)
}

// ListMembers lists a project's parts; project is "host/slug".
func (s *Service) ListMembers(ctx context.Context, project string) ([]db.MembershipListRow, error) {
	var out []db.MembershipListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return err
		}
		out, err = s.Q.MembershipList(ctx, tx, p.ID)
		return err
	})
	return out, wrap("list members", err)
}

// ListAgreements lists a project's guest agreements.
func (s *Service) ListAgreements(ctx context.Context, project string) ([]db.AgreementListRow, error) {
	var out []db.AgreementListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return err
		}
		out, err = s.Q.AgreementList(ctx, tx, p.ID)
		return err
	})
	return out, wrap("list agreements", err)
}

// RotateAgentKey revokes an agent's keys and issues a new one; agent is "org/slug".
func (s *Service) RotateAgentKey(ctx context.Context, agent string) (AgentOut, error) {
	var out AgentOut
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		org, slug, _ := strings.Cut(agent, "/")
		a, err := s.Q.AgentGetBySlug(ctx, tx, db.AgentGetBySlugParams{OrgSlug: org, AgentSlug: slug})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "unknown agent %q", agent)
		}
		if err != nil {
			return err
		}
		out.ID = a.ID
		out.Key, err = s.ensureAgentKey(ctx, tx, a.OrgID, a.ID, true)
		return err
	})
	return out, wrap("rotate key", err)
}

// RotateConnectCode revokes a project's connect codes and issues a new one.
func (s *Service) RotateConnectCode(ctx context.Context, project string) (ProjectOut, error) {
	var out ProjectOut
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		p, err := s.project(ctx, tx, project)
		if err != nil {
			return err
		}
		out, err = s.rotateCode(ctx, tx, p.ID)
		return err
	})
	return out, wrap("rotate connect code", err)
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
// the guest's next call, since every call reads the agreement.
func (s *Service) SetAgreementStatus(ctx context.Context, project, guest, status string) error {
	switch status {
	case "pending", "active", "revoked":
	default:
		return apperr.New(apperr.Invalid, "status must be pending, active or revoked, got %q", status)
	}
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
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
		n, err := s.Q.AgreementSetStatus(ctx, tx, db.AgreementSetStatusParams{ProjectID: p.ID, GuestOrgID: g.ID, Status: status})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.New(apperr.NotFound, "%q has no agreement in project %q", guest, project)
		}
		return nil
	})
	return wrap("set agreement", err)
}

// project finds "host/slug".
func (s *Service) project(ctx context.Context, tx *pg.Tx, ref string) (db.ProjectGetBySlugRow, error) {
	host, slug, ok := strings.Cut(ref, "/")
	if !ok {
		return db.ProjectGetBySlugRow{}, apperr.New(apperr.Invalid, "a project is named \"host/slug\", got %q", ref)
	}
	p, err := s.Q.ProjectGetBySlug(ctx, tx, db.ProjectGetBySlugParams{HostSlug: host, ProjectSlug: slug})
	if pg.IsNoRows(err) {
		return p, apperr.New(apperr.NotFound, "unknown project %q", ref)
	}
	return p, err
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

// ProjectName returns the name of "host/slug" (imperative commands re-apply it unchanged).
func (s *Service) ProjectName(ctx context.Context, project string) (string, error) {
	var name string
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		p, err := s.project(ctx, tx, project)
		name = p.Name
		return err
	})
	return name, wrap("find project", err)
}
