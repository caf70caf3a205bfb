package admin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// The company admin of the dashboard (docs/dashboard.md, "Company admin"): an
// organisation's owners and admins manage what it owns through the same code as the CLI
// (one-object applies, the same key and connect-code issuing), each change in one
// transaction with its audit event (audit.Record). These run on the owner's pool like
// every admin operation, so each statement names the organisation acted for: an object
// of another organisation is NotFound, exactly like one that does not exist.

// Refusals people read.
const (
	MsgAdminRole        = "Only your organisation's owners and admins can do this."
	MsgOwnerRole        = "Only an owner can make someone an owner or change an owner's role."
	MsgLastOwner        = "An organisation keeps at least one owner."
	MsgHostOnly         = "Only the host company's owners and admins can do this."
	MsgGuestAccepts     = "Only the invited company's owners and admins can accept an agreement."
	MsgNotPending       = "Only a pending agreement can be accepted."
	MsgAlreadyRevoked   = "This agreement is already revoked."
	MsgAgreementChanged = "This agreement was changed meanwhile; reload the page to see it as it is now."
	MsgAgreementExists  = "This company already has an agreement for this project: change its grants or its state instead."
)

// Grants an agreement may give, and capabilities and access a membership may have (the
// database's checks say the same).
var (
	AgreementGrants = []string{tenancy.GrantReadMemory, tenancy.GrantWriteMemory, tenancy.GrantAssignTasks}
	Capabilities    = []string{tenancy.CapUrgent, tenancy.CapNeedsHuman}
	Accesses        = []string{"read", "write", "manager"}
	Roles           = []string{tenancy.RoleOwner, tenancy.RoleAdmin, tenancy.RoleMember}
)

// OrgActor is a person acting on their organisation's admin pages, with their role there
// (tenancy.Resolver.PersonOrgs).
type OrgActor struct {
	OrgID  uuid.UUID
	UserID uuid.UUID
	Name   string
	Role   string
}

func (a OrgActor) audit() audit.Actor {
	return audit.Actor{OrgID: a.OrgID, UserID: a.UserID, Name: a.Name}
}

// check refuses anyone but an owner or admin.
func (a OrgActor) check() error {
	if a.Role != tenancy.RoleOwner && a.Role != tenancy.RoleAdmin {
		return apperr.New(apperr.Forbidden, "%s", MsgAdminRole)
	}
	return nil
}

// InputError is input refused field by field: pages show each message beside its field.
type InputError struct {
	Fields map[string]string
}

func (e *InputError) Error() string {
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + e.Fields[k]
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

func fieldError(field, msg string) *InputError {
	return &InputError{Fields: map[string]string{field: msg}}
}

// problemPath is the last named step of a Problems path ("projects[0].members[0].part").
var problemPath = regexp.MustCompile(`([a-z_]+)(\[\d+\])?$`)

// asInput turns a one-object file's Problems into field errors named like the form's
// fields (the last step of each path).
func asInput(err error) error {
	p, ok := err.(Problems)
	if !ok {
		return err
	}
	out := &InputError{Fields: map[string]string{}}
	for _, line := range p {
		path, msg, _ := strings.Cut(line, ": ")
		field := path
		if m := problemPath.FindStringSubmatch(path); m != nil {
			field = m[1]
		}
		if _, dup := out.Fields[field]; !dup {
			out.Fields[field] = msg
		}
	}
	return out
}

// inOrg runs fn as the operator for an owner or admin of a.OrgID, with the organisation.
func (s *Service) inOrg(ctx context.Context, a OrgActor, op string, fn func(tx *pg.Tx, org db.OrganisationGetByIDRow) error) error {
	if err := a.check(); err != nil {
		return err
	}
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		org, err := s.Q.OrganisationGetByID(ctx, tx, a.OrgID)
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no such organisation")
		}
		if err != nil {
			return err
		}
		return fn(tx, org)
	})
	if in := (*InputError)(nil); errors.As(err, &in) {
		return err // field errors, shown beside their fields: not wrapped as an operation's failure
	}
	return wrap(op, err)
}

// inOrgMaking is inOrg for a transaction that makes a value.
func inOrgMaking[T any](ctx context.Context, s *Service, a OrgActor, op string, fn func(tx *pg.Tx, org db.OrganisationGetByIDRow) (T, error)) (T, error) {
	var out T
	err := s.inOrg(ctx, a, op, func(tx *pg.Tx, org db.OrganisationGetByIDRow) (err error) {
		out, err = fn(tx, org)
		return err
	})
	return out, err
}

// orgList reads one of the organisation's listings for its owner or admin a.
func orgList[T any](ctx context.Context, s *Service, a OrgActor, op string, list func(context.Context, db.DBTX, uuid.UUID) ([]T, error)) ([]T, error) {
	return inOrgMaking(ctx, s, a, op, func(tx *pg.Tx, _ db.OrganisationGetByIDRow) ([]T, error) { return list(ctx, tx, a.OrgID) })
}

// Organisation is what every admin page names.
func (s *Service) Organisation(ctx context.Context, a OrgActor) (Org, error) {
	return inOrgMaking(ctx, s, a, "organisation", func(_ *pg.Tx, org db.OrganisationGetByIDRow) (Org, error) { return org, nil })
}

// --- Agents

// OrgAgents lists the organisation's agents with their active keys and webhook.
func (s *Service) OrgAgents(ctx context.Context, a OrgActor) ([]db.AgentListInOrgRow, error) {
	return orgList(ctx, s, a, "list agents", s.Q.AgentListInOrg)
}

// OrgAgent is one of the organisation's agents; NotFound for any other.
func (s *Service) OrgAgent(ctx context.Context, a OrgActor, id uuid.UUID) (db.AgentListInOrgRow, string, error) {
	var (
		out  db.AgentListInOrgRow
		slug string
	)
	err := s.inOrg(ctx, a, "agent", func(tx *pg.Tx, org db.OrganisationGetByIDRow) error {
		rows, err := s.Q.AgentListInOrg(ctx, tx, a.OrgID)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.ID == id {
				out, slug = r, org.Slug+"/"+r.Slug
				return nil
			}
		}
		return apperr.New(apperr.NotFound, "no such agent")
	})
	return out, slug, err
}

// CreateAgent creates an agent of the organisation and issues its key, shown once (the
// CLI's `agent create`: a one-object apply). A slug already taken is refused, never
// updated.
func (s *Service) CreateAgent(ctx context.Context, a OrgActor, spec AgentSpec) (AgentOut, error) {
	var out AgentOut
	err := s.inOrg(ctx, a, "create agent", func(tx *pg.Tx, org db.OrganisationGetByIDRow) error {
		// Taken in turns with the organisation's other changes: two creations of one slug
		// at once each passed the check below, and the second overwrote the first.
		if err := s.Q.OrgOwnersLock(ctx, tx, a.OrgID); err != nil {
			return err
		}
		spec.Org, spec.Slug = org.Slug, strings.TrimSpace(spec.Slug)
		if _, err := s.Q.AgentGetBySlug(ctx, tx, db.AgentGetBySlugParams{OrgSlug: org.Slug, AgentSlug: spec.Slug}); err == nil {
			return fieldError("slug", fmt.Sprintf("an agent %q exists already", spec.Slug))
		} else if !pg.IsNoRows(err) {
			return err
		}
		res, err := s.applyTx(ctx, tx, File{Agents: []AgentSpec{spec}}, Options{})
		if err != nil {
			return asInput(err)
		}
		out = res.Agents[org.Slug+"/"+spec.Slug]
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindAgent, ObjectID: out.ID.String(),
			Action: "created", Detail: map[string]string{"slug": spec.Slug, "name": spec.Name, "model": spec.Model, "kind": spec.Kind}})
	})
	return out, err
}

// agentIn finds one of the organisation's agents by id.
func (s *Service) agentIn(ctx context.Context, tx *pg.Tx, orgID, id uuid.UUID) (db.AgentGetInOrgRow, error) {
	ag, err := s.Q.AgentGetInOrg(ctx, tx, db.AgentGetInOrgParams{OrgID: orgID, ID: id})
	return found(ag, err, "no such agent")
}

// RotateOrgAgentKey revokes an agent's keys and issues a new one, returned once.
func (s *Service) RotateOrgAgentKey(ctx context.Context, a OrgActor, id uuid.UUID) (string, error) {
	return changeAgentKeys(ctx, s, a, id, "rotate key", "key_rotated", func(tx *pg.Tx) (string, map[string]string, error) {
		key, err := s.ensureAgentKey(ctx, tx, a.OrgID, id, true)
		return key, nil, err
	})
}

// RevokeOrgAgentKeys revokes every key of an agent: its next call is refused.
func (s *Service) RevokeOrgAgentKeys(ctx context.Context, a OrgActor, id uuid.UUID) (int64, error) {
	return changeAgentKeys(ctx, s, a, id, "revoke keys", "keys_revoked", func(tx *pg.Tx) (int64, map[string]string, error) {
		n, err := s.Q.AgentKeyRevoke(ctx, tx, db.AgentKeyRevokeParams{OrgID: a.OrgID, AgentID: id})
		if err != nil {
			return 0, nil, err
		}
		// The sign-ins acting as the agent end with its keys: they only stood while it had
		// one, and any key issued later (a rotation, an apply) brought them all back.
		grants, err := s.Q.OAuthGrantRevokeByAgent(ctx, tx, db.OAuthGrantRevokeByAgentParams{OrgID: a.OrgID, AgentID: &id})
		if err != nil {
			return 0, nil, err
		}
		if len(grants) > 0 {
			if err := s.Q.OAuthTokenRevokeByGrants(ctx, tx, db.OAuthTokenRevokeByGrantsParams{OrgID: a.OrgID, GrantIds: grants}); err != nil {
				return 0, nil, err
			}
		}
		return n, map[string]string{"keys": fmt.Sprint(n), "sign_ins": fmt.Sprint(len(grants))}, nil
	})
}

// changeAgentKeys runs change on the keys of one of the organisation's agents, in one
// transaction with its audit event (action, with the detail change returns).
func changeAgentKeys[T any](ctx context.Context, s *Service, a OrgActor, id uuid.UUID, op, action string, change func(tx *pg.Tx) (T, map[string]string, error)) (T, error) {
	return inOrgMaking(ctx, s, a, op, func(tx *pg.Tx, _ db.OrganisationGetByIDRow) (T, error) {
		var zero T
		if _, err := s.agentIn(ctx, tx, a.OrgID, id); err != nil {
			return zero, err
		}
		out, detail, err := change(tx)
		if err != nil {
			return zero, err
		}
		return out, audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindAgent, ObjectID: id.String(), Action: action, Detail: detail})
	})
}

// WebhookEvent is the audit event of setting or clearing an agent's wake webhook, which
// the wake service records in its own transaction (audit.Intend / RecordIntended). The
// URL is recorded without its user information and query: a webhook URL often carries a
// token there, and the audit trail is never a secret's place (it is never rewritten).
func WebhookEvent(a OrgActor, agentID uuid.UUID, action, rawURL string) audit.Event {
	d := map[string]string{}
	if rawURL != "" {
		d["url"] = "(not a URL)"
		if u, err := url.Parse(rawURL); err == nil {
			u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
			d["url"] = u.String()
		}
	}
	return audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindAgent, ObjectID: agentID.String(), Action: action, Detail: d}
}

// CheckAdmin refuses anyone but an owner or admin (for changes another service makes).
func (a OrgActor) CheckAdmin() error { return a.check() }

// --- Projects

// ProjectDetail is a hosted project's admin page: members, agreements.
type ProjectDetail struct {
	Project    db.ProjectGetHostedByRow
	Members    []db.MembershipListForAdminRow
	Agreements []db.AgreementListForOrgRow
	Agents     []db.AgentListInOrgRow // the host's agents, to add as members
}

// OrgProjects lists the projects the organisation hosts.
func (s *Service) OrgProjects(ctx context.Context, a OrgActor) ([]db.ProjectListHostedByRow, error) {
	return orgList(ctx, s, a, "list projects", s.Q.ProjectListHostedBy)
}

func (s *Service) hosted(ctx context.Context, tx *pg.Tx, orgID, id uuid.UUID) (db.ProjectGetHostedByRow, error) {
	p, err := s.Q.ProjectGetHostedBy(ctx, tx, db.ProjectGetHostedByParams{OrgID: orgID, ID: id})
	return found(p, err, "no such project")
}

// OrgProject is one hosted project with its members and agreements; NotFound for a
// project the organisation does not host (a guest manages its side on the agreements page).
func (s *Service) OrgProject(ctx context.Context, a OrgActor, id uuid.UUID) (ProjectDetail, error) {
	var out ProjectDetail
	err := s.inOrg(ctx, a, "project", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) (err error) {
		if out.Project, err = s.hosted(ctx, tx, a.OrgID, id); err != nil {
			return err
		}
		if out.Members, err = s.Q.MembershipListForAdmin(ctx, tx, id); err != nil {
			return err
		}
		all, err := s.Q.AgreementListForOrg(ctx, tx, a.OrgID)
		if err != nil {
			return err
		}
		for _, ag := range all {
			if ag.ProjectID == id {
				out.Agreements = append(out.Agreements, ag)
			}
		}
		out.Agents, err = s.Q.AgentListInOrg(ctx, tx, a.OrgID)
		return err
	})
	return out, err
}

// MemberInput is a part added to a project or changed.
type MemberInput struct {
	AgentID      uuid.UUID // adding: one of the host's agents
	Part         string
	Access       string
	Capabilities []string
}

// AddOrgMember puts one of the host's agents into a hosted project as a part (a
// one-object apply of the project with that member: the same checks as the CLI's).
func (s *Service) AddOrgMember(ctx context.Context, a OrgActor, projectID uuid.UUID, m MemberInput) error {
	return s.inOrg(ctx, a, "add member", func(tx *pg.Tx, org db.OrganisationGetByIDRow) error {
		// In turns, as CreateAgent: two additions at once each passed the checks below, and
		// the second replaced the first's part or failed on the part's unique key.
		if err := s.Q.OrgOwnersLock(ctx, tx, a.OrgID); err != nil {
			return err
		}
		p, err := s.hosted(ctx, tx, a.OrgID, projectID)
		if err != nil {
			return err
		}
		ag, err := s.agentIn(ctx, tx, a.OrgID, m.AgentID)
		if apperr.CodeOf(err) == apperr.NotFound {
			return fieldError("agent", "choose one of your organisation's agents")
		}
		if err != nil {
			return err
		}
		current, err := s.Q.MembershipListForAdmin(ctx, tx, projectID)
		if err != nil {
			return err
		}
		for _, c := range current {
			if c.AgentID == ag.ID {
				return fieldError("agent", fmt.Sprintf("%s is already a member (part %q)", ag.Name, c.Part))
			}
			if c.Part == m.Part {
				return fieldError("part", fmt.Sprintf("part %q is already held by %s", m.Part, c.AgentName))
			}
		}
		spec := ProjectSpec{Slug: p.Slug, Name: p.Name, Host: org.Slug, Members: []MemberSpec{{Agent: org.Slug + "/" + ag.Slug,
			Part: strings.TrimSpace(m.Part), Access: m.Access, Capabilities: m.Capabilities}}}
		if _, err := s.applyTx(ctx, tx, File{Projects: []ProjectSpec{spec}}, Options{}); err != nil {
			return asInput(err)
		}
		ms := spec.Members[0] // validate filled the defaults
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, ProjectID: projectID, Kind: audit.KindProject,
			ObjectID: projectID.String(), Action: "member_added", Detail: map[string]string{"agent": ag.Name, "part": ms.Part,
				"access": ms.Access, "capabilities": strings.Join(ms.Capabilities, ",")}})
	})
}

// SetOrgMemberAccess changes a part's access and capabilities (urgent, needsHuman).
func (s *Service) SetOrgMemberAccess(ctx context.Context, a OrgActor, projectID uuid.UUID, m MemberInput) error {
	if !slices.Contains(Accesses, m.Access) {
		return fieldError("access", "choose read, write or manager")
	}
	for _, c := range m.Capabilities {
		if !slices.Contains(Capabilities, c) {
			return fieldError("capabilities", fmt.Sprintf("unknown capability %q", c))
		}
	}
	caps := m.Capabilities
	if caps == nil {
		caps = []string{}
	}
	return s.inOrg(ctx, a, "set member access", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) error {
		if _, err := s.hosted(ctx, tx, a.OrgID, projectID); err != nil {
			return err
		}
		n, err := s.Q.MembershipSetAccess(ctx, tx, db.MembershipSetAccessParams{ProjectID: projectID, Part: m.Part, Access: m.Access, Capabilities: caps})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.New(apperr.NotFound, "no such part")
		}
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, ProjectID: projectID, Kind: audit.KindProject,
			ObjectID: projectID.String(), Action: "member_changed", Detail: map[string]string{"part": m.Part, "access": m.Access,
				"capabilities": strings.Join(caps, ",")}})
	})
}

// RotateOrgConnectCode revokes a hosted project's connect codes and issues a new one,
// returned once with the parts' threads URLs.
func (s *Service) RotateOrgConnectCode(ctx context.Context, a OrgActor, projectID uuid.UUID) (ProjectOut, error) {
	return inOrgMaking(ctx, s, a, "rotate connect code", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) (ProjectOut, error) {
		if _, err := s.hosted(ctx, tx, a.OrgID, projectID); err != nil {
			return ProjectOut{}, err
		}
		out, err := s.rotateCode(ctx, tx, projectID)
		if err != nil {
			return ProjectOut{}, err
		}
		return out, audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, ProjectID: projectID, Kind: audit.KindProject,
			ObjectID: projectID.String(), Action: "connect_code_rotated"})
	})
}

// --- Agreements

// AgreementObject is the audit object of an agreement (its project and guest).
func AgreementObject(hostOrgID, projectID, guestOrgID uuid.UUID) audit.Object {
	return audit.Object{OrgID: hostOrgID, Kind: audit.KindAgreement, ID: projectID.String() + "/" + guestOrgID.String()}
}

func agreementEvent(a OrgActor, ag Agreement, action string, detail map[string]string) audit.Event {
	o := AgreementObject(ag.HostOrgID, ag.ProjectID, ag.GuestOrgID)
	return audit.Event{Actor: a.audit(), OrgID: o.OrgID, PartyOrgID: ag.GuestOrgID, Kind: o.Kind, ObjectID: o.ID, Action: action, Detail: detail}
}

// OrgAgreements lists the agreements of the rooms the organisation hosts and of the
// rooms it is invited to.
func (s *Service) OrgAgreements(ctx context.Context, a OrgActor) ([]db.AgreementListForOrgRow, error) {
	return orgList(ctx, s, a, "list agreements", s.Q.AgreementListForOrg)
}

func (s *Service) agreementIn(ctx context.Context, tx *pg.Tx, orgID, projectID, guestID uuid.UUID) (Agreement, error) {
	all, err := s.Q.AgreementListForOrg(ctx, tx, orgID)
	if err != nil {
		return Agreement{}, err
	}
	for _, ag := range all {
		if ag.ProjectID == projectID && ag.GuestOrgID == guestID {
			return ag, nil
		}
	}
	return Agreement{}, apperr.New(apperr.NotFound, "no such agreement")
}

// OrgAgreement is one agreement the organisation hosts or is the guest of.
func (s *Service) OrgAgreement(ctx context.Context, a OrgActor, projectID, guestID uuid.UUID) (Agreement, error) {
	return inOrgMaking(ctx, s, a, "agreement", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) (Agreement, error) {
		return s.agreementIn(ctx, tx, a.OrgID, projectID, guestID)
	})
}

func checkGrants(grants []string) error {
	for _, g := range grants {
		if !slices.Contains(AgreementGrants, g) {
			return fieldError("grants", fmt.Sprintf("unknown grant %q", g))
		}
	}
	return nil
}

// InviteGuest invites a company (by its slug) into a hosted project with grants: a
// pending agreement, which the guest's owners or admins accept.
func (s *Service) InviteGuest(ctx context.Context, a OrgActor, projectID uuid.UUID, guestSlug string, grants []string) (Agreement, error) {
	var out Agreement
	if err := checkGrants(grants); err != nil {
		return out, err
	}
	guestSlug = strings.TrimSpace(guestSlug)
	err := s.inOrg(ctx, a, "invite guest", func(tx *pg.Tx, org db.OrganisationGetByIDRow) error {
		p, err := s.hosted(ctx, tx, a.OrgID, projectID)
		if err != nil {
			return err
		}
		g, err := s.Q.OrganisationGetBySlug(ctx, tx, guestSlug)
		if pg.IsNoRows(err) {
			return fieldError("guest", fmt.Sprintf("no company %q", guestSlug))
		}
		if err != nil {
			return err
		}
		if g.ID == a.OrgID {
			// The file's check says it too, under a path the form has no field for.
			return fieldError("guest", "your company hosts this project: invite another company")
		}
		// A revoked agreement is invited again: pending once more, with the grants given
		// now, for the guest to accept (the only way back from revoked on these pages).
		again := map[string]string{}
		if err := s.Q.AgreementLock(ctx, tx, db.AgreementLockParams{ProjectID: projectID, GuestOrgID: g.ID}); err != nil {
			return err
		}
		if prev, err := s.agreementIn(ctx, tx, a.OrgID, projectID, g.ID); err == nil {
			if prev.Status != tenancy.AgreementRevoked {
				return fieldError("guest", MsgAgreementExists)
			}
			again = map[string]string{"from": prev.Status, "to": tenancy.AgreementPending}
		} else if apperr.CodeOf(err) != apperr.NotFound {
			return err
		}
		spec := ProjectSpec{Slug: p.Slug, Name: p.Name, Host: org.Slug, Guests: []GuestSpec{{Org: g.Slug, Status: tenancy.AgreementPending, Grants: grants}}}
		if _, err := s.applyTx(ctx, tx, File{Projects: []ProjectSpec{spec}}, Options{}); err != nil {
			return asInput(err)
		}
		if out, err = s.agreementIn(ctx, tx, a.OrgID, projectID, g.ID); err != nil {
			return err
		}
		again["guest"], again["grants"] = g.Name, strings.Join(grants, ",")
		return audit.Record(ctx, tx, agreementEvent(a, out, "invited", again))
	})
	return out, err
}

// AcceptAgreement is the guest's acceptance of a pending agreement: its agents act in
// the room from their next call. Only the guest's owners or admins accept.
func (s *Service) AcceptAgreement(ctx context.Context, a OrgActor, projectID, guestID uuid.UUID) error {
	return s.onAgreement(ctx, a, "accept agreement", projectID, guestID, func(tx *pg.Tx, ag Agreement) error {
		if ag.GuestOrgID != a.OrgID {
			return apperr.New(apperr.Forbidden, "%s", MsgGuestAccepts)
		}
		if ag.Status != tenancy.AgreementPending {
			return apperr.New(apperr.Conflict, "%s", MsgNotPending)
		}
		return s.setAgreementStatus(ctx, tx, a, ag, tenancy.AgreementActive, "accepted")
	})
}

// RevokeAgreement ends an agreement, from either side: the guest's agents are refused
// in the room from their next call.
func (s *Service) RevokeAgreement(ctx context.Context, a OrgActor, projectID, guestID uuid.UUID) error {
	return s.onAgreement(ctx, a, "revoke agreement", projectID, guestID, func(tx *pg.Tx, ag Agreement) error {
		if ag.Status == tenancy.AgreementRevoked {
			return apperr.New(apperr.Conflict, "%s", MsgAlreadyRevoked)
		}
		return s.setAgreementStatus(ctx, tx, a, ag, tenancy.AgreementRevoked, "revoked")
	})
}

// onAgreement runs fn in one transaction on an agreement the organisation hosts or is the
// guest of (NotFound otherwise), read after the other changes of it have committed.
func (s *Service) onAgreement(ctx context.Context, a OrgActor, op string, projectID, guestID uuid.UUID, fn func(tx *pg.Tx, ag Agreement) error) error {
	return s.inOrg(ctx, a, op, func(tx *pg.Tx, _ db.OrganisationGetByIDRow) error {
		if err := s.Q.AgreementLock(ctx, tx, db.AgreementLockParams{ProjectID: projectID, GuestOrgID: guestID}); err != nil {
			return err
		}
		ag, err := s.agreementIn(ctx, tx, a.OrgID, projectID, guestID)
		if err != nil {
			return err
		}
		return fn(tx, ag)
	})
}

// setAgreementStatus is the CLI's `agreement set --status` on one agreement, audited.
func (s *Service) setAgreementStatus(ctx context.Context, tx *pg.Tx, a OrgActor, ag Agreement, status, action string) error {
	n, err := s.Q.AgreementChangeStatus(ctx, tx, db.AgreementChangeStatusParams{ProjectID: ag.ProjectID, GuestOrgID: ag.GuestOrgID, Status: status, Was: ag.Status})
	if err != nil {
		return err
	}
	if n == 0 {
		// Changed by a path that does not take AgreementLock (the operator's CLI or file).
		return apperr.New(apperr.Conflict, "%s", MsgAgreementChanged)
	}
	return audit.Record(ctx, tx, agreementEvent(a, ag, action, map[string]string{"from": ag.Status, "to": status}))
}

// SetAgreementGrants replaces an agreement's grants; only the host edits them.
func (s *Service) SetAgreementGrants(ctx context.Context, a OrgActor, projectID, guestID uuid.UUID, grants []string) error {
	if err := checkGrants(grants); err != nil {
		return err
	}
	if grants == nil {
		grants = []string{}
	}
	return s.onAgreement(ctx, a, "set grants", projectID, guestID, func(tx *pg.Tx, ag Agreement) error {
		if ag.HostOrgID != a.OrgID {
			return apperr.New(apperr.Forbidden, "%s", MsgHostOnly)
		}
		if _, err := s.Q.AgreementSetGrants(ctx, tx, db.AgreementSetGrantsParams{ProjectID: projectID, GuestOrgID: guestID, Grants: grants}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, agreementEvent(a, ag, "grants_changed", map[string]string{"from": strings.Join(ag.Grants, ","), "to": strings.Join(grants, ",")}))
	})
}

// --- People

// OrgPeople lists the organisation's people and roles.
func (s *Service) OrgPeople(ctx context.Context, a OrgActor) ([]db.OrgMemberListByOrgRow, error) {
	return orgList(ctx, s, a, "list people", s.Q.OrgMemberListByOrg)
}

// SetRole changes a person's role. Only an owner makes an owner or changes an owner's
// role, and the last owner stays one.
func (s *Service) SetRole(ctx context.Context, a OrgActor, userID uuid.UUID, role string) error {
	if !slices.Contains(Roles, role) {
		return fieldError("role", "choose owner, admin or member")
	}
	return s.inOrg(ctx, a, "set role", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) error {
		if err := s.Q.OrgOwnersLock(ctx, tx, a.OrgID); err != nil {
			return err
		}
		people, err := s.Q.OrgMemberListByOrg(ctx, tx, a.OrgID)
		if err != nil {
			return err
		}
		// The actor's role as it is now, under the lock: one demoted a moment ago by
		// another owner must not go on changing roles as an owner.
		me := slices.IndexFunc(people, func(p db.OrgMemberListByOrgRow) bool { return p.ID == a.UserID })
		if me < 0 || people[me].DeactivatedAt != nil {
			return apperr.New(apperr.Forbidden, "%s", MsgAdminRole)
		}
		a.Role = people[me].Role
		if err := a.check(); err != nil {
			return err
		}
		i := slices.IndexFunc(people, func(p db.OrgMemberListByOrgRow) bool { return p.ID == userID })
		if i < 0 {
			return apperr.New(apperr.NotFound, "no such person")
		}
		p := people[i]
		if (role == tenancy.RoleOwner || p.Role == tenancy.RoleOwner) && a.Role != tenancy.RoleOwner {
			return apperr.New(apperr.Forbidden, "%s", MsgOwnerRole)
		}
		// Only an active owner's demotion can leave nobody able to act: a deactivated one
		// is not counted, and demoting them changes nothing of it.
		if p.Role == tenancy.RoleOwner && p.DeactivatedAt == nil && role != tenancy.RoleOwner {
			owners, err := s.Q.OrgMemberCountOwners(ctx, tx, a.OrgID)
			if err != nil {
				return err
			}
			if owners <= 1 {
				return fieldError("role", MsgLastOwner)
			}
		}
		if _, err := s.Q.OrgMemberSetRole(ctx, tx, db.OrgMemberSetRoleParams{OrgID: a.OrgID, UserID: userID, Role: role}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindPerson, ObjectID: userID.String(),
			Action: "role_changed", Detail: map[string]string{"from": p.Role, "to": role}})
	})
}

// --- Connected OAuth clients

// OrgClients lists the OAuth clients the organisation's people connected (live consents).
func (s *Service) OrgClients(ctx context.Context, a OrgActor) ([]db.OAuthClientListByOrgRow, error) {
	return orgList(ctx, s, a, "list clients", s.Q.OAuthClientListByOrg)
}

// DisconnectClient ends every consent the organisation's people gave a client, and
// every token issued under them (as `admin oauth grants revoke` does one by one); the
// client's consents in other organisations stay.
func (s *Service) DisconnectClient(ctx context.Context, a OrgActor, clientID string) (int, error) {
	var n int
	err := s.inOrg(ctx, a, "disconnect client", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) error {
		ids, err := s.Q.OAuthGrantRevokeByOrgClient(ctx, tx, db.OAuthGrantRevokeByOrgClientParams{OrgID: a.OrgID, ClientID: clientID})
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return apperr.New(apperr.NotFound, "no such connected client")
		}
		for _, id := range ids {
			if err := s.Q.OAuthTokenRevokeByGrantID(ctx, tx, id); err != nil {
				return err
			}
		}
		n = len(ids)
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindOAuthClient, ObjectID: clientID,
			Action: "disconnected", Detail: map[string]string{"consents": fmt.Sprint(n)}})
	})
	return n, err
}

// Rows the admin pages show: the generated rows, named here so that pages need not
// import the data layer.
type (
	Org             = db.OrganisationGetByIDRow
	OrgAgentRow     = db.AgentListInOrgRow
	OrgProjectRow   = db.ProjectListHostedByRow
	OrgMemberRow    = db.MembershipListForAdminRow
	OrgAgreementRow = db.AgreementListForOrgRow
	Agreement       = db.AgreementListForOrgRow
	OrgPersonRow    = db.OrgMemberListByOrgRow
	OrgClientRow    = db.OAuthClientListByOrgRow
)
