package app_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// authzState fingerprints every table a dashboard form changes, one line a table: a
// refused post must leave it as it was. Of the wakes only the dead ones, which a person
// retries: the others change on their own as agents are woken.
func authzState() string {
	lines := make([]string, 0, 16)
	for _, table := range []string{"agent", "agent_key", "agreement", "audit_event", "connect_code", "membership",
		"org_member", "org_invitation", "room_message", "room_task", "memory_entry", "knowledge", "thread",
		"wake WHERE t.status = 'dead'", "wake_target", "project", "oauth_grant"} {
		name, where, _ := strings.Cut(table, " ")
		if where != "" {
			where = " " + where
		}
		lines = append(lines, fmt.Sprintf(`'%s ' || coalesce((SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM %s t%s), '-')`, name, name, where))
	}
	return "SELECT concat_ws(E'\\n',\n  " + strings.Join(lines, ",\n  ") + ")"
}

// wantUnchanged fails t, naming the tables that changed, unless the authzState before
// and after are the same.
func wantUnchanged(t *testing.T, before, after, what string) {
	t.Helper()
	if after == before {
		return
	}
	b := strings.Split(before, "\n")
	for i, line := range strings.Split(after, "\n") {
		if i >= len(b) || line != b[i] {
			t.Errorf("%s: %s", what, strings.Fields(line)[0])
		}
	}
	t.FailNow()
}

// roomLink finds a page's links, posted forms and streams into a room's pages; getForm
// its search forms, which send their fields instead of their action's query.
var (
	roomLink = regexp.MustCompile(`(?:href|method="post" action|data-events)="(/app/(?:rooms|projects)/[^"]*)"`)
	getForm  = regexp.MustCompile(`<form method="get" action="/app/(?:rooms|projects)/[^"]*"[^>]*>(<input type="hidden" name="org" value="[^"]*">)?`)
)

// TestDashboardAuthz walks the dashboard's routes as people who may not use them: another
// organisation's owner with the victim's ids (404, as for ids that do not exist), a member
// on the owners' and admins' forms (403), a guest company's admin on the host's objects,
// posts without the CSRF token, and GETs of the forms' addresses; none changes anything.
func TestDashboardAuthz(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: dashboardFile})
	d := openSeeded(t, s)
	ctx := context.Background()
	room := s.res.Projects["escalations"].ID.String()
	tps := s.res.Projects["tps"].ID.String()
	acme, globex := s.res.Organisations["acme"].ID.String(), s.res.Organisations["globex"].ID.String()
	architect := s.res.Agents["acme/architect"].ID.String()
	peter := s.res.Agents["initech/peter"].ID.String()
	userID := func(email string) string {
		return testfix.Scalar[string](t, d, `SELECT id::text FROM app_user WHERE email = $1`, email)
	}
	moID := userID("mo@acme.test")
	ana, mo, gus, ivy := signIn(t, s.base, "ana@acme.test", "demo-password-ana"), signIn(t, s.base, "mo@acme.test", "demo-password-mo"),
		signIn(t, s.base, "gus@globex.test", "demo-password-gus"), signIn(t, s.base, "ivy@initech.test", "demo-password-ivy")

	// An open invitation of Acme's, for the withdraw form.
	if status, body := ana.postForm("/app/admin/people", ana.form("email", "new@acme.test", "role", "member")); status != http.StatusCreated {
		t.Fatalf("invite: %d %.300s", status, body)
	}
	invitation := testfix.Scalar[string](t, d, `SELECT id::text FROM org_invitation WHERE email = 'new@acme.test'`)
	some := uuid.NewString() // an id of nothing

	// Acme's forms: the admin pages' and the room's, with what each posts.
	type route struct {
		path string
		form []string
	}
	adminForms := []route{
		{"/app/admin/agents", []string{"slug", "evil-bot", "name", "Evil", "model", "gpt-5", "kind", "session"}},
		{"/app/admin/agents/" + architect + "/rotate", nil},
		{"/app/admin/agents/" + architect + "/revoke", nil},
		{"/app/admin/agents/" + architect + "/webhook", []string{"url", "https://evil.test/hook"}},
		{"/app/admin/agents/" + architect + "/unhook", nil},
		{"/app/admin/projects/" + room + "/members", []string{"agent", architect, "part", "evil", "access", "manager"}},
		{"/app/admin/projects/" + room + "/members/architect", []string{"access", "read"}},
		{"/app/admin/projects/" + room + "/members/qa-lead", []string{"access", "manager", "capabilities", "urgent"}},
		{"/app/admin/projects/" + room + "/code", nil},
		{"/app/admin/projects/" + room + "/guests", []string{"guest", "initech", "grants", "read_memory"}},
		{"/app/admin/agreements/" + room + "/" + globex + "/grants", []string{"grants", "read_memory"}},
		{"/app/admin/agreements/" + room + "/" + globex + "/revoke", nil},
		{"/app/admin/agreements/" + room + "/" + globex + "/accept", nil},
		{"/app/admin/people", []string{"email", "evil@evil.test", "role", "admin"}},
		{"/app/admin/people/" + moID + "/role", []string{"role", "owner"}},
		{"/app/admin/invitations/" + invitation + "/withdraw", nil},
		{"/app/admin/clients/disconnect", []string{"client", "https://evil.test/client"}},
	}
	roomForms := []route{
		{"/app/rooms/" + room + "/messages", []string{"content", "evil"}},
		{"/app/rooms/" + room + "/memory/" + some + "/deprecate", nil},
		{"/app/rooms/" + room + "/tasks/" + some + "/review", []string{"verdict", "accepted"}},
		{"/app/rooms/" + room + "/tasks/" + some + "/cancel", nil},
		{"/app/rooms/" + room + "/knowledge/settings", []string{"rule_rows", "1", "name_0", "x", "pattern_0", "x", "replacement_0", "y"}},
		{"/app/rooms/" + room + "/knowledge/" + some + "/approve", nil},
		{"/app/projects/" + room + "/threads/" + some + "/cancel", nil},
		{"/app/projects/" + room + "/wakes/" + some + "/retry", nil},
	}
	state := func(t *testing.T) string { t.Helper(); return testfix.Scalar[string](t, d, authzState()) }
	unchanged := func(t *testing.T, before, what string) { t.Helper(); wantUnchanged(t, before, state(t), what) }
	post := func(t *testing.T, p *person, r route, csrf bool) (int, string) {
		t.Helper()
		v := url.Values{}
		if csrf {
			v = p.form(r.form...)
		} else {
			for i := 0; i+1 < len(r.form); i += 2 {
				v.Add(r.form[i], r.form[i+1])
			}
		}
		return p.postForm(r.path, v)
	}

	t.Run("another organisation's owner gets 404 for every id of Acme's, page or form, and nothing changes", func(t *testing.T) {
		before := state(t)
		for _, path := range []string{"/app/admin/agents/" + architect, "/app/admin/projects/" + room, "/app/admin/agreements/" + room + "/" + globex,
			"/app/admin/people/" + moID, "/app/rooms/" + room, "/app/rooms/" + room + "/memory", "/app/rooms/" + room + "/tasks",
			"/app/rooms/" + room + "/knowledge", "/app/rooms/" + room + "/knowledge/settings", "/app/projects/" + room + "/threads",
			"/app/projects/" + room + "/roster", "/app/projects/" + room + "/activity", "/app/projects/" + room + "/usage",
			"/app/projects/" + room + "/usage.csv", "/app/projects/" + room + "/wakes/" + some} {
			if status, body := ivy.get(path); status != http.StatusNotFound {
				t.Errorf("GET %s: %d %.200s", path, status, body)
			}
		}
		for _, r := range append(append([]route{}, adminForms...), roomForms...) {
			switch r.path {
			case "/app/admin/agents", "/app/admin/people", "/app/admin/clients/disconnect":
				continue // no id of Acme's: Initech's own forms
			}
			if status, body := post(t, ivy, r, true); status != http.StatusNotFound {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		unchanged(t, before, "another organisation's refused forms changed the database")
	})

	t.Run("an owner naming another organisation's agent in a form field adds nothing", func(t *testing.T) {
		before := state(t)
		status, body := ana.postForm("/app/admin/projects/"+room+"/members", ana.form("agent", peter, "part", "peter", "access", "write"))
		if status != http.StatusBadRequest || !strings.Contains(body, "choose one of your organisation") {
			t.Errorf("Initech's agent into Acme's project: %d %.300s", status, body)
		}
		unchanged(t, before, "the refused member changed the database")
	})

	t.Run("a member gets 403 on every owners' and admins' form, and nothing changes", func(t *testing.T) {
		before := state(t)
		for _, r := range adminForms {
			if status, body := post(t, mo, r, true); status != http.StatusForbidden {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		for _, r := range []route{roomForms[4], roomForms[5]} {
			if status, body := post(t, mo, r, true); status != http.StatusForbidden {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		unchanged(t, before, "a member's refused forms changed the database")
	})

	t.Run("a guest company's admin gets 404 for the host's objects and 403 for the host's decisions", func(t *testing.T) {
		before := state(t)
		for _, path := range []string{"/app/admin/agents/" + architect, "/app/admin/projects/" + room, "/app/admin/people/" + moID} {
			if status, body := gus.get(path); status != http.StatusNotFound {
				t.Errorf("GET %s: %d %.200s", path, status, body)
			}
		}
		for _, r := range adminForms[1:10] {
			if status, body := post(t, gus, r, true); status != http.StatusNotFound {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		for _, r := range []route{adminForms[14], adminForms[15]} {
			if status, body := post(t, gus, r, true); status != http.StatusNotFound {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		if status, body := post(t, gus, adminForms[10], true); status != http.StatusForbidden {
			t.Errorf("POST grants: %d %.200s", status, body)
		}
		for _, r := range []route{roomForms[4], roomForms[5]} {
			if status, body := post(t, gus, r, true); status != http.StatusForbidden {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		if status, body := gus.get("/app/rooms/" + room + "/knowledge/settings"); status != http.StatusForbidden {
			t.Errorf("GET knowledge settings: %d %.200s", status, body)
		}
		// Another company's room, by its id.
		for _, path := range []string{"/app/rooms/" + tps, "/app/projects/" + tps + "/threads", "/app/admin/agents/" + peter} {
			if status, body := gus.get(path); status != http.StatusNotFound {
				t.Errorf("GET %s: %d %.200s", path, status, body)
			}
		}
		unchanged(t, before, "a guest's refused forms changed the database")
	})

	t.Run("every form without the CSRF token is 403 and changes nothing", func(t *testing.T) {
		before := state(t)
		for _, r := range append(append([]route{}, adminForms...), roomForms...) {
			if status, body := post(t, ana, r, false); status != http.StatusForbidden {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		unchanged(t, before, "a post without the token changed the database")
	})

	t.Run("a form's address answers no other method, and no other method changes anything", func(t *testing.T) {
		before := state(t)
		for _, r := range append(append([]route{}, adminForms...), roomForms...) {
			v := ana.form(r.form...)
			for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				target := ana.base + r.path
				var body io.Reader
				if method == http.MethodGet || method == http.MethodHead {
					target += "?" + v.Encode()
				} else {
					body = strings.NewReader(v.Encode())
				}
				req, err := http.NewRequest(method, target, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Origin", ana.base)
				page := (method == http.MethodGet || method == http.MethodHead) && (r.path == "/app/admin/agents" || r.path == "/app/admin/people" ||
					strings.HasSuffix(r.path, "/knowledge/settings")) // the forms' own pages
				if status, _, _ := ana.do(req); status < 400 && !page {
					t.Errorf("%s %s: %d", method, r.path, status)
				}
			}
		}
		unchanged(t, before, "a request other than a POST changed the database")
	})

	t.Run("a person of two organisations acts for the one ?org= names, in its role", func(t *testing.T) {
		// Gus joins Acme as a member: Globex's admin, Acme's member.
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO org_member (org_id, user_id, role) VALUES ($1, $2, 'member')`, acme, userID("gus@globex.test"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		before := state(t)
		for _, r := range adminForms[1:10] {
			r.path += "?org=" + acme
			if status, body := post(t, gus, r, true); status != http.StatusForbidden {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		for _, r := range adminForms[1:10] {
			r.path += "?org=" + globex
			if status, body := post(t, gus, r, true); status != http.StatusNotFound {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		unchanged(t, before, "a refused form changed the database")
		if status, body := gus.get("/app/admin/people?org=" + acme); status != http.StatusForbidden || strings.Contains(body, "mo@acme.test") {
			t.Fatalf("Acme's people as its member: %d", status)
		}
	})

	t.Run("a room opened for the organisation ?org= names keeps it on every link, form, stream and redirect", func(t *testing.T) {
		// Gus (from the subtest above) is Globex's admin first and Acme's member second: a
		// room page that acts for Acme must not hand its forms and links to Globex.
		inAcme := "org=" + acme
		_, home := gus.get("/app/?org=" + acme)
		for _, m := range roomLink.FindAllStringSubmatch(home, -1) {
			if !strings.Contains(m[1], inAcme) {
				t.Errorf("home acting for Acme links to %s", m[1])
			}
		}
		for _, page := range []string{"/app/rooms/" + room, "/app/rooms/" + room + "/memory", "/app/rooms/" + room + "/tasks",
			"/app/rooms/" + room + "/knowledge", "/app/projects/" + room + "/threads", "/app/projects/" + room + "/roster",
			"/app/projects/" + room + "/activity", "/app/projects/" + room + "/usage"} {
			status, body := gus.get(page + "?" + inAcme)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d", page, status)
			}
			for _, m := range roomLink.FindAllStringSubmatch(body, -1) {
				if !strings.Contains(m[1], inAcme) {
					t.Errorf("%s acting for Acme: %s", page, m[1])
				}
			}
			for _, m := range getForm.FindAllStringSubmatch(body, -1) {
				if !strings.Contains(m[1], `value="`+acme+`"`) {
					t.Errorf("%s acting for Acme: %s", page, m[0])
				}
			}
		}
		for _, page := range []string{"/app/rooms/" + room, "/app/projects/" + room + "/activity"} {
			_, body := gus.get(page + "?" + inAcme)
			if m := regexp.MustCompile(`data-events="([^"]+)"`).FindStringSubmatch(body); m == nil {
				t.Errorf("%s has no stream", page)
			} else {
				gus.liveStream(t, html.UnescapeString(m[1])) // it opens, for Acme
			}
		}
		_, body := gus.get("/app/rooms/" + room + "?" + inAcme)
		action := regexp.MustCompile(`id="composer" method="post" action="([^"]+)"`).FindStringSubmatch(body)
		if action == nil {
			t.Fatalf("no composer: %s", body)
		}
		req, err := http.NewRequest(http.MethodPost, gus.base+html.UnescapeString(action[1]), strings.NewReader(gus.form("content", "Authz: posted from Acme's page").Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", gus.base)
		status, _, hd := gus.do(req)
		if status != http.StatusSeeOther || !strings.Contains(hd.Get("Location"), inAcme) {
			t.Errorf("post: %d, back to %s", status, hd.Get("Location"))
		}
		if org := testfix.Scalar[string](t, d, `SELECT author_org_id::text FROM room_message WHERE content = 'Authz: posted from Acme''s page'`); org != acme {
			t.Errorf("the message posted from Acme's page was posted for %s", org)
		}
	})

	t.Run("the company admin pages acting for ?org= link to its rooms for it", func(t *testing.T) {
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE org_member SET role = 'admin' WHERE org_id = $1 AND user_id = $2`, acme, userID("gus@globex.test"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, page := range []string{"/app/admin/projects?org=" + acme, "/app/admin/projects/" + room + "?org=" + acme} {
			status, body := gus.get(page)
			links := roomLink.FindAllStringSubmatch(body, -1)
			if status != http.StatusOK || len(links) == 0 {
				t.Fatalf("GET %s: %d, %d room links", page, status, len(links))
			}
			for _, m := range links {
				if !strings.Contains(m[1], "org="+acme) {
					t.Errorf("%s links to %s", page, m[1])
				}
			}
		}
	})

	t.Run("the header's Company admin and Desk links keep the organisation ?org= names", func(t *testing.T) {
		// Gus is Acme's admin (the subtest above) and Globex's: from a page acting for Acme,
		// the header must not take him back to Globex, his first organisation.
		header := regexp.MustCompile(`(?s)<header class="top">(.*?)</header>`)
		headerLink := regexp.MustCompile(`href="(/app/(?:admin|desk)[^"]*)"`)
		for _, page := range []string{"/app/", "/app/rooms/" + room, "/app/projects/" + room + "/threads", "/app/admin/people", "/app/desk"} {
			status, body := gus.get(page + "?org=" + acme)
			h := header.FindStringSubmatch(body)
			if status != http.StatusOK || h == nil {
				t.Fatalf("GET %s: %d, header found: %v", page, status, h != nil)
			}
			links := headerLink.FindAllStringSubmatch(h[1], -1)
			if len(links) != 2 {
				t.Fatalf("%s: header links %q", page, links)
			}
			for _, m := range links {
				if !strings.HasSuffix(html.UnescapeString(m[1]), "?org="+acme) {
					t.Errorf("%s acting for Acme: the header links to %s", page, m[1])
				}
			}
		}
	})

	t.Run("a deactivated person's open streams end, and their uploads and forms change nothing", func(t *testing.T) {
		roomStream := mo.liveStream(t, "/app/rooms/"+room+"/events")
		csrf := mo.csrf()
		task := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(served(t, s.base+"/api/mcp/p/"+room, s.key("acme/architect"), "send_task",
			map[string]any{"to_agent_slug": "qa-lead", "goal": "Authz: a task to attach to"}))
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE org_member SET deactivated_at = now() WHERE org_id = $1 AND user_id = $2`, acme, moID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		served(t, s.base+"/api/mcp/p/"+room, s.key("globex/qa-lead"), "post_message", map[string]any{"content": "Authz: after the deactivation"})
		for {
			line, err := roomStream.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended without saying so: %v", err)
			}
			if strings.Contains(line, "after the deactivation") {
				t.Fatalf("a deactivated person's stream delivered: %s", line)
			}
			if strings.HasPrefix(line, "event: gone") {
				break
			}
		}
		before := state(t)
		if status, _ := mo.upload("/app/rooms/"+room+"/tasks/"+task+"/attachments", csrf, "x.txt", []byte("x")); status != http.StatusNotFound {
			t.Errorf("upload: %d", status)
		}
		for _, r := range roomForms {
			v := url.Values{"csrf": {csrf}}
			for i := 0; i+1 < len(r.form); i += 2 {
				v.Add(r.form[i], r.form[i+1])
			}
			if status, body := mo.postForm(r.path, v); status != http.StatusNotFound {
				t.Errorf("POST %s: %d %.200s", r.path, status, body)
			}
		}
		if status, _ := mo.get("/app/projects/" + room + "/events"); status != http.StatusNotFound {
			t.Errorf("the project's stream: %d", status)
		}
		unchanged(t, before, "a deactivated person's forms changed the database")
	})

	t.Run("a person removed from their organisation acts in nothing with the session they had", func(t *testing.T) {
		csrf := ivy.csrf()
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM org_member WHERE user_id = $1`, userID("ivy@initech.test"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		before := state(t)
		for path, want := range map[string]int{"/app/rooms/" + tps: http.StatusNotFound, "/app/projects/" + tps + "/threads": http.StatusNotFound,
			"/app/admin": http.StatusForbidden, "/app/admin/agents/" + peter: http.StatusForbidden, "/app/desk": http.StatusForbidden} {
			if status, body := ivy.get(path); status != want {
				t.Errorf("GET %s: %d %.200s", path, status, body)
			}
		}
		for path, want := range map[string]int{"/app/rooms/" + tps + "/messages": http.StatusNotFound, "/app/admin/agents": http.StatusForbidden,
			"/app/admin/agents/" + peter + "/rotate": http.StatusForbidden, "/app/admin/people": http.StatusForbidden} {
			v := url.Values{"csrf": {csrf}, "content": {"x"}, "slug": {"ghost"}, "name": {"Ghost"}, "email": {"ghost@initech.test"}, "role": {"owner"}}
			if status, body := ivy.postForm(path, v); status != want {
				t.Errorf("POST %s: %d %.200s", path, status, body)
			}
		}
		unchanged(t, before, "a removed person's forms changed the database")
	})
}

// twoGuestsFile: Acme hosts Escalations with two guest companies, Globex and Initech,
// each with a part of its own.
const twoGuestsFile = signInCast + `agents:
  - {org: acme, slug: architect, name: Architect, model: claude-opus-4, kind: always_on}
  - {org: globex, slug: qa-lead, name: QA Lead, model: gpt-5, kind: always_on}
  - {org: initech, slug: peter, name: Peter, model: gpt-5, kind: always_on}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, access: manager}
      - {agent: globex/qa-lead, part: qa-lead, access: write}
      - {agent: initech/peter, part: peter, access: write}
    guests:
      - {org: globex, status: active, grants: [read_memory, write_memory, assign_tasks]}
      - {org: initech, status: active, grants: [read_memory, write_memory, assign_tasks]}
`

// TestDashboardAuthzGuests: one guest company's people reach nothing of another guest's
// in the same room (its threads, tasks, memory, wakes, agreement, history), by page or
// form, and the host's private things stay the host's.
func TestDashboardAuthzGuests(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: twoGuestsFile})
	d := openSeeded(t, s)
	room := s.res.Projects["escalations"].ID.String()
	roomURL := s.base + "/api/mcp/p/" + room
	globex := s.res.Organisations["globex"].ID.String()
	architect, qa := s.key("acme/architect"), s.key("globex/qa-lead")
	idRe := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`)
	gus, ivy := signIn(t, s.base, "gus@globex.test", "demo-password-gus"), signIn(t, s.base, "ivy@initech.test", "demo-password-ivy")

	// Globex's things: a thread with the host, tasks both ways, memory public and private.
	thread := threadIDField.FindStringSubmatch(served(t, s.threadsURL("escalations", "architect"), architect, "send",
		map[string]any{"to": []string{"qa-lead"}, "subject": "Globex-only subject", "body": "Globex-only body"}))[1]
	sent := idRe.FindString(served(t, roomURL, qa, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "Globex-sent goal"}))
	served(t, roomURL, architect, "respond_to_task", map[string]any{"task_id": sent, "status": "done", "result": "Globex result"})
	received := idRe.FindString(served(t, roomURL, architect, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "Globex-received goal"}))
	public := idRe.FindString(served(t, roomURL, qa, "write_memory", map[string]any{"content": "Globex public note"}))
	private := idRe.FindString(served(t, roomURL, qa, "write_memory", map[string]any{"content": "Globex private note", "is_private": true}))
	hostPrivate := idRe.FindString(served(t, roomURL, architect, "write_memory", map[string]any{"content": "Acme private note", "is_private": true}))
	// Globex's part's wake, dead.
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO wake (project_id, id, member_id, agent_id, part, status, count, other_count, created_at, updated_at)
			SELECT m.project_id, gen_random_uuid(), m.id, m.agent_id, m.part, 'dead', 1, 1, now(), now() FROM membership m
			WHERE m.project_id = $1 AND m.part = 'qa-lead'`, room)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wake := testfix.Scalar[string](t, d, `SELECT id::text FROM wake WHERE part = 'qa-lead' LIMIT 1`)
	// Globex's person acts, so that the room's history has Globex's rows.
	gus.wantPost(t, http.StatusSeeOther, "Globex deprecates its own entry", "/app/rooms/"+room+"/memory/"+public+"/deprecate", gus.form())
	public2 := idRe.FindString(served(t, roomURL, qa, "write_memory", map[string]any{"content": "Globex second public note"}))

	state := func(t *testing.T) string { t.Helper(); return testfix.Scalar[string](t, d, authzState()) }
	unchanged := func(t *testing.T, before, what string) { t.Helper(); wantUnchanged(t, before, state(t), what) }

	t.Run("another guest's person gets 404 for every id of a guest's, page or form, and nothing changes", func(t *testing.T) {
		before := state(t)
		for _, path := range []string{"/app/projects/" + room + "/threads/" + thread, "/app/projects/" + room + "/wakes/" + wake,
			"/app/admin/agreements/" + room + "/" + globex} {
			if status, body := ivy.get(path); status != http.StatusNotFound {
				t.Errorf("GET %s: %d %.200s", path, status, body)
			}
		}
		for _, p := range []string{"/app/projects/" + room + "/threads/" + thread + "/cancel", "/app/projects/" + room + "/wakes/" + wake + "/retry",
			"/app/rooms/" + room + "/tasks/" + sent + "/review", "/app/rooms/" + room + "/tasks/" + sent + "/cancel",
			"/app/rooms/" + room + "/tasks/" + received + "/cancel", "/app/rooms/" + room + "/memory/" + public2 + "/deprecate",
			"/app/rooms/" + room + "/memory/" + private + "/deprecate", "/app/rooms/" + room + "/memory/" + hostPrivate + "/deprecate",
			"/app/admin/agreements/" + room + "/" + globex + "/revoke", "/app/admin/agreements/" + room + "/" + globex + "/accept",
			"/app/admin/agreements/" + room + "/" + globex + "/grants"} {
			v := ivy.form("verdict", "accepted", "grants", "read_memory")
			if status, body := ivy.postForm(p, v); status != http.StatusNotFound {
				t.Errorf("POST %s: %d %.200s", p, status, body)
			}
		}
		if status, _ := ivy.upload("/app/rooms/"+room+"/tasks/"+sent+"/attachments", ivy.csrf(), "x.txt", []byte("x")); status != http.StatusNotFound {
			t.Errorf("upload to another guest's task: %d", status)
		}
		unchanged(t, before, "another guest's refused forms changed the database")
	})

	t.Run("another guest's pages show nothing of a guest's or the host's private things", func(t *testing.T) {
		for _, path := range []string{"/app/", "/app/rooms/" + room + "/memory", "/app/rooms/" + room + "/memory?q=note",
			"/app/rooms/" + room + "/memory?org_id=" + globex, "/app/rooms/" + room + "/tasks", "/app/rooms/" + room + "/knowledge",
			"/app/projects/" + room + "/threads", "/app/projects/" + room + "/threads?part=qa-lead", "/app/projects/" + room + "/activity",
			"/app/projects/" + room + "/usage", "/app/projects/" + room + "/usage.csv", "/app/admin", "/app/admin/agreements"} {
			status, body := ivy.get(path)
			if status != http.StatusOK {
				t.Errorf("GET %s: %d %.200s", path, status, body)
				continue
			}
			for _, secret := range []string{"Globex-only", "Globex-sent", "Globex-received", "Globex result", "Globex private", "Acme private",
				thread, wake, sent, received, private, hostPrivate} {
				if strings.Contains(body, secret) {
					t.Errorf("GET %s shows %q", path, secret)
				}
			}
		}
	})
}
