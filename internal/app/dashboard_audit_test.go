package app_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// auditTrail is an object's audit rows, oldest first, as "actor [actor's company] action".
func auditTrail(t *testing.T, d *pg.DB, kind, objectID string) []string {
	t.Helper()
	return testfix.Column[string](t, d, `SELECT actor_name || ' [' || actor_org_name || '] ' || action FROM audit_event
		WHERE object_kind = $1 AND object_id = $2 ORDER BY at, id`, kind, objectID)
}

func wantTrail(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit trail %q, want %q", got, want)
	}
}

// TestDashboardAuditRooms checks that the people's changes on the Memory and Tasks tabs
// are audited in the transaction of the change (a refused change leaves no row) and that
// each tab shows its history.
func TestDashboardAuditRooms(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	d, room, roomURL, architect, qa := s.d, s.room, s.roomURL, s.architect, s.qa
	p := s.signIn(t, "ana", "gus")
	ana, gus := p[0], p[1]
	idRe := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`)
	tasks := "/app/rooms/" + room + "/tasks"
	send := func(key, to, goal string) string {
		t.Helper()
		return idRe.FindString(served(t, roomURL, key, "send_task", map[string]any{"to_agent_slug": to, "goal": goal}))
	}

	t.Run("a memory deprecation is audited and shown on the Memory tab", func(t *testing.T) {
		t.Parallel()
		id := idRe.FindString(served(t, roomURL, qa, "write_memory", map[string]any{"content": "Audit: the cache TTL is five minutes"}))
		ana.wantPost(t, http.StatusSeeOther, "deprecate", "/app/rooms/"+room+"/memory/"+id+"/deprecate", ana.form())
		wantTrail(t, auditTrail(t, d, "memory_entry", id), "Ana [Acme Corp] deprecated")
		_, body := ana.get("/app/rooms/" + room + "/memory")
		if !strings.Contains(body, `id="history-memory_entry"`) || !strings.Contains(body, `href="#m-`+id+`"`) || !strings.Contains(body, "deprecated</td>") {
			t.Fatalf("the Memory tab shows no history of the entry: %s", body)
		}
	})

	t.Run("a refused deprecation leaves no row", func(t *testing.T) {
		t.Parallel()
		id := idRe.FindString(served(t, roomURL, architect, "write_memory", map[string]any{"content": "Audit: the host's runbook lives in the wiki"}))
		gus.wantPost(t, http.StatusNotFound, "guest deprecating the host's entry", "/app/rooms/"+room+"/memory/"+id+"/deprecate", gus.form())
		wantTrail(t, auditTrail(t, d, "memory_entry", id))
	})

	t.Run("a review is audited with its verdict; a refused review leaves no row; the Tasks tab shows it", func(t *testing.T) {
		t.Parallel()
		done := send(qa, "architect", "Audit: reproduce the export bug")
		served(t, roomURL, architect, "respond_to_task", map[string]any{"task_id": done, "status": "done", "result": "Reproduced."})
		ana.wantPost(t, http.StatusForbidden, "the host accepting the guest's task", tasks+"/"+done+"/review", ana.form("verdict", "accepted"))
		wantTrail(t, auditTrail(t, d, "task", done))
		gus.wantPost(t, http.StatusSeeOther, "review", tasks+"/"+done+"/review", gus.form("verdict", "rejected"))
		gus.wantPost(t, http.StatusConflict, "second review", tasks+"/"+done+"/review", gus.form("verdict", "accepted"))
		wantTrail(t, auditTrail(t, d, "task", done), "Gus [Globex] rejected")
		_, body := gus.get(tasks)
		if !strings.Contains(body, `id="history-task"`) || !strings.Contains(body, `href="#task-`+done+`"`) || !strings.Contains(body, "Gus [Globex]</td><td>rejected</td>") {
			t.Fatalf("the Tasks tab shows no history of the review: %s", body)
		}
	})

	t.Run("a cancel is audited; a refused cancel leaves no row", func(t *testing.T) {
		t.Parallel()
		hosts := send(architect, "qa-lead", "Audit: write the migration guide")
		gus.wantPost(t, http.StatusForbidden, "guest canceling the host's task", tasks+"/"+hosts+"/cancel", gus.form())
		wantTrail(t, auditTrail(t, d, "task", hosts))
		ana.wantPost(t, http.StatusSeeOther, "cancel", tasks+"/"+hosts+"/cancel", ana.form())
		wantTrail(t, auditTrail(t, d, "task", hosts), "Ana [Acme Corp] canceled")
	})

	t.Run("an upload is audited with the file's name; a refused upload leaves no row", func(t *testing.T) {
		t.Parallel()
		hosts := send(architect, "qa-lead", "Audit: review the release notes")
		if status, _ := gus.upload(tasks+"/"+hosts+"/attachments", gus.csrf(), "sneaky.txt", []byte("not mine")); status != http.StatusForbidden {
			t.Fatalf("guest attaching to the host's task: %d", status)
		}
		wantTrail(t, auditTrail(t, d, "task", hosts))
		if status, body := ana.upload(tasks+"/"+hosts+"/attachments", ana.csrf(), "notes.txt", []byte("notes")); status != http.StatusSeeOther {
			t.Fatalf("upload: %d %s", status, body)
		}
		wantTrail(t, auditTrail(t, d, "task", hosts), "Ana [Acme Corp] file_attached")
		if _, body := ana.get(tasks); !strings.Contains(body, "file: notes.txt") {
			t.Fatalf("the Tasks tab does not show the upload's history: %s", body)
		}
	})
}

// TestDashboardAuditKnowledge checks that the host's reviewers' knowledge decisions and
// settings saves are audited in their transaction (a refused one leaves no row) and shown
// on the Knowledge page and the settings page.
func TestDashboardAuditKnowledge(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	d, room, architect, threads := s.d, s.room, s.architect, s.threads
	p := s.signIn(t, "ana", "mo")
	ana, mo := p[0], p[1]
	base := "/app/rooms/" + room + "/knowledge"
	learn := func(title, body string) string {
		t.Helper()
		return idRe.FindString(served(t, threads, architect, "learn", map[string]any{"title": title, "body": body, "kind": "fact"}))
	}

	t.Run("approve, demote and expire are audited; refused ones leave no row; the page shows the history", func(t *testing.T) {
		t.Parallel()
		id := learn("Audit: deploys freeze on Fridays", "No production deploys after Friday noon.")
		mo.wantPost(t, http.StatusForbidden, "a member approving", base+"/"+id+"/approve", mo.form())
		wantTrail(t, auditTrail(t, d, "knowledge", id))
		ana.wantPost(t, http.StatusSeeOther, "approve", base+"/"+id+"/approve", ana.form())
		ana.wantPost(t, http.StatusConflict, "approving twice", base+"/"+id+"/approve", ana.form())
		ana.wantPost(t, http.StatusBadRequest, "a past expiry", base+"/"+id+"/expire", ana.form("expires_at", "2001-01-01T00:00"))
		ana.wantPost(t, http.StatusSeeOther, "expire", base+"/"+id+"/expire", ana.form("expires_at", "2099-01-01T09:00"))
		ana.wantPost(t, http.StatusSeeOther, "demote", base+"/"+id+"/demote", ana.form())
		ana.wantPost(t, http.StatusConflict, "demoting twice", base+"/"+id+"/demote", ana.form())
		wantTrail(t, auditTrail(t, d, "knowledge", id), "Ana [Acme Corp] approved", "Ana [Acme Corp] expired", "Ana [Acme Corp] demoted")
		_, body := ana.get(base)
		if !strings.Contains(body, `id="history-knowledge"`) || !strings.Contains(body, `href="#k-`+id+`"`) || !strings.Contains(body, "Ana [Acme Corp]</td><td>demoted</td>") {
			t.Fatalf("the Knowledge page shows no history: %s", body)
		}
	})

	t.Run("a reject is audited", func(t *testing.T) {
		t.Parallel()
		id := learn("Audit: the staging VPN is optional", "Staging is reachable without the VPN.")
		ana.wantPost(t, http.StatusSeeOther, "reject", base+"/"+id+"/reject", ana.form())
		wantTrail(t, auditTrail(t, d, "knowledge", id), "Ana [Acme Corp] rejected")
	})

	t.Run("a settings save is audited with what changed; a refused save leaves no row; the settings page shows it", func(t *testing.T) {
		t.Parallel()
		bad := url.Values{"csrf": {ana.csrf()}, "distill_was": {"true"}, "rule_rows": {"1"}, "name_0": {"broken"}, "pattern_0": {"("}}
		if status, _ := ana.postForm(base+"/settings", bad); status != http.StatusBadRequest {
			t.Fatalf("a rule that does not compile: %d", status)
		}
		mo.wantPost(t, http.StatusForbidden, "a member saving", base+"/settings", mo.form("distill_was", "true", "rule_rows", "0"))
		wantTrail(t, auditTrail(t, d, "knowledge_settings", room))
		good := url.Values{"csrf": {ana.csrf()}, "distill_was": {"true"}, "rule_rows": {"1"}, "name_0": {"ticket"}, "pattern_0": {`TCK-[0-9]+`}, "replacement_0": {"[ticket]"}}
		if status, _ := ana.postForm(base+"/settings", good); status != http.StatusSeeOther {
			t.Fatalf("save: %d", status)
		}
		wantTrail(t, auditTrail(t, d, "knowledge_settings", room), "Ana [Acme Corp] saved")
		_, body := ana.get(base + "/settings")
		if !strings.Contains(body, `id="history-knowledge_settings"`) || !strings.Contains(body, "distillOnClose: false") || !strings.Contains(body, "redactionRules: 1") {
			t.Fatalf("the settings page shows no history: %s", body)
		}
	})
}

// TestDashboardAuditThreads checks that a person's thread cancel is audited in its
// transaction (a refused or idle one leaves no row) and shown on the thread's page.
func TestDashboardAuditThreads(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, threadsFile, nil)
	d := openSeeded(t, s)
	pages := "/app/projects/" + s.res.Projects["escalations"].ID.String()
	architect, backend := s.key("acme/architect"), s.key("acme/backend")
	asArchitect, asBackend := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend")
	send := func(url, key, to, subject string) string {
		t.Helper()
		return threadIDField.FindStringSubmatch(served(t, url, key, "send", map[string]any{"to": []string{to}, "subject": subject, "body": "Audit"}))[1]
	}
	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	ivy := signIn(t, s.base, "ivy@initech.test", "demo-password-ivy")

	t.Run("a cancel is audited once and shown on the thread's page", func(t *testing.T) {
		t.Parallel()
		thread := send(asArchitect, architect, "qa-lead", "Audit: cancel me")
		ivy.wantPost(t, http.StatusNotFound, "another company's person canceling", pages+"/threads/"+thread+"/cancel", ivy.form())
		wantTrail(t, auditTrail(t, d, "thread", thread))
		for range 2 { // the second cancel changes nothing and records nothing
			ana.wantPost(t, http.StatusSeeOther, "cancel", pages+"/threads/"+thread+"/cancel", ana.form())
		}
		wantTrail(t, auditTrail(t, d, "thread", thread), "Ana [Acme Corp] canceled")
		_, body := ana.get(pages + "/threads/" + thread)
		if !strings.Contains(body, `id="history-thread"`) || !strings.Contains(body, "Ana [Acme Corp]</td><td>canceled</td>") {
			t.Fatalf("the thread's page shows no history: %s", body)
		}
	})

	t.Run("a refused cancel of a closed thread leaves no row", func(t *testing.T) {
		t.Parallel()
		closed := send(asBackend, backend, "architect", "Audit: closed already")
		served(t, asBackend, backend, "close", map[string]any{"threadId": closed})
		ana.wantPost(t, http.StatusConflict, "canceling a closed thread", pages+"/threads/"+closed+"/cancel", ana.form())
		wantTrail(t, auditTrail(t, d, "thread", closed))
	})
}
