package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/web"
)

// The company admin pages under /app/admin/ (docs/dashboard.md, "Company admin"): an
// organisation's owners and admins manage its agents, hosted projects, agreements,
// people and connected OAuth clients through admin.Service (the CLI's code), each change
// audited in its own transaction and shown on the object's page. Anyone else gets 403;
// an id of another organisation's object answers 404 like one that does not exist.

// AdminPrefix is the company admin's route prefix.
const AdminPrefix = Prefix + "admin"

// agreementURL is an agreement's admin page (the home page's "agreements pending" link
// there: the guest's owners or admins accept it, the host's follow it).
func agreementURL(project, guest uuid.UUID) string {
	return AdminPrefix + "/agreements/" + project.String() + "/" + guest.String()
}

// adminView is what the admin templates get (view.Admin).
type adminView struct {
	Page   string
	OrgQ   string // "?org=…": keeps the organisation acted for on every link and form
	Org    admin.Org
	Role   string
	Fields map[string]string // field → message, shown beside the field
	Form   map[string]string // what was posted, to fill the form again
	Secret *secretView       // a key, code or webhook secret, shown once

	Agents     []admin.OrgAgentRow
	Agent      *admin.OrgAgentRow
	Projects   []admin.OrgProjectRow
	Project    *admin.ProjectDetail
	Agreements []admin.OrgAgreementRow
	Agreement  *admin.Agreement
	People     []admin.OrgPersonRow
	Person     *admin.OrgPersonRow
	Clients    []admin.OrgClientRow
	Client     string
	Invites    []admin.Invitation

	Grants       []string
	Capabilities []string
	Accesses     []string
	Roles        []string
}

// secretView is a credential shown once: the page that issued it, never again.
type secretView struct {
	What  string
	Value string
	URLs  map[string]string
}

// has reports whether list holds s (checkboxes).
func has(list []string, s string) bool { return slices.Contains(list, s) }

// adminCtx is a request on the admin pages: who acts, for which organisation.
type adminCtx struct {
	w    http.ResponseWriter
	r    *http.Request
	sess web.Session
	a    admin.OrgActor
	orgQ string
}

// adminActor resolves the person's organisation (?org= when it is one of theirs, else
// their first) and role there.
func (h *Handler) adminActor(w http.ResponseWriter, r *http.Request, sess web.Session) (adminCtx, bool) {
	c, ok := h.orgActor(w, r, sess, "Company admin", admin.MsgAdminRole)
	if !ok {
		return adminCtx{}, false
	}
	if err := c.a.CheckAdmin(); err != nil {
		h.message(w, http.StatusForbidden, &sess, "Company admin", admin.MsgAdminRole)
		return adminCtx{}, false
	}
	return c, true
}

// MsgDeactivated refuses a person on the pages of an organisation that deactivated them.
const MsgDeactivated = "You are no longer an active member of this organisation; ask one of its owners to have you reactivated."

// orgActor resolves the person's organisation (?org= when it is one of theirs, else
// their first where they are active) and role there, whatever the role; a person without
// one gets 403 with refusal on a page titled title, and one the organisation deactivated
// 403 with MsgDeactivated: deactivation ends every right in it, an admin's included.
func (h *Handler) orgActor(w http.ResponseWriter, r *http.Request, sess web.Session, title, refusal string) (adminCtx, bool) {
	rows, err := h.deps.Resolver.PersonOrgs(r.Context(), sess.ID)
	if err != nil {
		h.unavailable(w, r, &sess, "organisations", err)
		return adminCtx{}, false
	}
	if len(rows) == 0 {
		h.message(w, http.StatusForbidden, &sess, title, refusal)
		return adminCtx{}, false
	}
	pick := rows[0]
	for _, o := range rows {
		if !o.Deactivated {
			pick = o
			break
		}
	}
	want, _ := uuid.Parse(r.URL.Query().Get("org"))
	for _, o := range rows {
		if o.OrgID == want {
			pick = o
		}
	}
	if pick.Deactivated {
		h.message(w, http.StatusForbidden, &sess, title, MsgDeactivated)
		return adminCtx{}, false
	}
	c := adminCtx{w: w, r: r, sess: sess, a: admin.OrgActor{OrgID: pick.OrgID, UserID: sess.Person.ID, Name: sess.Person.Name, Role: pick.Role}}
	if want == pick.OrgID {
		c.orgQ = "?org=" + pick.OrgID.String()
	}
	return c, true
}

// adminURL is an admin page's address, keeping the organisation acted for.
func (c adminCtx) url(path string, notice string) string {
	return pageURL(AdminPrefix+path, c.orgQ, notice)
}

// pageURL is a page's address with the organisation acted for (orgQ, "?org=…" or "")
// and a notice to show.
func pageURL(page, orgQ, notice string) string {
	u := page + orgQ
	if notice != "" {
		sep := "?"
		if orgQ != "" {
			sep = "&"
		}
		u += sep + "notice=" + url.QueryEscape(notice)
	}
	return u
}

// view starts an admin page's view.
func (h *Handler) adminView(c adminCtx, title, page string) (view, error) {
	org, err := h.deps.Admin.Organisation(c.r.Context(), c.a)
	if err != nil {
		return view{}, err
	}
	v := view{Title: title, Person: c.sess.Person, CSRF: c.sess.CSRF(), Notice: pageNotices[c.r.URL.Query().Get("notice")],
		Admin: &adminView{Page: page, OrgQ: c.orgQ, Org: org, Role: c.a.Role, Fields: map[string]string{}, Form: map[string]string{},
			Grants: admin.AgreementGrants, Capabilities: admin.Capabilities, Accesses: admin.Accesses, Roles: admin.Roles}}
	v.OrgName = org.Name
	return v, nil
}

// fail shows a refused change: field errors beside their fields (400), a refusal (403)
// or a conflict (409) above the page, 404 for an object that is not the organisation's.
// again re-renders the page the form was on with that status.
func (h *Handler) fail(c adminCtx, err error, again func(status int, v view)) {
	var in *admin.InputError
	e, isApp := apperr.As(err)
	switch {
	case errors.As(err, &in):
		again(http.StatusBadRequest, view{Admin: &adminView{Fields: in.Fields}})
	case isApp && e.Code == apperr.NotFound:
		h.notFound(c.w, &c.sess)
	case isApp && e.Code == apperr.Forbidden:
		again(http.StatusForbidden, view{Error: e.Message})
	case isApp && e.Code == apperr.Conflict:
		again(http.StatusConflict, view{Error: e.Message})
	case isApp && e.Code == apperr.Invalid:
		again(http.StatusBadRequest, view{Error: e.Message})
	default:
		h.unavailable(c.w, c.r, &c.sess, "company admin", err)
	}
}

// show loads a page and renders it with status; pre carries what a refused form left
// (field errors, a refusal, a secret shown once).
func (h *Handler) show(c adminCtx, status int, pre view, title, page string, load func(ctx context.Context, v *view) error) {
	v, err := h.adminView(c, title, page)
	if err == nil {
		err = load(c.r.Context(), &v)
	}
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			h.notFound(c.w, &c.sess)
			return
		}
		h.unavailable(c.w, c.r, &c.sess, "company admin", err)
		return
	}
	if pre.Error != "" {
		v.Error, v.Notice = pre.Error, ""
	}
	if pre.Admin != nil {
		if pre.Admin.Fields != nil {
			v.Admin.Fields = pre.Admin.Fields
			v.Error = "Please correct the fields marked below; nothing was saved."
		}
		v.Admin.Secret = pre.Admin.Secret
	}
	if status != http.StatusOK || v.Admin.Secret != nil {
		for k, vals := range c.r.PostForm {
			if k != "csrf" {
				v.Admin.Form[k] = strings.Join(vals, ",")
			}
		}
	}
	tpl := "admin" // the admin pages share one template; another page has its own (desk)
	if _, own := h.pages[page]; own {
		tpl = page
	}
	h.render(c.w, status, tpl, v)
}

// objectHistory reads an organisation-owned object's history for its page.
func (h *Handler) objectHistory(c adminCtx, v *view, o audit.Object, what string) error {
	var err error
	v.History, err = h.history(c.r, pg.Tenant{OrgID: c.a.OrgID}, o, what, v.Admin.Org.Timezone)
	return err
}

// serveAdmin routes /app/admin/… .
func (h *Handler) serveAdmin(w http.ResponseWriter, r *http.Request, sess web.Session, rest []string) {
	c, ok := h.adminActor(w, r, sess)
	if !ok {
		return
	}
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	n := len(rest)
	seg := func(i int) string {
		if i < n {
			return rest[i]
		}
		return ""
	}
	// rest[1] (and for an agreement rest[2]) is an object's id; an id that does not parse
	// answers 404 like one that does not exist.
	id, idErr := uuid.Parse(seg(1))
	guest, guestErr := uuid.Parse(seg(2))
	obj := n >= 2 && idErr == nil
	what, verb := seg(0), seg(2)
	switch {
	case n == 0 && get:
		h.adminHome(c, http.StatusOK, view{})
	case what == "agents" && n == 1 && get:
		h.agentsPage(c, http.StatusOK, view{})
	case what == "agents" && n == 1 && post:
		h.createAgent(c)
	case what == "agents" && obj && n == 2 && get:
		h.agentPage(c, id, http.StatusOK, view{})
	case what == "agents" && obj && n == 3 && post && slices.Contains([]string{"rotate", "revoke", "webhook", "unhook"}, verb):
		h.agentAction(c, id, verb)
	case what == "projects" && n == 1 && get:
		h.projectsPage(c)
	case what == "projects" && obj && n == 2 && get:
		h.adminProjectPage(c, id, http.StatusOK, view{})
	case what == "projects" && obj && n == 3 && post && slices.Contains([]string{"members", "code", "guests"}, verb):
		h.projectAction(c, id, verb, "")
	case what == "projects" && obj && n == 4 && post && verb == "members":
		h.projectAction(c, id, "access", seg(3))
	case what == "agreements" && n == 1 && get:
		h.agreementsPage(c)
	case what == "agreements" && obj && guestErr == nil && n == 3 && get:
		h.agreementPage(c, id, guest, http.StatusOK, view{})
	case what == "agreements" && obj && guestErr == nil && n == 4 && post && slices.Contains([]string{"accept", "revoke", "grants"}, seg(3)):
		h.agreementAction(c, id, guest, seg(3))
	case what == "people" && n == 1 && get:
		h.peoplePage(c, http.StatusOK, view{})
	case what == "people" && n == 1 && post:
		h.invite(c)
	case what == "people" && obj && n == 2 && get:
		h.personPage(c, id, http.StatusOK, view{})
	case what == "people" && obj && n == 3 && post && verb == "role":
		h.setRole(c, id)
	case what == "invitations" && obj && n == 3 && post && verb == "withdraw":
		h.withdrawInvitation(c, id)
	case seg(0) == "clients" && n == 1 && get:
		h.clientsPage(c, http.StatusOK, view{})
	case seg(0) == "clients" && n == 2 && seg(1) == "disconnect" && post:
		h.disconnect(c)
	default:
		h.notFound(w, &sess)
	}
}

func (h *Handler) adminHome(c adminCtx, status int, pre view) {
	h.show(c, status, pre, "Company admin", "overview", func(ctx context.Context, v *view) (err error) {
		if v.Admin.Agents, err = h.deps.Admin.OrgAgents(ctx, c.a); err != nil {
			return err
		}
		if v.Admin.Projects, err = h.deps.Admin.OrgProjects(ctx, c.a); err != nil {
			return err
		}
		v.Admin.Agreements, err = h.deps.Admin.OrgAgreements(ctx, c.a)
		return err
	})
}

// --- Agents

func (h *Handler) agentsPage(c adminCtx, status int, pre view) {
	h.show(c, status, pre, "Agents", "agents", func(ctx context.Context, v *view) (err error) {
		v.Admin.Agents, err = h.deps.Admin.OrgAgents(ctx, c.a)
		return err
	})
}

// createAgent creates an agent and shows its key, once, on the page the form posted to.
func (h *Handler) createAgent(c adminCtx) {
	f := c.r.PostForm
	out, err := h.deps.Admin.CreateAgent(c.r.Context(), c.a, admin.AgentSpec{Slug: f.Get("slug"), Name: f.Get("name"), Model: f.Get("model"), Kind: f.Get("kind")})
	if err != nil {
		h.fail(c, err, func(status int, pre view) { h.agentsPage(c, status, pre) })
		return
	}
	h.agentPage(c, out.ID, http.StatusCreated, view{Admin: &adminView{Secret: &secretView{What: "the new agent's key", Value: out.Key}}})
}

func (h *Handler) agentPage(c adminCtx, id uuid.UUID, status int, pre view) {
	h.show(c, status, pre, "Agent", "agent", func(ctx context.Context, v *view) error {
		ag, _, err := h.deps.Admin.OrgAgent(ctx, c.a, id)
		if err != nil {
			return err
		}
		v.Admin.Agent, v.Title = &ag, "Agent · "+ag.Name
		return h.objectHistory(c, v, audit.Object{OrgID: c.a.OrgID, Kind: audit.KindAgent, ID: id.String()}, "this agent")
	})
}

// agentAction rotates or revokes an agent's keys, or sets or clears its wake webhook
// (through the wake service, which records the audit event in its transaction).
func (h *Handler) agentAction(c adminCtx, id uuid.UUID, action string) {
	ctx := c.r.Context()
	again := func(status int, pre view) { h.agentPage(c, id, status, pre) }
	switch action {
	case "rotate":
		key, err := h.deps.Admin.RotateOrgAgentKey(ctx, c.a, id)
		if err != nil {
			h.fail(c, err, again)
			return
		}
		again(http.StatusOK, view{Admin: &adminView{Secret: &secretView{What: "the agent's new key (the old ones no longer work)", Value: key}}})
		return
	case "revoke":
		if _, err := h.deps.Admin.RevokeOrgAgentKeys(ctx, c.a, id); err != nil {
			h.fail(c, err, again)
			return
		}
		http.Redirect(c.w, c.r, c.url("/agents/"+id.String(), noticeKeysRevoked), http.StatusSeeOther)
		return
	}
	// The webhook: the agent must be this organisation's before the wake service, which
	// takes an org/slug, is asked.
	_, ref, err := h.deps.Admin.OrgAgent(ctx, c.a, id)
	if err != nil {
		h.fail(c, err, again)
		return
	}
	if action == "unhook" {
		ctx = audit.Intend(ctx, admin.WebhookEvent(c.a, id, "webhook_cleared", ""))
		if _, err := h.deps.Wake.ClearWebhook(ctx, ref); err != nil {
			h.fail(c, err, again)
			return
		}
		http.Redirect(c.w, c.r, c.url("/agents/"+id.String(), noticeWebhookRemoved), http.StatusSeeOther)
		return
	}
	raw := strings.TrimSpace(c.r.PostForm.Get("url"))
	ctx = audit.Intend(ctx, admin.WebhookEvent(c.a, id, "webhook_set", raw))
	_, secret, err := h.deps.Wake.SetWebhook(ctx, ref, raw)
	if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
		err = &admin.InputError{Fields: map[string]string{"url": e.Message}}
	}
	if err != nil {
		h.fail(c, err, again)
		return
	}
	again(http.StatusOK, view{Admin: &adminView{Secret: &secretView{What: "the webhook's signing secret", Value: secret}}})
}

// --- Projects

func (h *Handler) projectsPage(c adminCtx) {
	h.show(c, http.StatusOK, view{}, "Projects", "projects", func(ctx context.Context, v *view) (err error) {
		v.Admin.Projects, err = h.deps.Admin.OrgProjects(ctx, c.a)
		return err
	})
}

func (h *Handler) adminProjectPage(c adminCtx, id uuid.UUID, status int, pre view) {
	h.show(c, status, pre, "Project", "project", func(ctx context.Context, v *view) error {
		p, err := h.deps.Admin.OrgProject(ctx, c.a, id)
		if err != nil {
			return err
		}
		v.Admin.Project, v.Title = &p, "Project · "+p.Project.Name
		return h.objectHistory(c, v, audit.Object{OrgID: c.a.OrgID, Kind: audit.KindProject, ID: id.String()}, "this project")
	})
}

// projectAction adds a member, changes a part's access and capabilities, rotates the
// connect code (shown once) or invites a guest company.
func (h *Handler) projectAction(c adminCtx, id uuid.UUID, action, part string) {
	ctx, f := c.r.Context(), c.r.PostForm
	again := func(status int, pre view) { h.adminProjectPage(c, id, status, pre) }
	var (
		err    error
		notice string
	)
	switch action {
	case "members":
		agentID, perr := uuid.Parse(f.Get("agent"))
		if perr != nil {
			err = &admin.InputError{Fields: map[string]string{"agent": "choose one of your organisation's agents"}}
			break
		}
		err = h.deps.Admin.AddOrgMember(ctx, c.a, id, admin.MemberInput{AgentID: agentID, Part: f.Get("part"), Access: f.Get("access"), Capabilities: f["capabilities"]})
		notice = noticeMemberAdded
	case "access":
		err = h.deps.Admin.SetOrgMemberAccess(ctx, c.a, id, admin.MemberInput{Part: part, Access: f.Get("access"), Capabilities: f["capabilities"]})
		notice = noticeSaved
	case "guests":
		_, err = h.deps.Admin.InviteGuest(ctx, c.a, id, f.Get("guest"), f["grants"])
		notice = noticeCompanyInvited
	case "code":
		out, rerr := h.deps.Admin.RotateOrgConnectCode(ctx, c.a, id)
		if rerr != nil {
			h.fail(c, rerr, again)
			return
		}
		again(http.StatusOK, view{Admin: &adminView{Secret: &secretView{What: "the project's new connect code (the old ones no longer work)", Value: out.ConnectCode, URLs: out.URLs.Threads}}})
		return
	}
	if err != nil {
		h.fail(c, err, again)
		return
	}
	http.Redirect(c.w, c.r, c.url("/projects/"+id.String(), notice), http.StatusSeeOther)
}

// --- Agreements

func (h *Handler) agreementsPage(c adminCtx) {
	h.show(c, http.StatusOK, view{}, "Agreements", "agreements", func(ctx context.Context, v *view) (err error) {
		v.Admin.Agreements, err = h.deps.Admin.OrgAgreements(ctx, c.a)
		return err
	})
}

func (h *Handler) agreementPage(c adminCtx, pid, gid uuid.UUID, status int, pre view) {
	h.show(c, status, pre, "Agreement", "agreement", func(ctx context.Context, v *view) error {
		ag, err := h.deps.Admin.OrgAgreement(ctx, c.a, pid, gid)
		if err != nil {
			return err
		}
		v.Admin.Agreement, v.Title = &ag, "Agreement · "+ag.ProjectName+" · "+ag.GuestName
		return h.objectHistory(c, v, admin.AgreementObject(ag.HostOrgID, ag.ProjectID, ag.GuestOrgID), "this agreement")
	})
}

// agreementAction: the guest accepts; either side revokes; the host edits the grants.
func (h *Handler) agreementAction(c adminCtx, pid, gid uuid.UUID, action string) {
	ctx := c.r.Context()
	var (
		err    error
		notice string
	)
	switch action {
	case "accept":
		err, notice = h.deps.Admin.AcceptAgreement(ctx, c.a, pid, gid), noticeAgreementAccepted
	case "revoke":
		err, notice = h.deps.Admin.RevokeAgreement(ctx, c.a, pid, gid), noticeAgreementRevoked
	case "grants":
		err, notice = h.deps.Admin.SetAgreementGrants(ctx, c.a, pid, gid, c.r.PostForm["grants"]), noticeGrantsSaved
	}
	if err != nil {
		h.fail(c, err, func(status int, pre view) { h.agreementPage(c, pid, gid, status, pre) })
		return
	}
	http.Redirect(c.w, c.r, c.url("/agreements/"+pid.String()+"/"+gid.String(), notice), http.StatusSeeOther)
}

// --- People

func (h *Handler) peoplePage(c adminCtx, status int, pre view) {
	h.show(c, status, pre, "People", "people", func(ctx context.Context, v *view) (err error) {
		if v.Admin.People, err = h.deps.Admin.OrgPeople(ctx, c.a); err != nil {
			return err
		}
		v.Admin.Invites, err = h.deps.Admin.OrgInvitations(ctx, c.a)
		return err
	})
}

func (h *Handler) personPage(c adminCtx, id uuid.UUID, status int, pre view) {
	h.show(c, status, pre, "Person", "person", func(ctx context.Context, v *view) error {
		people, err := h.deps.Admin.OrgPeople(ctx, c.a)
		if err != nil {
			return err
		}
		for i := range people {
			if people[i].ID == id {
				v.Admin.Person, v.Title = &people[i], "Person · "+people[i].Name
			}
		}
		if v.Admin.Person == nil {
			return apperr.New(apperr.NotFound, "no such person")
		}
		return h.objectHistory(c, v, audit.Object{OrgID: c.a.OrgID, Kind: audit.KindPerson, ID: id.String()}, "this person's membership")
	})
}

func (h *Handler) setRole(c adminCtx, id uuid.UUID) {
	if err := h.deps.Admin.SetRole(c.r.Context(), c.a, id, c.r.PostForm.Get("role")); err != nil {
		h.fail(c, err, func(status int, pre view) { h.personPage(c, id, status, pre) })
		return
	}
	http.Redirect(c.w, c.r, c.url("/people/"+id.String(), noticeRoleSaved), http.StatusSeeOther)
}

// withdrawInvitation ends an open invitation: its link stops working at once (one sent to
// the wrong address, or pasted where it should not be).
func (h *Handler) withdrawInvitation(c adminCtx, id uuid.UUID) {
	if err := h.deps.Admin.WithdrawInvitation(c.r.Context(), c.a, id); err != nil {
		h.fail(c, err, func(status int, pre view) { h.peoplePage(c, status, pre) })
		return
	}
	http.Redirect(c.w, c.r, c.url("/people", noticeInvitationWithdrawn), http.StatusSeeOther)
}

// invite creates a one-time link for an email address and shows it, once.
func (h *Handler) invite(c adminCtx) {
	f := c.r.PostForm
	out, err := h.deps.Admin.Invite(c.r.Context(), c.a, f.Get("email"), f.Get("role"))
	if err != nil {
		h.fail(c, err, func(status int, pre view) { h.peoplePage(c, status, pre) })
		return
	}
	h.peoplePage(c, http.StatusCreated, view{Admin: &adminView{Secret: &secretView{What: "the invitation link for " + out.Email +
		" (send it to them; it works once, until " + out.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") + ")", Value: out.URL}}})
}

// --- Connected OAuth clients

func (h *Handler) clientsPage(c adminCtx, status int, pre view) {
	h.show(c, status, pre, "Connected apps", "clients", func(ctx context.Context, v *view) (err error) {
		if v.Admin.Clients, err = h.deps.Admin.OrgClients(ctx, c.a); err != nil {
			return err
		}
		// A client id may be a URL (a metadata document), so the history page names it in
		// the query, not the path.
		if v.Admin.Client = c.r.URL.Query().Get("client"); v.Admin.Client != "" {
			return h.objectHistory(c, v, audit.Object{OrgID: c.a.OrgID, Kind: audit.KindOAuthClient, ID: v.Admin.Client}, "this app's connection")
		}
		return nil
	})
}

func (h *Handler) disconnect(c adminCtx) {
	client := c.r.PostForm.Get("client")
	if _, err := h.deps.Admin.DisconnectClient(c.r.Context(), c.a, client); err != nil {
		h.fail(c, err, func(status int, pre view) { h.clientsPage(c, status, pre) })
		return
	}
	u := AdminPrefix + "/clients?client=" + url.QueryEscape(client) + "&notice=" + noticeClientDisconnected
	if c.orgQ != "" {
		u += "&org=" + c.a.OrgID.String()
	}
	http.Redirect(c.w, c.r, u, http.StatusSeeOther)
}
