package app_test

import (
	"context"
	"html/template"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

var (
	agentKeyRe    = regexp.MustCompile(`sk-qyt-[0-9A-Za-z]{46}`)
	connectCodeRe = regexp.MustCompile(`qyt_cc_[0-9A-Za-z]{46}`)
	inviteLinkRe  = regexp.MustCompile(`/app/invite/(qyt_iv_[0-9A-Za-z]{46})`)
	adminAgentRe  = regexp.MustCompile(`/app/admin/agents/([0-9a-f-]{36})`)
)

// TestDashboardCompanyAdmin drives the company admin pages (/app/admin/…) as Acme's owner
// Ana, its member Mo, Globex's admin Gus (Acme's guest) and Initech's owner Ivy
// (unrelated until Ana invites Initech), on a real server and database.
func TestDashboardCompanyAdmin(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: dashboardFile, tune: func(c *config.Config) {
		c.SecretKey = strings.Repeat("ab", 32) // webhook secrets are sealed under it
	}})
	ctx := context.Background()
	d := openSeeded(t, s)
	count := func(t *testing.T, sql string, args ...any) int {
		t.Helper()
		return testfix.Scalar[int](t, d, sql, args...)
	}
	room := s.res.Projects["escalations"].ID.String()
	globex, initech := s.res.Organisations["globex"].ID.String(), s.res.Organisations["initech"].ID.String()
	architect := s.res.Agents["acme/architect"].ID.String()
	qaLead := s.res.Agents["globex/qa-lead"].ID.String()
	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	mo := signIn(t, s.base, "mo@acme.test", "demo-password-mo")
	gus := signIn(t, s.base, "gus@globex.test", "demo-password-gus")
	ivy := signIn(t, s.base, "ivy@initech.test", "demo-password-ivy")
	form := func(p *person, kv ...string) url.Values {
		v := url.Values{"csrf": {p.csrf()}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	userID := func(email string) string {
		return testfix.Scalar[string](t, d, `SELECT id::text FROM app_user WHERE email = $1`, email)
	}
	must := func(t *testing.T, status, want int, body string) {
		t.Helper()
		if status != want {
			t.Fatalf("status %d, want %d: %s", status, want, body)
		}
	}

	t.Run("a member gets 403 on every admin page and form, and nothing is stored", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/app/admin", "/app/admin/agents", "/app/admin/agents/" + architect, "/app/admin/projects/" + room, "/app/admin/people", "/app/admin/clients"} {
			status, body := mo.get(path)
			if status != http.StatusForbidden || !strings.Contains(body, "owners and admins") {
				t.Errorf("GET %s: %d", path, status)
			}
		}
		// The architect's keys only: the other subtests run at the same time and add and
		// revoke keys of agents of their own.
		keys := `SELECT count(*) FROM agent_key WHERE agent_id = $1 AND revoked_at IS NULL`
		before := count(t, keys, architect)
		status, _ := mo.postForm("/app/admin/agents", form(mo, "slug", "mo-bot", "name", "Mo Bot"))
		must(t, status, http.StatusForbidden, "")
		status, _ = mo.postForm("/app/admin/agents/"+architect+"/rotate", form(mo))
		must(t, status, http.StatusForbidden, "")
		if count(t, `SELECT count(*) FROM agent WHERE slug = 'mo-bot'`) != 0 || count(t, keys, architect) != before {
			t.Fatal("a member's post changed something")
		}
	})

	t.Run("another organisation's objects answer 404, like ids that do not exist", func(t *testing.T) {
		t.Parallel()
		// Gus (the guest's admin) cannot see the host's agents or project admin.
		for _, path := range []string{"/app/admin/agents/" + architect, "/app/admin/projects/" + room, "/app/admin/agents/00000000-0000-7000-8000-000000000000"} {
			status, _ := gus.get(path)
			if status != http.StatusNotFound {
				t.Errorf("guest admin GET %s: %d, want 404", path, status)
			}
		}
		_, list := gus.get("/app/admin/agents")
		if strings.Contains(list, "Architect") || !strings.Contains(list, "QA Lead") {
			t.Errorf("the guest's agents page lists the host's agent or not its own: %s", list)
		}
		for _, path := range []string{"/app/admin/agents/" + architect + "/rotate", "/app/admin/agents/" + architect + "/revoke", "/app/admin/projects/" + room + "/code"} {
			status, _ := gus.postForm(path, form(gus))
			if status != http.StatusNotFound {
				t.Errorf("guest admin POST %s: %d, want 404", path, status)
			}
		}
		// Ana cannot touch Globex's agent, nor read an agreement Initech is not part of as Ivy.
		status, _ := ana.get("/app/admin/agents/" + qaLead)
		must(t, status, http.StatusNotFound, "")
		status, _ = ivy.get("/app/admin/agreements/" + room + "/" + globex)
		must(t, status, http.StatusNotFound, "")
		if n := count(t, `SELECT count(*) FROM agent_key WHERE agent_id = $1 AND revoked_at IS NOT NULL`, s.res.Agents["acme/architect"].ID); n != 0 {
			t.Fatalf("the host's keys were revoked by a guest (%d)", n)
		}
	})

	t.Run("a new agent's key is shown once, works, and the change is on the agent's page", func(t *testing.T) {
		t.Parallel()
		status, body := ana.postForm("/app/admin/agents", form(ana, "slug", "support-bot", "name", "Support Bot", "model", "gpt-5", "kind", "session"))
		must(t, status, http.StatusCreated, body)
		key := agentKeyRe.FindString(body)
		if key == "" || !strings.Contains(body, "shown on this page only") {
			t.Fatalf("no key shown once: %s", body)
		}
		id := adminAgentRe.FindStringSubmatch(body)
		if id == nil {
			t.Fatalf("no link to the agent: %s", body)
		}
		if a := callTool(t, s.base+"/api/mcp", key, "list_rooms", nil); a.status != http.StatusOK || a.isErr {
			t.Fatalf("the new key does not work: %d %s", a.status, a.body)
		}
		status, page := ana.get("/app/admin/agents/" + id[1])
		must(t, status, http.StatusOK, page)
		if strings.Contains(page, key) || agentKeyRe.MatchString(page) {
			t.Fatal("the key is shown again")
		}
		if !strings.Contains(page, "<td>created</td>") || !strings.Contains(page, "Ana [Acme Corp]") || !strings.Contains(page, "slug: support-bot") {
			t.Fatalf("the creation is not in the agent's history: %s", page)
		}

		t.Run("rotating shows a new key once and the old one stops working", func(t *testing.T) {
			status, body := ana.postForm("/app/admin/agents/"+id[1]+"/rotate", form(ana))
			must(t, status, http.StatusOK, body)
			fresh := agentKeyRe.FindString(body)
			if fresh == "" || fresh == key {
				t.Fatalf("no new key: %s", body)
			}
			if a := callTool(t, s.base+"/api/mcp", key, "list_rooms", nil); a.status != http.StatusUnauthorized {
				t.Fatalf("the old key still works: %d", a.status)
			}
			if a := callTool(t, s.base+"/api/mcp", fresh, "list_rooms", nil); a.status != http.StatusOK {
				t.Fatalf("the new key does not work: %d", a.status)
			}
			status, body = ana.postForm("/app/admin/agents/"+id[1]+"/revoke", form(ana))
			must(t, status, http.StatusSeeOther, body)
			if a := callTool(t, s.base+"/api/mcp", fresh, "list_rooms", nil); a.status != http.StatusUnauthorized {
				t.Fatalf("a revoked key still works: %d", a.status)
			}
			_, page := ana.get("/app/admin/agents/" + id[1])
			if !strings.Contains(page, "<td>key_rotated</td>") || !strings.Contains(page, "<td>keys_revoked</td>") {
				t.Fatalf("rotation and revocation not in the history: %s", page)
			}
		})
	})

	t.Run("bad input is refused beside its field and nothing is half-saved or audited", func(t *testing.T) {
		t.Parallel()
		status, body := ana.postForm("/app/admin/agents", form(ana, "slug", "Not A Slug", "name", "X"))
		must(t, status, http.StatusBadRequest, body)
		if !strings.Contains(body, `class="field-error"`) || !strings.Contains(body, "lowercase letters") || !strings.Contains(body, `value="Not A Slug"`) {
			t.Fatalf("no message beside the slug: %s", body)
		}
		status, body = ana.postForm("/app/admin/agents", form(ana, "slug", "architect", "name", "Another Architect"))
		must(t, status, http.StatusBadRequest, body)
		if !strings.Contains(body, "exists already") {
			t.Fatalf("a taken slug is not named: %s", body)
		}
		if n := count(t, `SELECT count(*) FROM agent WHERE name = 'Another Architect' OR slug = 'Not A Slug'`); n != 0 {
			t.Fatal("a refused agent was stored")
		}
		status, body = ana.postForm("/app/admin/projects/"+room+"/members", form(ana, "agent", architect, "part", "x"))
		must(t, status, http.StatusBadRequest, body)
		if !strings.Contains(body, "already a member") {
			t.Fatalf("a second membership is not refused: %s", body)
		}
		// The other subtests write audit rows meanwhile: count the refused changes' own.
		if count(t, `SELECT count(*) FROM audit_event WHERE detail->>'name' = 'Another Architect' OR detail->>'slug' = 'Not A Slug' OR detail->>'part' = 'x'`) != 0 {
			t.Fatal("a refused change left an audit row")
		}
	})

	t.Run("the overview is the admin overview", func(t *testing.T) {
		t.Parallel()
		// Its page name was "home", the home page's template's: owners saw "No rooms yet".
		status, body := ana.get("/app/admin")
		if status != http.StatusOK || !strings.Contains(body, "Projects you host") || !strings.Contains(body, `aria-current="page">Overview`) {
			t.Fatalf("%d %.600s", status, body)
		}
	})

	t.Run("an open invitation is withdrawn: its link stops working, and the change is audited", func(t *testing.T) {
		t.Parallel()
		status, body := ana.postForm("/app/admin/people", form(ana, "email", "wrong-address@acme.test", "role", "owner"))
		must(t, status, http.StatusCreated, body)
		link := inviteLinkRe.FindStringSubmatch(body)
		id := ""
		if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT id::text FROM org_invitation WHERE email = 'wrong-address@acme.test'`).Scan(&id)
		}); err != nil || link == nil {
			t.Fatalf("%v %v", link, err)
		}
		// Another organisation's admin cannot.
		status, body = gus.postForm("/app/admin/invitations/"+id+"/withdraw", form(gus))
		must(t, status, http.StatusNotFound, body)
		status, body = ana.postForm("/app/admin/invitations/"+id+"/withdraw", form(ana))
		must(t, status, http.StatusSeeOther, body)
		status, _ = (&person{t: t, base: s.base, c: newJarClient(t)}).get("/app/invite/" + link[1])
		must(t, status, http.StatusNotFound, "")
		if n := count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1 AND action = 'withdrawn'`, id); n != 1 {
			t.Fatalf("%d audit rows", n)
		}
		status, body = ana.postForm("/app/admin/invitations/"+id+"/withdraw", form(ana))
		must(t, status, http.StatusNotFound, body)
		// The People page says who sent it and that it was withdrawn, not that it expired.
		_, page := ana.get("/app/admin/people")
		row := page[strings.Index(page, "<td>wrong-address@acme.test</td>"):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, "<td>Ana <span") || !strings.Contains(row, "withdrawn ") || strings.Contains(row, "expired") {
			t.Fatalf("the invitation's row: %s", row)
		}
	})

	t.Run("inviting the host itself as a guest says why beside the field", func(t *testing.T) {
		t.Parallel()
		// The page said "correct the fields marked below" and marked none.
		status, body := ana.postForm("/app/admin/projects/"+room+"/guests", form(ana, "guest", "acme", "grants", "read_memory"))
		if status != http.StatusBadRequest || !strings.Contains(body, `class="field-error"`) || !strings.Contains(body, "invite another company") {
			t.Fatalf("%d %.400s", status, body)
		}
	})

	t.Run("input past a column's bound is refused beside its field, not a 503", func(t *testing.T) {
		t.Parallel()
		// Each reached the database (or the audit trail's detail bound) and answered
		// "This page is unavailable right now", with nothing beside the field.
		for _, c := range []struct {
			path  string
			form  url.Values
			field string
		}{
			{"/app/admin/people", form(ana, "email", strings.Repeat("a", 330)+"@acme.test", "role", "member"), "email"},
			{"/app/admin/agents", form(ana, "slug", "long-model", "name", "Long", "model", strings.Repeat("m", 5000)), "model"},
			{"/app/admin/agents/" + architect + "/webhook", form(ana, "url", "https://hooks.acme.test/"+strings.Repeat("x", 5000)), "url"},
		} {
			status, body := ana.postForm(c.path, c.form)
			if status != http.StatusBadRequest || !strings.Contains(body, `class="field-error"`) {
				t.Fatalf("%s: %d %.300s", c.path, status, body)
			}
		}
		if count(t, `SELECT count(*) FROM agent WHERE slug = 'long-model'`) != 0 {
			t.Fatal("the agent with the long model was stored")
		}
	})

	t.Run("without the form's CSRF token nothing changes", func(t *testing.T) {
		t.Parallel()
		status, _ := ana.postForm("/app/admin/agents", url.Values{"slug": {"csrf-less"}, "name": {"No"}})
		must(t, status, http.StatusForbidden, "")
		status, _ = ana.postForm("/app/admin/agents", url.Values{"csrf": {gus.csrf()}, "slug": {"csrf-less"}, "name": {"No"}})
		must(t, status, http.StatusForbidden, "")
		if count(t, `SELECT count(*) FROM agent WHERE slug = 'csrf-less'`) != 0 {
			t.Fatal("a post without the session's token was stored")
		}
	})

	t.Run("the wake webhook's secret is shown once; a bad URL is refused beside the field", func(t *testing.T) {
		t.Parallel()
		status, body := ana.postForm("/app/admin/agents/"+architect+"/webhook", form(ana, "url", "http://example.com/hook"))
		must(t, status, http.StatusBadRequest, body)
		if !strings.Contains(body, `class="field-error"`) || !strings.Contains(body, "https") {
			t.Fatalf("no message beside the URL: %s", body)
		}
		if count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1 AND action LIKE 'webhook%'`, architect) != 0 {
			t.Fatal("a refused webhook was audited")
		}
		status, body = ana.postForm("/app/admin/agents/"+architect+"/webhook", form(ana, "url", "https://hooks.acme.test/wake"))
		must(t, status, http.StatusOK, body)
		i := strings.Index(body, `<output class="credential">`)
		if i < 0 {
			t.Fatalf("no secret shown: %s", body)
		}
		secret := body[i+len(`<output class="credential">`):]
		secret = secret[:strings.Index(secret, "<")]
		_, page := ana.get("/app/admin/agents/" + architect)
		if strings.Contains(page, secret) || !strings.Contains(page, "https://hooks.acme.test/wake") || !strings.Contains(page, "<td>webhook_set</td>") {
			t.Fatalf("the secret is shown again, or the webhook or its audit row missing: %s", page)
		}
		// A URL's user information and query (where a token often is) stay out of the
		// audit trail, which is never rewritten.
		status, body = ana.postForm("/app/admin/agents/"+architect+"/webhook", form(ana, "url", "https://user:hunter2@hooks.acme.test/wake?token=supersecret"))
		must(t, status, http.StatusOK, body)
		if n := count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1 AND (detail::text LIKE '%supersecret%' OR detail::text LIKE '%hunter2%')`, architect); n != 0 {
			t.Fatal("the webhook URL's credentials are in the audit trail")
		}
		status, _ = ana.postForm("/app/admin/agents/"+architect+"/unhook", form(ana))
		must(t, status, http.StatusSeeOther, "")
		if _, page = ana.get("/app/admin/agents/" + architect); !strings.Contains(page, "<td>webhook_cleared</td>") {
			t.Fatalf("the removal is not in the history: %s", page)
		}
	})

	t.Run("project: connect code shown once, capabilities saved and audited", func(t *testing.T) {
		t.Parallel()
		old := s.res.Projects["escalations"].ConnectCode
		status, body := ana.postForm("/app/admin/projects/"+room+"/code", form(ana))
		must(t, status, http.StatusOK, body)
		code := connectCodeRe.FindString(body)
		if code == "" || code == old || !strings.Contains(body, "/mcp/"+code+"?part=architect") {
			t.Fatalf("no new code with the parts' URLs: %s", body)
		}
		status, body = ana.postForm("/app/admin/projects/"+room+"/members/qa-lead", form(ana, "access", "read", "capabilities", "needsHuman"))
		must(t, status, http.StatusSeeOther, body)
		if count(t, `SELECT count(*) FROM membership WHERE part = 'qa-lead' AND access = 'read' AND capabilities = '{needsHuman}'`) != 1 {
			t.Fatal("the access was not saved")
		}
		status, body = ana.postForm("/app/admin/projects/"+room+"/members/qa-lead", form(ana, "access", "root"))
		must(t, status, http.StatusBadRequest, body)
		_, page := ana.get("/app/admin/projects/" + room)
		if connectCodeRe.MatchString(page) || !strings.Contains(page, "<td>connect_code_rotated</td>") || !strings.Contains(page, "<td>member_changed</td>") {
			t.Fatalf("the code is shown again or the changes are not in the history: %s", page)
		}
	})

	t.Run("agreements: the host invites, only the guest accepts, the host edits grants, either side revokes", func(t *testing.T) {
		t.Parallel()
		page := "/app/admin/agreements/" + room + "/" + initech
		status, body := ana.postForm("/app/admin/projects/"+room+"/guests", form(ana, "guest", "initech", "grants", "read_memory"))
		must(t, status, http.StatusSeeOther, body)
		status, body = ana.postForm("/app/admin/projects/"+room+"/guests", form(ana, "guest", "initech"))
		must(t, status, http.StatusBadRequest, body)
		status, body = ana.postForm("/app/admin/projects/"+room+"/guests", form(ana, "guest", "nobody-here"))
		must(t, status, http.StatusBadRequest, body)
		// The home page's pending agreement leads to the page where Ivy accepts.
		_, home := ivy.get("/app/")
		if !strings.Contains(home, `href="`+page+`?org=`) {
			t.Fatalf("the guest's home does not link to its agreement: %s", home)
		}
		status, body = ana.postForm(page+"/accept", form(ana))
		must(t, status, http.StatusForbidden, body)
		if !strings.Contains(body, template.HTMLEscapeString(admin.MsgGuestAccepts)) {
			t.Fatalf("the host's acceptance is not refused with its reason: %s", body)
		}
		status, _ = gus.postForm(page+"/accept", form(gus))
		must(t, status, http.StatusNotFound, "")
		if count(t, `SELECT count(*) FROM agreement WHERE guest_org_id = $1 AND status = 'pending'`, s.res.Organisations["initech"].ID) != 1 {
			t.Fatal("the agreement was accepted by someone else than its guest")
		}
		if count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1 AND action = 'accepted'`, room+"/"+initech) != 0 {
			t.Fatal("a refused acceptance was audited")
		}
		status, body = ivy.postForm(page+"/accept", form(ivy))
		must(t, status, http.StatusSeeOther, body)
		status, body = ivy.postForm(page+"/grants", form(ivy, "grants", "write_memory"))
		must(t, status, http.StatusForbidden, body)
		status, body = ana.postForm(page+"/grants", form(ana, "grants", "read_memory", "grants", "assign_tasks"))
		must(t, status, http.StatusSeeOther, body)
		if count(t, `SELECT count(*) FROM agreement WHERE guest_org_id = $1 AND status = 'active' AND grants = '{read_memory,assign_tasks}'`, s.res.Organisations["initech"].ID) != 1 {
			t.Fatal("accept or grants not saved")
		}
		// Both sides read the agreement's whole history.
		for _, p := range []*person{ana, ivy} {
			_, body := p.get(page)
			for _, want := range []string{"<td>invited</td>", "<td>accepted</td>", "Ivy [Initech]", "<td>grants_changed</td>", "Ana [Acme Corp]"} {
				if !strings.Contains(body, want) {
					t.Errorf("the agreement's history lacks %q: %s", want, body)
				}
			}
		}
		status, body = ivy.postForm(page+"/revoke", form(ivy))
		must(t, status, http.StatusSeeOther, body)
		status, body = ana.postForm(page+"/revoke", form(ana))
		must(t, status, http.StatusConflict, body)
		if count(t, `SELECT count(*) FROM agreement WHERE guest_org_id = $1 AND status = 'revoked'`, s.res.Organisations["initech"].ID) != 1 {
			t.Fatal("the guest could not revoke")
		}
		t.Run("a revoked agreement is invited again, pending until the guest accepts", func(t *testing.T) {
			status, body := ana.postForm("/app/admin/projects/"+room+"/guests", form(ana, "guest", "initech", "grants", "read_memory"))
			must(t, status, http.StatusSeeOther, body)
			if count(t, `SELECT count(*) FROM agreement WHERE guest_org_id = $1 AND status = 'pending' AND grants = '{read_memory}'`, s.res.Organisations["initech"].ID) != 1 {
				t.Fatal("the revoked agreement is not pending again with the new grants")
			}
			status, body = ana.postForm("/app/admin/projects/"+room+"/guests", form(ana, "guest", "initech"))
			must(t, status, http.StatusBadRequest, body) // pending now: its grants or state are changed instead
			status, body = ivy.postForm(page+"/accept", form(ivy))
			must(t, status, http.StatusSeeOther, body)
			if count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1 AND action = 'invited' AND detail->>'from' = 'revoked'`, room+"/"+initech) != 1 {
				t.Fatal("the new invitation's event does not say it follows a revocation")
			}
		})
	})

	t.Run("a notice comes from the page's own list: a link cannot make a page say something else", func(t *testing.T) {
		t.Parallel()
		crafted := "?notice=" + url.QueryEscape("Security check: confirm your password at https://evil.example")
		for _, page := range []string{"/app/admin/people", "/app/admin/agents", "/app/desk/replies"} {
			status, body := ana.get(page + crafted)
			must(t, status, http.StatusOK, body)
			if strings.Contains(body, "evil.example") {
				t.Fatalf("%s shows the address's text as a notice", page)
			}
		}
		if _, body := ana.get("/app/admin/people?notice=role-saved"); !strings.Contains(body, "The role is saved.") {
			t.Fatal("a known notice's key does not show its text")
		}
	})

	t.Run("people: roles by owners, the last owner stays, an invitation link works once", func(t *testing.T) {
		t.Parallel()
		mo, anaID := userID("mo@acme.test"), userID("ana@acme.test")
		status, body := ana.postForm("/app/admin/people/"+anaID+"/role", form(ana, "role", "member"))
		must(t, status, http.StatusBadRequest, body)
		if !strings.Contains(body, template.HTMLEscapeString(admin.MsgLastOwner)) {
			t.Fatalf("the last owner's demotion is not refused beside the role: %s", body)
		}
		status, _ = gus.get("/app/admin/people/" + mo)
		must(t, status, http.StatusNotFound, "")
		invite := func(email string) (int, string) {
			return ana.postForm("/app/admin/people", form(ana, "email", email, "role", "admin"))
		}
		status, body = invite("not an email")
		must(t, status, http.StatusBadRequest, body)
		status, body = invite("mo@acme.test")
		must(t, status, http.StatusBadRequest, body)
		status, body = invite("Zoe@Acme.test")
		must(t, status, http.StatusCreated, body)
		link := inviteLinkRe.FindStringSubmatch(body)
		if link == nil {
			t.Fatalf("no link shown: %s", body)
		}
		if _, people := ana.get("/app/admin/people"); strings.Contains(people, link[1]) {
			t.Fatal("the link is shown again")
		}
		// An expired link reads as expired, not "open until" a time gone by.
		status, body = ana.postForm("/app/admin/people", form(ana, "email", "late@acme.test", "role", "member"))
		must(t, status, http.StatusCreated, body)
		count(t, `UPDATE org_invitation SET expires_at = now() - interval '2 days' WHERE email = 'late@acme.test' RETURNING 1`)
		if _, people := ana.get("/app/admin/people"); !regexp.MustCompile(`<td>late@acme.test</td><td>member</td><td>Ana <span class="meta">[^<]*</span></td><td>expired `).MatchString(people) {
			t.Fatalf("the expired invitation: %s", people)
		}
		// Zoe opens it signed out, chooses a name and password, and signs in.
		zoe := &person{t: t, base: s.base, c: newJarClient(t)}
		status, page := zoe.get("/app/invite/" + link[1])
		must(t, status, http.StatusOK, page)
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no form token: %s", page)
		}
		status, body = zoe.postForm("/app/invite/"+link[1], url.Values{"name": {"Zoe"}, "password": {"secret!!"}})
		must(t, status, http.StatusForbidden, body)
		status, body = zoe.postForm("/app/invite/"+link[1], url.Values{"csrf": {m[1]}, "name": {"Zoe"}, "password": {"short"}})
		must(t, status, http.StatusBadRequest, body)
		// Past what a password may be hashed from: beside the field, not a 503.
		m = csrfField.FindStringSubmatch(body)
		status, body = zoe.postForm("/app/invite/"+link[1], url.Values{"csrf": {m[1]}, "name": {"Zoe"}, "password": {strings.Repeat("p", 1100)}})
		must(t, status, http.StatusBadRequest, body)
		if count(t, `SELECT count(*) FROM app_user WHERE email = 'zoe@acme.test'`) != 0 {
			t.Fatal("a refused acceptance created the account")
		}
		m = csrfField.FindStringSubmatch(body)
		status, body = zoe.postForm("/app/invite/"+link[1], url.Values{"csrf": {m[1]}, "name": {"Zoe"}, "password": {"zoe-password-1"}})
		must(t, status, http.StatusSeeOther, body)
		status, _ = zoe.get("/app/invite/" + link[1])
		must(t, status, http.StatusNotFound, "")
		z := signIn(t, s.base, "zoe@acme.test", "zoe-password-1")
		if status, _ := z.get("/app/admin/agents"); status != http.StatusOK {
			t.Fatalf("the invited admin cannot use the admin pages: %d", status)
		}
		zoeID := userID("zoe@acme.test")
		// An admin may not make an owner; the owner changes roles. (Mo's role stays: the
		// member subtest runs meanwhile.)
		status, body = z.postForm("/app/admin/people/"+mo+"/role", form(z, "role", "owner"))
		must(t, status, http.StatusForbidden, body)
		status, body = ana.postForm("/app/admin/people/"+zoeID+"/role", form(ana, "role", "member"))
		must(t, status, http.StatusSeeOther, body)
		_, page = ana.get("/app/admin/people/" + zoeID)
		for _, want := range []string{"<td>role_changed</td>", "from: admin", "<td>joined</td>", "Zoe [Acme Corp]"} {
			if !strings.Contains(page, want) {
				t.Fatalf("the person's history lacks %q: %s", want, page)
			}
		}
		if status, _ := z.get("/app/admin/agents"); status != http.StatusForbidden {
			t.Fatalf("a member again, Zoe still uses the admin pages: %d", status)
		}
	})

	t.Run("desk reports: owners and admins, through the desk's own checks", func(t *testing.T) {
		t.Parallel()
		status, _ := mo.get("/app/desk/reports")
		must(t, status, http.StatusForbidden, "")
		// Acme is on the trial plan in this file: the desk's refusal is shown, no chart.
		status, body := ana.get("/app/desk/reports?days=7")
		must(t, status, http.StatusOK, body)
		if !strings.Contains(body, "plan does not include") || strings.Contains(body, `class="chart"`) {
			t.Fatalf("the plan's refusal is not shown: %s", body)
		}
	})

	t.Run("connected apps: disconnecting ends the organisation's consents only", func(t *testing.T) {
		t.Parallel()
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO oauth_client (client_id, client_name, redirect_uris, source) VALUES ('rrc_test', 'Test App', '{http://127.0.0.1/cb}', 'registration')`)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, code_id, code_hash, code_challenge, redirect_uri, code_expires_at)
				SELECT om.org_id, gen_random_uuid(), 'rrc_test', om.user_id, 'http://x/api/mcp', substr(md5(random()::text), 1, 8), '\x00', 'c', 'http://127.0.0.1/cb', now()
				FROM org_member om JOIN app_user u ON u.id = om.user_id WHERE u.email IN ('ana@acme.test', 'gus@globex.test')`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_, page := ana.get("/app/admin/clients")
		if !strings.Contains(page, "Test App") {
			t.Fatalf("the connected app is not listed: %s", page)
		}
		status, _ := ana.postForm("/app/admin/clients/disconnect", form(ana, "client", "rrc_test"))
		must(t, status, http.StatusSeeOther, "")
		status, _ = ana.postForm("/app/admin/clients/disconnect", form(ana, "client", "rrc_test"))
		must(t, status, http.StatusNotFound, "")
		if count(t, `SELECT count(*) FROM oauth_grant WHERE client_id = 'rrc_test' AND revoked_at IS NULL AND org_id = $1`, s.res.Organisations["globex"].ID) != 1 ||
			count(t, `SELECT count(*) FROM oauth_grant WHERE client_id = 'rrc_test' AND revoked_at IS NULL AND org_id = $1`, s.res.Organisations["acme"].ID) != 0 {
			t.Fatal("disconnecting did not end exactly the organisation's consents")
		}
		if _, page = ana.get("/app/admin/clients?client=rrc_test"); !strings.Contains(page, "<td>disconnected</td>") {
			t.Fatalf("the disconnection is not in the app's history: %s", page)
		}
	})
}

// newJarClient is a cookie-keeping client that does not follow redirects (a signed-out
// browser).
func newJarClient(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestInviteCookieSecureBehindProxy: behind a proxy that ends TLS, requests arrive in
// plain HTTP while people browse https; the invitation form's cookie is still Secure,
// like the site's other cookies (it followed the request's own TLS before).
func TestInviteCookieSecureBehindProxy(t *testing.T) {
	t.Parallel()
	if testReplicas(t) > 1 {
		t.Skip("the test is its own proxy's view of one server: it names that server's address")
	}
	// The server's own address, named by an https public URL as a proxy in front would be.
	addr := testfix.FreeLoopback(t)
	public := "https://" + addr
	var path string
	s := startServerOpts(t, serverOptions{
		file: dashboardFile,
		before: func(ctx context.Context, d *pg.DB, res admin.Result) {
			out, err := admin.New(d, public).Invite(ctx, admin.OrgActor{OrgID: res.Organisations["acme"].ID, Name: "test", Role: "owner"}, "zed@acme.test", "member")
			if err != nil {
				t.Fatalf("invite: %v", err)
			}
			path = strings.TrimPrefix(out.URL, public)
		},
		tune: func(c *config.Config) { c.Addr, c.PublicURL = addr, public },
	})
	if s.base != public {
		t.Fatalf("the server printed %s, want %s", s.base, public)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the invitation page: %d", res.StatusCode)
	}
	var found bool
	for _, c := range res.Cookies() {
		if c.Path == admin.RouteInvite {
			found = true
			if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Fatalf("the form's cookie is not Secure, HttpOnly and SameSite=Strict: %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("no form cookie set: %v", res.Header["Set-Cookie"])
	}
}
