package admin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
)

// Service runs operator commands.
type Service struct {
	DB        *pg.DB
	Q         *db.Queries
	PublicURL string // base of every URL printed
}

// New builds the operator service on database; publicURL is the base of every URL printed.
func New(database *pg.DB, publicURL string) *Service {
	return &Service{DB: database, Q: db.New(), PublicURL: publicURL}
}

// Options of an apply.
type Options struct {
	RotateKeys bool // issue new agent keys and connect codes, revoking the old ones
}

// Result lists what an apply created or updated, with every credential it newly issued.
// A credential appears once, in the output of the apply that created it.
type Result struct {
	Organisations map[string]ID         `json:"organisations"`
	Users         map[string]ID         `json:"users"`
	Agents        map[string]AgentOut   `json:"agents"`
	Projects      map[string]ProjectOut `json:"projects"`
	// Desk holds each desk workspace's inboxes and saved replies by slug.
	Desk map[string]desk.WorkspaceOut `json:"desk,omitempty"`
}

// ID is an object's id, and whether the apply created it (false: it existed, and only
// what the file or the flags name changed). "create" on an existing slug is an update,
// and the output says so: a mistyped slug that named another object looked the same.
type ID struct {
	ID      uuid.UUID `json:"id"`
	Created bool      `json:"created"`
}

// AgentOut is an agent's id and, when newly issued, its key.
type AgentOut struct {
	ID      uuid.UUID `json:"id"`
	Created bool      `json:"created"`
	Key     string    `json:"key,omitempty"`
}

// ProjectOut is a project's id, its connect code when newly issued, and its URLs.
type ProjectOut struct {
	ID          uuid.UUID `json:"id"`
	Created     bool      `json:"created"`
	ConnectCode string    `json:"connect_code,omitempty"`
	URLs        URLs      `json:"urls"`
}

// URLs are the MCP addresses of a project. Threads URLs embed the connect code, so they
// can only be printed when the code is.
type URLs struct {
	Threads  map[string]string `json:"threads,omitempty"`
	Room     string            `json:"room"`
	AllRooms string            `json:"all_rooms"`
}

// Apply validates the whole file against itself and the database, then applies it in one
// transaction: nothing is half-applied.
func (s *Service) Apply(ctx context.Context, f File, opt Options) (Result, error) {
	var res Result
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		res, err = s.applyTx(ctx, tx, f, opt)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// errNothingNew rolls back ApplyIfNew's transaction.
var errNothingNew = errors.New("the file declares nothing new")

// ApplyIfNew applies f only when it declares an agent or a project the database does not
// have yet (a first run, or a file that grew one); otherwise it changes nothing and the
// result names the declared objects as they are, with no credential. A demo seed applied
// on every start (`make run`, the compose file's seed) uses it: a plain apply set back
// whatever people had changed since, a revoked agreement active again, an accepted one
// pending. applied says which it was. One transaction: what exists is read, the file is
// applied, then rolled back when it declared nothing new. "New" is decided by what exists
// before, not by whether the apply issued a credential: an agent whose keys were revoked
// on the dashboard got a fresh key, and counted as new, so a restart re-applied the whole
// file (a revoked agreement active again, a removed inbox member back).
func (s *Service) ApplyIfNew(ctx context.Context, f File) (res Result, applied bool, err error) {
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		fresh, err := s.declaresNew(ctx, tx, f)
		if err != nil {
			return err
		}
		if res, err = s.applyTx(ctx, tx, f, Options{}); err != nil {
			return err
		}
		if !fresh {
			// Rolled back: a key or code the apply issued meanwhile exists nowhere, and
			// nothing was created.
			for k, a := range res.Agents {
				a.Key, a.Created = "", false
				res.Agents[k] = a
			}
			for k, p := range res.Projects {
				p.ConnectCode, p.URLs.Threads, p.Created = "", nil, false
				res.Projects[k] = p
			}
			for _, ids := range []map[string]ID{res.Organisations, res.Users} {
				for k, id := range ids {
					id.Created = false
					ids[k] = id
				}
			}
			return errNothingNew
		}
		return nil
	})
	switch {
	case errors.Is(err, errNothingNew):
		return res, false, nil
	case err != nil:
		return Result{}, false, err
	}
	return res, true, nil
}

// declaresNew reports whether f declares an agent or a project the database does not have.
func (s *Service) declaresNew(ctx context.Context, tx *pg.Tx, f File) (bool, error) {
	k, err := s.loadKnown(ctx, tx)
	if err != nil {
		return false, err
	}
	for _, a := range f.Agents {
		if !k.agents[a.Org+"/"+a.Slug] {
			return true, nil
		}
	}
	projects, err := s.Q.ProjectList(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("load projects: %w", err)
	}
	have := map[string]bool{}
	for _, p := range projects {
		have[p.HostSlug+"/"+p.Slug] = true
	}
	for _, p := range f.Projects {
		if !have[p.Host+"/"+p.Slug] {
			return true, nil
		}
	}
	return false, nil
}

// applyTx is Apply in the caller's transaction: the dashboard's company admin applies a
// one-object file and records the change's audit event in the same transaction.
func (s *Service) applyTx(ctx context.Context, tx *pg.Tx, f File, opt Options) (Result, error) {
	res := Result{Organisations: map[string]ID{}, Users: map[string]ID{}, Agents: map[string]AgentOut{}, Projects: map[string]ProjectOut{}, Desk: map[string]desk.WorkspaceOut{}}
	err := func() error {
		k, err := s.loadKnown(ctx, tx)
		if err != nil {
			return err
		}
		if p := validate(&f, k); len(p) > 0 {
			return p
		}
		orgIDs := map[string]uuid.UUID{}
		for _, o := range f.Organisations {
			row, err := s.Q.OrganisationUpsert(ctx, tx, db.OrganisationUpsertParams{ID: newID(), Slug: o.Slug, Name: o.Name, Plan: o.Plan, Timezone: o.Timezone})
			if err != nil {
				return fmt.Errorf("apply organisation %s: %w", o.Slug, err)
			}
			orgIDs[o.Slug] = row.ID
			res.Organisations[o.Slug] = ID{ID: row.ID, Created: row.Created}
			if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: row.ID, Kind: audit.KindOrganisation, ObjectID: row.ID.String(),
				Action: createdOr(row.Created), Detail: map[string]string{"slug": o.Slug, "name": o.Name, "plan": row.Plan, "timezone": row.Timezone}}); err != nil {
				return err
			}
		}
		orgID := func(slug string) (uuid.UUID, error) {
			if id, ok := orgIDs[slug]; ok {
				return id, nil
			}
			o, err := s.Q.OrganisationGetBySlug(ctx, tx, slug)
			if err != nil {
				return uuid.Nil, fmt.Errorf("organisation %s: %w", slug, err)
			}
			orgIDs[slug] = o.ID
			return o.ID, nil
		}
		for _, u := range f.Users {
			var hash *string
			if u.Password != "" {
				// argon2id, verified by the sign-in page (auth.VerifyPassword).
				h, err := auth.HashPassword(u.Password)
				if err != nil {
					return fmt.Errorf("apply user %s: hash password: %w", u.Email, err)
				}
				hash = &h
			}
			user, err := s.Q.UserUpsert(ctx, tx, db.UserUpsertParams{ID: newID(), Email: u.Email, Name: u.Name, PasswordHash: hash})
			if err != nil {
				return fmt.Errorf("apply user %s: %w", u.Email, err)
			}
			id := user.ID
			oid, err := orgID(u.Org)
			if err != nil {
				return err
			}
			if err := s.Q.OrgMemberUpsert(ctx, tx, db.OrgMemberUpsertParams{OrgID: oid, UserID: id, Role: u.Role}); err != nil {
				return fmt.Errorf("apply user %s: membership: %w", u.Email, err)
			}
			res.Users[u.Email] = ID{ID: id, Created: user.Created}
			if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: oid, Kind: audit.KindPerson, ObjectID: id.String(),
				Action: createdOr(user.Created), Detail: map[string]string{"email": u.Email, "role": u.Role, "password_set": fmt.Sprint(hash != nil)}}); err != nil {
				return err
			}
		}
		for _, a := range f.Agents {
			oid, err := orgID(a.Org)
			if err != nil {
				return err
			}
			row, err := s.Q.AgentUpsert(ctx, tx, db.AgentUpsertParams{ID: newID(), OrgID: oid, Slug: a.Slug, Name: a.Name, Model: a.Model, Kind: a.Kind})
			if err != nil {
				return fmt.Errorf("apply agent %s/%s: %w", a.Org, a.Slug, err)
			}
			out := AgentOut{ID: row.ID, Created: row.Created}
			if out.Key, err = s.ensureAgentKey(ctx, tx, oid, row.ID, opt.RotateKeys); err != nil {
				return fmt.Errorf("apply agent %s/%s: %w", a.Org, a.Slug, err)
			}
			res.Agents[a.Org+"/"+a.Slug] = out
			if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: oid, Kind: audit.KindAgent, ObjectID: row.ID.String(), Action: createdOr(row.Created),
				Detail: map[string]string{"slug": a.Slug, "name": a.Name, "model": a.Model, "kind": a.Kind, "key_issued": fmt.Sprint(out.Key != "")}}); err != nil {
				return err
			}
		}
		for _, p := range f.Projects {
			out, err := s.applyProject(ctx, tx, p, orgID, opt)
			if err != nil {
				return fmt.Errorf("apply project %s/%s: %w", p.Host, p.Slug, err)
			}
			res.Projects[f.ProjectKey(p)] = out
		}
		for _, w := range f.Desk {
			oid, err := orgID(w.Workspace)
			if err != nil {
				return err
			}
			if res.Desk[w.Workspace], err = desk.ApplyWorkspace(ctx, tx, s.Q, oid, w); err != nil {
				return fmt.Errorf("apply desk workspace %s: %w", w.Workspace, err)
			}
		}
		return nil
	}()
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

func (s *Service) applyProject(ctx context.Context, tx *pg.Tx, p ProjectSpec, orgID func(string) (uuid.UUID, error), opt Options) (ProjectOut, error) {
	hostID, err := orgID(p.Host)
	if err != nil {
		return ProjectOut{}, err
	}
	row, err := s.Q.ProjectUpsert(ctx, tx, db.ProjectUpsertParams{ID: newID(), HostOrgID: hostID, Slug: p.Slug, Name: p.Name})
	if err != nil {
		return ProjectOut{}, err
	}
	for _, g := range p.Guests {
		gid, err := orgID(g.Org)
		if err != nil {
			return ProjectOut{}, err
		}
		grants := g.Grants
		if grants == nil {
			grants = []string{}
		}
		if err := s.Q.AgreementUpsert(ctx, tx, db.AgreementUpsertParams{ProjectID: row.ID, GuestOrgID: gid, Status: g.Status, Grants: grants}); err != nil {
			return ProjectOut{}, fmt.Errorf("agreement with %s: %w", g.Org, err)
		}
		o := AgreementObject(hostID, row.ID, gid)
		if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: o.OrgID, PartyOrgID: gid, ProjectID: row.ID, Kind: o.Kind, ObjectID: o.ID,
			Action: "set", Detail: map[string]string{"status": g.Status, "grants": strings.Join(grants, ",")}}); err != nil {
			return ProjectOut{}, err
		}
	}
	agents := make([]db.AgentGetBySlugRow, len(p.Members))
	for i, m := range p.Members {
		orgSlug, agentSlug, _ := strings.Cut(m.Agent, "/")
		if agents[i], err = s.Q.AgentGetBySlug(ctx, tx, db.AgentGetBySlugParams{OrgSlug: orgSlug, AgentSlug: agentSlug}); err != nil {
			return ProjectOut{}, fmt.Errorf("member %s: %w", m.Agent, err)
		}
		if err := s.Q.MembershipMoveAside(ctx, tx, db.MembershipMoveAsideParams{ProjectID: row.ID, AgentID: agents[i].ID, Part: m.Part}); err != nil {
			return ProjectOut{}, fmt.Errorf("member %s: %w", m.Agent, err)
		}
	}
	for i, m := range p.Members {
		a := agents[i]
		if m.Main {
			if err := s.Q.MembershipClearMainExcept(ctx, tx, db.MembershipClearMainExceptParams{ProjectID: row.ID, AgentID: a.ID}); err != nil {
				return ProjectOut{}, fmt.Errorf("member %s: %w", m.Agent, err)
			}
		}
		var nick *string
		if m.Nickname != "" {
			nick = &m.Nickname
		}
		caps := m.Capabilities
		if caps == nil {
			caps = []string{}
		}
		if _, err := s.Q.MembershipUpsert(ctx, tx, db.MembershipUpsertParams{
			ProjectID: row.ID, ID: newID(), AgentID: a.ID, OrgID: a.OrgID, Part: m.Part,
			IsMain: m.Main, Nickname: nick, Access: m.Access, Capabilities: caps,
		}); err != nil {
			if pg.IsUniqueViolation(err) {
				return ProjectOut{}, fmt.Errorf("member %s: part %q is already held by another agent in this project", m.Agent, m.Part)
			}
			return ProjectOut{}, fmt.Errorf("member %s: %w", m.Agent, err)
		}
		if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: hostID, ProjectID: row.ID, Kind: audit.KindProject, ObjectID: row.ID.String(),
			Action: "member_set", Detail: map[string]string{"agent": m.Agent, "part": m.Part, "access": m.Access, "main": fmt.Sprint(m.Main)}}); err != nil {
			return ProjectOut{}, err
		}
	}
	out := ProjectOut{ID: row.ID, Created: row.Created, URLs: URLs{Room: s.url("/api/mcp/p/" + row.ID.String()), AllRooms: s.url("/api/mcp")}}
	if out.ConnectCode, err = s.ensureConnectCode(ctx, tx, row.ID, opt.RotateKeys); err != nil {
		return ProjectOut{}, err
	}
	if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: hostID, ProjectID: row.ID, Kind: audit.KindProject, ObjectID: row.ID.String(),
		Action: createdOr(row.Created), Detail: map[string]string{"slug": p.Slug, "name": p.Name, "guests": fmt.Sprint(len(p.Guests)),
			"members": fmt.Sprint(len(p.Members)), "connect_code_issued": fmt.Sprint(out.ConnectCode != "")}}); err != nil {
		return ProjectOut{}, err
	}
	if out.ConnectCode != "" {
		members, err := s.Q.MembershipList(ctx, tx, row.ID)
		if err != nil {
			return ProjectOut{}, err
		}
		out.URLs.Threads = map[string]string{}
		for _, m := range members {
			out.URLs.Threads[m.Part] = ThreadsURL(s.PublicURL, out.ConnectCode, m.Part)
		}
	}
	return out, nil
}

// ensureAgentKey issues a key when the agent has none (or when rotating, after revoking
// the old ones) and returns it; "" means the existing key stays and is not shown again.
func (s *Service) ensureAgentKey(ctx context.Context, tx *pg.Tx, orgID, agentID uuid.UUID, rotate bool) (string, error) {
	return ensureCredential("key", auth.AgentKeyPrefix, rotate,
		func() (int64, error) {
			return s.Q.AgentKeyRevoke(ctx, tx, db.AgentKeyRevokeParams{OrgID: orgID, AgentID: agentID})
		},
		func() (int64, error) {
			return s.Q.AgentKeyCountActive(ctx, tx, db.AgentKeyCountActiveParams{OrgID: orgID, AgentID: agentID})
		},
		func(p auth.Parsed) error {
			return s.Q.AgentKeyInsert(ctx, tx, db.AgentKeyInsertParams{OrgID: orgID, ID: newID(), AgentID: agentID, KeyID: p.ID, SecretHash: p.Hash()})
		})
}

// ensureConnectCode is ensureAgentKey for a project's connect code.
func (s *Service) ensureConnectCode(ctx context.Context, tx *pg.Tx, projectID uuid.UUID, rotate bool) (string, error) {
	return ensureCredential("connect code", auth.ConnectCodePrefix, rotate,
		func() (int64, error) { return s.Q.ConnectCodeRevoke(ctx, tx, projectID) },
		func() (int64, error) { return s.Q.ConnectCodeCountActive(ctx, tx, projectID) },
		func(p auth.Parsed) error {
			return s.Q.ConnectCodeInsert(ctx, tx, db.ConnectCodeInsertParams{ProjectID: projectID, ID: newID(), CodeID: p.ID, SecretHash: p.Hash()})
		})
}

// ensureCredential issues a credential (what, with prefix) when none is active, or after
// revoking the active ones when rotating, and returns it: shown once. "" means the active
// one stays and is not shown again.
func ensureCredential(what, prefix string, rotate bool, revoke, active func() (int64, error), store func(auth.Parsed) error) (string, error) {
	if rotate {
		if _, err := revoke(); err != nil {
			return "", fmt.Errorf("revoke %ss: %w", what, err)
		}
	} else {
		n, err := active()
		if err != nil {
			return "", fmt.Errorf("count %ss: %w", what, err)
		}
		if n > 0 {
			return "", nil
		}
	}
	raw, p, err := auth.Generate(prefix)
	if err != nil {
		return "", fmt.Errorf("generate %s: %w", what, err)
	}
	if err := store(p); err != nil {
		return "", fmt.Errorf("store %s: %w", what, err)
	}
	return raw, nil
}

func (s *Service) loadKnown(ctx context.Context, tx *pg.Tx) (known, error) {
	k := known{orgs: map[string]bool{}, agents: map[string]bool{}, agreements: map[string]map[string]bool{}}
	orgs, err := s.Q.OrganisationList(ctx, tx)
	if err != nil {
		return k, fmt.Errorf("load organisations: %w", err)
	}
	for _, o := range orgs {
		k.orgs[o.Slug] = true
	}
	agents, err := s.Q.AgentList(ctx, tx)
	if err != nil {
		return k, fmt.Errorf("load agents: %w", err)
	}
	for _, a := range agents {
		k.agents[a.OrgSlug+"/"+a.Slug] = true
	}
	ags, err := s.Q.AgreementListAllKeys(ctx, tx)
	if err != nil {
		return k, fmt.Errorf("load agreements: %w", err)
	}
	for _, a := range ags {
		key := a.HostSlug + "/" + a.ProjectSlug
		if k.agreements[key] == nil {
			k.agreements[key] = map[string]bool{}
		}
		k.agreements[key][a.GuestSlug] = true
	}
	return k, nil
}

func (s *Service) url(path string) string { return strings.TrimRight(s.PublicURL, "/") + path }

// ThreadsURL is the threads endpoint of one part.
func ThreadsURL(public, connectCode, part string) string {
	return strings.TrimRight(public, "/") + "/mcp/" + connectCode + "?part=" + url.QueryEscape(part)
}

func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// createdOr is an upsert's audit action.
func createdOr(created bool) string {
	if created {
		return "created"
	}
	return "updated"
}
