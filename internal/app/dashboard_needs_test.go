package app_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

// needsFile: Acme hosts Escalations; Globex is an active guest whose agent sends tasks;
// Initech was invited and has not accepted. The architect may flag threads for people.
const needsFile = signInCast + `agents:
  - {org: acme, slug: architect, name: Architect, model: claude-opus-4, kind: always_on}
  - {org: globex, slug: qa-lead, name: QA Lead, model: gpt-5, kind: session}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, access: manager, capabilities: [needsHuman]}
      - {agent: globex/qa-lead, part: qa-lead, access: write}
    guests:
      - {org: globex, status: active, grants: [read_memory, write_memory, assign_tasks]}
      - {org: initech, status: pending, grants: [read_memory]}
`

func TestDashboardNeedsYou(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, needsFile)
	d, room, roomURL, threads, architect, qa := s.d, s.room, s.roomURL, s.threads, s.architect, s.qa

	served(t, threads, architect, "send", map[string]any{"to": []string{"qa-lead"}, "subject": "Customer asks for a refund",
		"body": "A person should decide this one", "needsHuman": true})
	sent := served(t, roomURL, qa, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "Reproduce the login bug"})
	task := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(sent)
	served(t, roomURL, architect, "respond_to_task", map[string]any{"task_id": task, "status": "done", "result": "Reproduced on staging"})
	served(t, threads, architect, "learn", map[string]any{"title": "Rollbacks need the feature flag off first",
		"body": "Turn the flag off before rolling back, or the old code reads new rows.", "kind": "pitfall"})
	// A wake the qa-lead's webhook refused (the wake engine's dead letter), for one task.
	var deadWake string
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), `INSERT INTO wake (project_id, id, member_id, agent_id, part, status, attempts, last_error,
			count, other_count, sources, created_at, updated_at)
			SELECT project_id, gen_random_uuid(), id, agent_id, part, 'dead', 8, 'webhook answered 502', 1, 1, '{task}', now(), now()
			FROM membership WHERE project_id = $1 AND part = 'qa-lead'
			RETURNING id::text`, room).Scan(&deadWake)
	}); err != nil {
		t.Fatal(err)
	}
	wakePage := "/app/projects/" + room + "/wakes/" + deadWake

	home := func(p *person) string {
		t.Helper()
		status, body := p.get("/app/")
		if status != 200 {
			t.Fatalf("home: %d %s", status, body)
		}
		i := strings.Index(body, `id="needs-h"`)
		j := strings.Index(body, `id="rooms-h"`)
		if i < 0 || j < i {
			t.Fatalf("no needs-you panel: %s", body)
		}
		return body[i:j]
	}
	type want struct{ shown, hidden []string }
	for _, c := range []struct {
		name, email, password string
		want
	}{
		{"the host's owner: the flagged thread, the candidate, the unaccepted invitation, the dead wake; not the guest's task",
			"ana@acme.test", "demo-password-ana", want{
				shown: []string{"Customer asks for a refund", `href="/app/rooms/` + room + `/knowledge#k-`, "Rollbacks need the feature flag off first",
					"Agreement not yet accepted by an invited company", "Wake that could not be delivered to qa-lead", `href="` + wakePage + `"`},
				hidden: []string{"Reproduce the login bug"}}},
		{"the host's member: not the knowledge to review, nor the agreement (the admin pages refuse a member)",
			"mo@acme.test", "demo-password-mo", want{
				shown:  []string{"Customer asks for a refund"},
				hidden: []string{"Rollbacks need", "Reproduce the login bug", "Agreement not yet accepted"}}},
		{"the guest's admin: the result its agent awaits, the thread its part is in, its own agent's dead wake",
			"gus@globex.test", "demo-password-gus", want{
				shown: []string{`href="/app/rooms/` + room + `/tasks#task-` + task + `"`, "Reproduce the login bug",
					"Customer asks for a refund", "Wake that could not be delivered to qa-lead", `href="` + wakePage + `"`},
				hidden: []string{"Rollbacks need", "Initech"}}},
		{"the invited company: its pending agreement and nothing of the room",
			"ivy@initech.test", "demo-password-ivy", want{
				// The link names the organisation it acts for (a person in two acts for the first).
				shown:  []string{"Agreement waiting for your company&#39;s acceptance", `href="/app/admin/agreements/` + room + `/`, `?org=`},
				hidden: []string{"Customer asks", "Rollbacks need", "Reproduce the login bug", "qa-lead"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			panel := home(signIn(t, s.base, c.email, c.password))
			for _, w := range c.shown {
				if !strings.Contains(panel, w) {
					t.Errorf("missing %q in %s", w, panel)
				}
			}
			for _, w := range c.hidden {
				if strings.Contains(panel, w) {
					t.Errorf("shows %q: %s", w, panel)
				}
			}
		})
	}

	// The dead wake's page: what went wrong, and the way to send it again.
	p := s.signIn(t, "ana", "gus", "ivy")
	ana, gus, ivy := p[0], p[1], p[2]
	t.Run("the dead wake's page shows the part, the attempts and the error; the agent's own admins get its webhook link", func(t *testing.T) {
		for _, c := range []struct {
			p         *person
			adminLink bool
		}{{ana, false}, {gus, true}} {
			status, body := c.p.get(wakePage)
			if status != http.StatusOK || !strings.Contains(body, "QA Lead [Globex]") || !strings.Contains(body, "webhook answered 502") ||
				!strings.Contains(body, `action="`+wakePage+`/retry"`) {
				t.Fatalf("wake page: %d %s", status, body)
			}
			if got := strings.Contains(body, `/app/admin/agents/`+s.res.Agents["globex/qa-lead"].ID.String()); got != c.adminLink {
				t.Fatalf("the agent's admin link shown: %v, want %v: %s", got, c.adminLink, body)
			}
		}
	})
	t.Run("a company whose agreement is pending is refused as on every room page; a wake id that is not the room's is 404", func(t *testing.T) {
		if status, body := ivy.get(wakePage); status != http.StatusForbidden || strings.Contains(body, "webhook answered 502") {
			t.Fatalf("the invited company: %d %s", status, body)
		}
		ivy.wantPost(t, http.StatusForbidden, "the invited company's retry", wakePage+"/retry", ivy.form())
		if status, _ := ana.get("/app/projects/" + room + "/wakes/" + uuid.NewString()); status != http.StatusNotFound {
			t.Fatalf("a missing wake: %d", status)
		}
	})
	t.Run("a retry without the session's CSRF token changes nothing", func(t *testing.T) {
		if status, _ := gus.postForm(wakePage+"/retry", url.Values{"csrf": {ana.csrf()}}); status != http.StatusForbidden {
			t.Fatalf("another session's token: %d", status)
		}
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM wake WHERE id = $1 AND status = 'dead'`, deadWake); n != 1 {
			t.Fatalf("the wake changed: %d dead", n)
		}
	})
	t.Run("the guest's admin sends it again: pending, audited, off Needs you; a second retry is a conflict", func(t *testing.T) {
		// The flagged thread's wake of the qa-lead is still pending: while it is, the
		// part has a wake waiting and the dead one cannot be sent again. The send queued
		// a wake event; the sweep folds it into the pending wake, every 30 s and on start.
		// Folded here as the sweep does: waiting for the sweep made this step depend on
		// its timing (on a Citus coordinator the first send took 5 s, the on-start tick
		// ran before it, and the next came after this step: no wake was pending yet).
		if _, err := wake.New(wake.Deps{DB: d}).Coalesce(context.Background(), time.Now(), false); err != nil {
			t.Fatal(err)
		}
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM wake WHERE project_id = $1 AND part = 'qa-lead' AND status = 'pending'`, room); n != 1 {
			t.Fatalf("%d pending wakes of the qa-lead after the fold, want 1", n)
		}
		if status, body := gus.postForm(wakePage+"/retry", url.Values{"csrf": {gus.csrf()}}); status != http.StatusConflict || !strings.Contains(body, "already has a wake waiting") {
			t.Fatalf("a retry while another wake waits: %d %s", status, body)
		}
		testfix.Exec(t, d, `UPDATE wake SET status = 'delivered', delivered_at = now() WHERE project_id = $1 AND status = 'pending'`, room)
		if status, body := gus.postForm(wakePage+"/retry", url.Values{"csrf": {gus.csrf()}}); status != http.StatusSeeOther {
			t.Fatalf("retry: %d %s", status, body)
		}
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM wake WHERE id = $1 AND status = 'pending' AND attempts = 0 AND last_error IS NULL`, deadWake); n != 1 {
			t.Fatal("the wake is not pending again")
		}
		if _, body := gus.get(wakePage + "?notice=retried"); !strings.Contains(body, "The wake was sent again") || !strings.Contains(body, "retried") || !strings.Contains(body, "Gus") {
			t.Fatalf("the page after the retry (notice and history): %s", body)
		}
		if panel := home(gus); strings.Contains(panel, "Wake that could not be delivered") {
			t.Fatalf("the retried wake is still on Needs you: %s", panel)
		}
		ana.wantPost(t, http.StatusConflict, "a second retry", wakePage+"/retry", ana.form())
	})
}

func TestDashboardTasks(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, needsFile, nil)
	room := s.res.Projects["escalations"].ID.String()
	roomURL := s.base + "/api/mcp/p/" + room
	architect, qa := s.key("acme/architect"), s.key("globex/qa-lead")
	uuidRe := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`)
	send := func(key, to, goal string) string {
		t.Helper()
		return uuidRe.FindString(served(t, roomURL, key, "send_task", map[string]any{"to_agent_slug": to, "goal": goal}))
	}
	done := send(qa, "architect", "Reproduce the login bug")
	served(t, roomURL, architect, "respond_to_task", map[string]any{"task_id": done, "status": "done",
		"result": "Reproduced on staging.\nThe session cookie is dropped after the redirect."})
	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	gus := signIn(t, s.base, "gus@globex.test", "demo-password-gus")
	tasks := "/app/rooms/" + room + "/tasks"

	t.Run("the tab shows state, assignee and the full result; only the sender's people get accept and reject", func(t *testing.T) {
		_, body := gus.get(tasks)
		for _, w := range []string{`id="task-` + done + `"`, "Reproduce the login bug", "state-done", "Architect", "The session cookie is dropped after the redirect.", "Accept the result", "Reject the result"} {
			if !strings.Contains(body, w) {
				t.Fatalf("missing %q: %s", w, body)
			}
		}
		if _, body := ana.get(tasks); !strings.Contains(body, "Reproduce the login bug") || strings.Contains(body, "Accept the result") {
			t.Fatalf("the host's page: %s", body)
		}
	})

	t.Run("a person of another company cannot accept, and nothing changes", func(t *testing.T) {
		status, body := ana.postForm(tasks+"/"+done+"/review", url.Values{"csrf": {ana.csrf()}, "verdict": {"accepted"}})
		if status != http.StatusForbidden || !strings.Contains(body, "Only the company that sent task") {
			t.Fatalf("%d: %s", status, body)
		}
		if _, body := gus.get(tasks); !strings.Contains(body, "Accept the result") {
			t.Fatal("the task was reviewed anyway")
		}
	})

	t.Run("an unknown task answers 404", func(t *testing.T) {
		if status, _ := gus.postForm(tasks+"/"+uuid.NewString()+"/review", url.Values{"csrf": {gus.csrf()}, "verdict": {"accepted"}}); status != http.StatusNotFound {
			t.Fatalf("status %d", status)
		}
	})

	t.Run("the sender's admin accepts; agents see the card by the person; a second review is refused", func(t *testing.T) {
		status, _ := gus.postForm(tasks+"/"+done+"/review", url.Values{"csrf": {gus.csrf()}, "verdict": {"accepted"}, "comment": {"Thanks, confirmed"}})
		if status != http.StatusSeeOther {
			t.Fatalf("status %d", status)
		}
		if _, body := gus.get(tasks); !strings.Contains(body, "result accepted") || !strings.Contains(body, "Thanks, confirmed") || strings.Contains(body, "Accept the result") {
			t.Fatalf("after accepting: %s", body)
		}
		if got := served(t, roomURL, architect, "get_messages", map[string]any{"limit": 20}); !strings.Contains(got, `Gus [Globex] (human)`) || !strings.Contains(got, "accepted") {
			t.Fatalf("no card by the person: %s", got)
		}
		status, body := gus.postForm(tasks+"/"+done+"/review", url.Values{"csrf": {gus.csrf()}, "verdict": {"rejected"}})
		if status != http.StatusConflict || !strings.Contains(body, "already accepted") {
			t.Fatalf("%d: %s", status, body)
		}
	})

	t.Run("the host's people cancel an open task; a guest cannot cancel the host's task", func(t *testing.T) {
		open := send(qa, "architect", "Rotate the staging certificates")
		hosts := send(architect, "qa-lead", "Write the regression test")
		status, body := gus.postForm(tasks+"/"+hosts+"/cancel", url.Values{"csrf": {gus.csrf()}})
		if status != http.StatusForbidden || !strings.Contains(body, "can cancel it") {
			t.Fatalf("%d: %s", status, body)
		}
		if status, _ := ana.postForm(tasks+"/"+open+"/cancel", url.Values{"csrf": {ana.csrf()}}); status != http.StatusSeeOther {
			t.Fatalf("status %d", status)
		}
		if got := served(t, roomURL, architect, "get_inbox", map[string]any{}); strings.Contains(got, "Rotate the staging certificates") {
			t.Fatalf("the canceled task is still in the inbox: %s", got)
		}
		if _, body := ana.get(tasks); !strings.Contains(body, "state-canceled") {
			t.Fatalf("not shown canceled: %s", body)
		}
		ana.wantPost(t, http.StatusConflict, "canceling twice", tasks+"/"+open+"/cancel", ana.form())
	})
}

func TestDashboardRosterLimitedBadge(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, needsFile, nil)
	room := s.res.Projects["escalations"].ID.String()
	d := openSeeded(t, s)
	// The qa-lead is parked until 15:30 UTC tomorrow; Acme's people read Tokyo time, Globex's UTC.
	until := time.Now().UTC().Add(24 * time.Hour).Truncate(24 * time.Hour).Add(24*time.Hour + 15*time.Hour + 30*time.Minute)
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		if _, err := tx.Exec(context.Background(), `UPDATE membership SET parked_until = $2 WHERE project_id = $1 AND part = 'qa-lead'`, room, until); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), `UPDATE organisation SET timezone = 'Asia/Tokyo' WHERE slug = 'acme'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ email, password, want string }{
		{"ana@acme.test", "demo-password-ana", "limited until 00:30"}, // 15:30 UTC is 00:30 in Tokyo
		{"gus@globex.test", "demo-password-gus", "limited until 15:30"},
	} {
		t.Run(c.email+" reads "+c.want, func(t *testing.T) {
			_, body := signIn(t, s.base, c.email, c.password).get("/app/rooms/" + room)
			i := strings.Index(body, "<strong>qa-lead</strong>")
			if i < 0 || !strings.Contains(body[i:], `class="badge amber"`) || !strings.Contains(body[i:], c.want) {
				t.Fatalf("want the amber %q badge on qa-lead: %s", c.want, body)
			}
			// The main part is listed first; it is not parked.
			if j := strings.Index(body, "<strong>architect</strong>"); j < 0 || j > i || strings.Contains(body[j:i], "amber") {
				t.Fatalf("the architect is not parked: %s", body)
			}
		})
	}
}

// TestDashboardOrganisationSwitch: a person in two organisations could reach the second
// only by typing ?org= into the address: the home page now lists their organisations,
// the one it acts for first, each with the pages their role opens.
func TestDashboardOrganisationSwitch(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, needsFile)
	globex := s.res.Organisations["globex"].ID.String()
	if err := s.d.Operator(context.Background(), func(tx *pg.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO org_member (org_id, user_id, role)
			SELECT $1, id, 'admin' FROM app_user WHERE email = 'mo@acme.test'`, globex)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := s.signIn(t, "mo", "ana")
	mo, ana := p[0], p[1]
	orgs := func(t *testing.T, p *person, path string) string {
		t.Helper()
		status, body := p.get(path)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		i := strings.Index(body, `id="orgs-h"`)
		if i < 0 {
			return ""
		}
		return body[i : i+strings.Index(body[i:], "</nav>")]
	}

	t.Run("the home page offers the other organisation, and the admin pages only where the role opens them", func(t *testing.T) {
		list := orgs(t, mo, "/app/")
		acme := strings.Index(list, `<strong aria-current="page">Acme Corp</strong>`)
		other := strings.Index(list, `href="/app/?org=`+globex+`">Globex</a>`)
		if acme < 0 || other < acme {
			t.Fatalf("the list: %s", list)
		}
		if strings.Count(list, "Company admin") != 1 || !strings.Contains(list, `href="/app/admin?org=`+globex+`"`) {
			t.Fatalf("company admin offered where mo is a member: %s", list)
		}
	})
	t.Run("following it, the home page acts for the other organisation", func(t *testing.T) {
		list := orgs(t, mo, "/app/?org="+globex)
		if !strings.HasPrefix(list[strings.Index(list, "<ul>"):], `<ul><li><strong aria-current="page">Globex</strong>`) {
			t.Fatalf("the list: %s", list)
		}
		_, body := mo.get("/app/?org=" + globex)
		if !strings.Contains(body, "hosted by Acme Corp · agreement active") {
			t.Fatalf("the rooms are not Globex's: %s", body)
		}
	})
	t.Run("a person in one organisation sees no list", func(t *testing.T) {
		if list := orgs(t, ana, "/app/"); list != "" {
			t.Fatalf("ana sees %s", list)
		}
	})
}
