package app_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

// needsFile: Acme hosts Escalations; Globex is an active guest whose agent sends tasks;
// Initech was invited and has not accepted. The architect may flag threads for people.
const needsFile = `
organisations:
  - {slug: acme, name: Acme Corp}
  - {slug: globex, name: Globex}
  - {slug: initech, name: Initech}
users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner, password: "demo-password-ana"}
  - {email: mo@acme.test, name: Mo, org: acme, role: member, password: "demo-password-mo"}
  - {email: gus@globex.test, name: Gus, org: globex, role: admin, password: "demo-password-gus"}
  - {email: ivy@initech.test, name: Ivy, org: initech, role: owner, password: "demo-password-ivy"}
agents:
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
	s := startServerFile(t, needsFile, nil)
	room := s.res.Projects["escalations"].ID.String()
	roomURL := s.base + "/api/mcp/p/" + room
	threads := s.threadsURL("escalations", "architect")
	architect, qa := s.key("acme/architect"), s.key("globex/qa-lead")

	served(t, threads, architect, "send", map[string]any{"to": []string{"qa-lead"}, "subject": "Customer asks for a refund",
		"body": "A person should decide this one", "needsHuman": true})
	sent := served(t, roomURL, qa, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "Reproduce the login bug"})
	task := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(sent)
	served(t, roomURL, architect, "respond_to_task", map[string]any{"task_id": task, "status": "done", "result": "Reproduced on staging"})
	served(t, threads, architect, "learn", map[string]any{"title": "Rollbacks need the feature flag off first",
		"body": "Turn the flag off before rolling back, or the old code reads new rows.", "kind": "pitfall"})
	// A wake the qa-lead's webhook refused (the wake engine's dead letter).
	d := openSeeded(t, s)
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO wake (project_id, id, member_id, agent_id, part, status, created_at, updated_at)
			SELECT project_id, gen_random_uuid(), id, agent_id, part, 'dead', now(), now() FROM membership WHERE project_id = $1 AND part = 'qa-lead'`, room)
		return err
	}); err != nil {
		t.Fatal(err)
	}

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
					"Agreement not yet accepted by an invited company", "Wake that could not be delivered to qa-lead"},
				hidden: []string{"Reproduce the login bug"}}},
		{"the host's member: not the knowledge to review",
			"mo@acme.test", "demo-password-mo", want{
				shown:  []string{"Customer asks for a refund"},
				hidden: []string{"Rollbacks need", "Reproduce the login bug"}}},
		{"the guest's admin: the result its agent awaits, the thread its part is in, its own agent's dead wake",
			"gus@globex.test", "demo-password-gus", want{
				shown: []string{`href="/app/rooms/` + room + `/tasks#task-` + task + `"`, "Reproduce the login bug",
					"Customer asks for a refund", "Wake that could not be delivered to qa-lead"},
				hidden: []string{"Rollbacks need", "Initech"}}},
		{"the invited company: its pending agreement and nothing of the room",
			"ivy@initech.test", "demo-password-ivy", want{
				shown:  []string{"Agreement waiting for your company&#39;s acceptance", `href="/app/rooms/` + room + `"`},
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
}
