package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

var idRe = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// knowledgeConfig reads a project's knowledge_config and settings behind the API.
func knowledgeConfig(t *testing.T, d *pg.DB, room string) (cfg, settings map[string]any) {
	t.Helper()
	var c, s []byte
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT knowledge_config, settings FROM project WHERE id = $1`, room).Scan(&c, &s)
	}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s, &settings); err != nil {
		t.Fatal(err)
	}
	return cfg, settings
}

// upload posts a file on the Tasks tab as the browser's form does: the CSRF field first
// (none when csrf is "-"), then the file.
func (p *person) upload(path, csrf, filename string, content []byte) (int, string) {
	p.t.Helper()
	var fields [][2]string
	if csrf != "-" {
		fields = append(fields, [2]string{"csrf", csrf})
	}
	return p.postMultipart(path, fields, filename, string(content))
}

func TestDashboardKnowledge(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	d, room, architect, threads := s.d, s.room, s.architect, s.threads
	p := s.signIn(t, "ana", "gus", "ivy", "mo")
	ana, gus, ivy, mo := p[0], p[1], p[2], p[3]
	base := "/app/rooms/" + room + "/knowledge"
	learn := func(title, body string) string {
		return idRe.FindString(served(t, threads, architect, "learn", map[string]any{"title": title, "body": body, "kind": "fact"}))
	}
	// recall is what the architect's recall of query answers.
	recall := func(t *testing.T, query string) string {
		t.Helper()
		return served(t, threads, architect, "recall", map[string]any{"query": query})
	}

	t.Run("the title is edited before approving and recall returns the new title", func(t *testing.T) {
		t.Parallel()
		id := learn("cache thing", "Purge the CDN cache after every pricing page deploy.")
		status, _ := ana.postForm(base+"/"+id+"/approve", url.Values{"csrf": {ana.csrf()}, "title": {"Purge the CDN after pricing deploys"}})
		if status != http.StatusSeeOther {
			t.Fatalf("approve: %d", status)
		}
		got := recall(t, "purge CDN cache pricing deploy")
		if !strings.Contains(got, "Purge the CDN after pricing deploys") || strings.Contains(got, "cache thing") {
			t.Fatalf("recall after an edited approval: %s", got)
		}
	})

	t.Run("a guest's people read the trusted entries only, and no query's text", func(t *testing.T) {
		t.Parallel()
		// A candidate distilled from a thread only the host's parts were in, and the host
		// agents' recall queries that found nothing, told a guest what the host discussed.
		learn("Host-only margin floor", "Never quote under a 32 percent margin to Globex.")
		recall(t, "quartz zeppelin pricing exception")
		trusted := learn("Shared release window", "Releases go out on Tuesdays.")
		ana.wantPost(t, http.StatusSeeOther, "approve", base+"/"+trusted+"/approve", ana.form())
		_, host := ana.get(base)
		if !strings.Contains(host, "Host-only margin floor") || !strings.Contains(host, "quartz zeppelin") {
			t.Fatalf("the host's own page lacks its candidate or its empty query: %s", host)
		}
		status, guest := gus.get(base)
		if status != http.StatusOK || !strings.Contains(guest, "Shared release window") {
			t.Fatalf("the guest's page: %d, trusted entry shown %v", status, strings.Contains(guest, "Shared release window"))
		}
		if strings.Contains(guest, "Host-only margin floor") || strings.Contains(guest, "quartz zeppelin") {
			t.Fatal("a guest's people read the host's candidate or its agents' queries")
		}
		// Hidden, and said to be: the page told them "No candidates to review" and "Every
		// recall … returned something" while the host had both.
		if strings.Contains(guest, "No candidates to review") || strings.Contains(guest, "Every recall in the last weeks returned something") ||
			!strings.Contains(guest, "The review queue is the host company") || !strings.Contains(guest, "shown to the host company's people only") {
			t.Fatal("the guest's page says there is nothing to review or no empty query, instead of that they are the host's")
		}
	})

	t.Run("a bad title is refused beside its field and nothing is saved", func(t *testing.T) {
		t.Parallel()
		id := learn("Rotate the signing key yearly", "The release signing key rotates every January.")
		long := strings.Repeat("x", 201)
		status, body := ana.postForm(base+"/"+id+"/approve", url.Values{"csrf": {ana.csrf()}, "title": {long}})
		if status != http.StatusBadRequest || !strings.Contains(body, `id="title-err-`+id+`"`) || !strings.Contains(body, "at most 200") {
			t.Fatalf("a 201-character title: %d %s", status, body)
		}
		if got := recall(t, "rotate signing key yearly"); strings.Contains(got, "signing key") {
			t.Fatalf("a refused approval made the entry trusted: %s", got)
		}
		if _, body := ana.get(base); !strings.Contains(body, "<h3>Rotate the signing key yearly</h3>") {
			t.Fatalf("the title changed although the approval was refused: %s", body)
		}
	})

	t.Run("a trusted entry is demoted and recall stops returning it", func(t *testing.T) {
		t.Parallel()
		id := learn("Invoices close on the 25th", "Finance closes the month's invoices on the 25th.")
		ana.wantPost(t, http.StatusSeeOther, "approve", base+"/"+id+"/approve", ana.form())
		if got := recall(t, "invoices close 25th"); !strings.Contains(got, "Invoices close") {
			t.Fatalf("not recalled after approval: %s", got)
		}
		for _, p := range []*person{mo, gus} {
			p.wantPost(t, http.StatusForbidden, "demote by a member or a guest admin", base+"/"+id+"/demote", p.form())
		}
		ana.wantPost(t, http.StatusSeeOther, "demote", base+"/"+id+"/demote", ana.form())
		if got := recall(t, "invoices close 25th"); strings.Contains(got, "Invoices close") {
			t.Fatalf("recalled after demotion: %s", got)
		}
		ana.wantPost(t, http.StatusConflict, "demoting a demoted entry", base+"/"+id+"/demote", ana.form())
		if _, body := ana.get(base); !strings.Contains(body, "Demoted (approve again or reject)") {
			t.Fatalf("the demoted entry is not offered for approval again: %s", body)
		}
	})

	t.Run("a candidate learned again after its rejection says so", func(t *testing.T) {
		t.Parallel()
		// The rejected original is not on the page: a link to it led nowhere.
		first := learn("Deploys freeze on Fridays", "No production deploys after noon on Fridays.")
		ana.wantPost(t, http.StatusSeeOther, "reject", base+"/"+first+"/reject", ana.form())
		again := learn("Deploys freeze on Fridays", "No production deploys after noon on Fridays.")
		_, body := ana.get(base)
		card := body[strings.Index(body, `id="k-`+again+`"`):]
		card = card[:strings.Index(card, "</li>")]
		if !strings.Contains(card, "near-duplicate of an entry that was rejected") || strings.Contains(card, "#k-"+first) {
			t.Fatalf("the card of the text learned again: %s", card)
		}
	})

	t.Run("a trusted entry expires now, a past date is refused beside the field", func(t *testing.T) {
		t.Parallel()
		id := learn("Support hours are 8 to 18", "Support answers phones from 8 to 18 on weekdays.")
		ana.wantPost(t, http.StatusSeeOther, "approve", base+"/"+id+"/approve", ana.form())
		status, body := ana.postForm(base+"/"+id+"/expire", url.Values{"csrf": {ana.csrf()}, "expires_at": {"2001-01-01T00:00"}})
		if status != http.StatusBadRequest || !strings.Contains(body, `id="exp-err-`+id+`"`) || !strings.Contains(body, "in the past") {
			t.Fatalf("a past expiry: %d %s", status, body)
		}
		if status, body := ana.postForm(base+"/"+id+"/expire", url.Values{"csrf": {ana.csrf()}, "expires_at": {"soon"}}); status != http.StatusBadRequest || !strings.Contains(body, "must be a date") {
			t.Fatalf("a malformed expiry: %d %s", status, body)
		}
		if got := recall(t, "support hours phones weekdays"); !strings.Contains(got, "Support hours") {
			t.Fatalf("a refused expiry retired the entry: %s", got)
		}
		ana.wantPost(t, http.StatusSeeOther, "a later expiry", base+"/"+id+"/expire", ana.form("expires_at", "2099-01-01T09:00"))
		if got := recall(t, "support hours phones weekdays"); !strings.Contains(got, `"expiresAt":"2099-01-01T09:00:00`) {
			t.Fatalf("a later expiry (Acme's timezone is UTC) is not on the entry: %s", got)
		}
		if _, body := ana.get(base); !strings.Contains(body, "approved by person:Ana · expires 2099-01-01") {
			t.Fatalf("a later expiry changed who approved the entry: %s", body)
		}
		ana.wantPost(t, http.StatusSeeOther, "expire now", base+"/"+id+"/expire", ana.form("expires_at", ""))
		if got := recall(t, "support hours phones weekdays"); strings.Contains(got, "Support hours") {
			t.Fatalf("recalled after expiry: %s", got)
		}
	})

	t.Run("the Learning panel charts used / returned per day and week and lists the queries that found nothing", func(t *testing.T) {
		t.Parallel()
		id := learn("Deploy window is Tuesday", "Production deploys happen on Tuesday mornings only.")
		ana.wantPost(t, http.StatusSeeOther, "approve", base+"/"+id+"/approve", ana.form())
		var rec struct {
			QueryID string `json:"queryId"`
		}
		if err := json.Unmarshal([]byte(recall(t, "deploy window tuesday")), &rec); err != nil {
			t.Fatal(err)
		}
		served(t, threads, architect, "recall_used", map[string]any{"queryId": rec.QueryID, "knowledgeId": id})
		recall(t, "zebra husbandry regulations")
		status, body := ana.get(base)
		if status != http.StatusOK || !strings.Contains(body, `<svg class="chart"`) || !strings.Contains(body, "Recall hit rate per week") ||
			!strings.Contains(body, "zebra husbandry regulations") {
			t.Fatalf("learning panel: %d %s", status, body)
		}
		// Other subtests recall too: today's row counts at least this one use.
		if !regexp.MustCompile(`<td>[1-9][0-9]*</td><td>[1-9][0-9]*</td><td>[0-9]+%</td>`).MatchString(body) {
			t.Fatalf("no day with a use in the table: %s", body)
		}
	})

	// Not parallel: it turns distillOnClose off in the room while it runs, which would
	// change what the other subtests' closes do; run alone, it restores it before they start.
	t.Run("the settings page merges: a distillOnClose set by SQL survives saving the rules", func(t *testing.T) {
		testfix.Exec(t, d, `UPDATE project SET knowledge_config = knowledge_config || '{"distillOnClose": false, "recallFloor": 0.3}'::jsonb,
			settings = settings || '{"keepMe": 7}'::jsonb WHERE id = $1`, room)
		status, page := ana.get(base + "/settings")
		if status != http.StatusOK || strings.Contains(page, `name="distill_on_close" checked`) || !strings.Contains(page, `name="distill_was" value="false"`) {
			t.Fatalf("settings page: %d %s", status, page)
		}
		form := url.Values{"csrf": {ana.csrf()}, "distill_was": {"false"}, "rule_rows": {"2"},
			"name_0": {"ticket"}, "pattern_0": {`TCK-[0-9]+`}, "replacement_0": {"[ticket]"}}
		bad := url.Values{}
		for k, v := range form {
			bad[k] = v
		}
		bad.Set("name_1", "broken")
		bad.Set("pattern_1", "(")
		status, body := ana.postForm(base+"/settings", bad)
		if status != http.StatusBadRequest || !strings.Contains(body, `id="rules-err"`) || !strings.Contains(body, `rule &#34;broken&#34;`) {
			t.Fatalf("a rule that does not compile: %d %s", status, body)
		}
		if _, set := knowledgeConfig(t, d, room); set["redactionRules"] != nil {
			t.Fatalf("a refused save stored rules: %v", set)
		}
		if status, _ := ana.postForm(base+"/settings", form); status != http.StatusSeeOther {
			t.Fatalf("save: %d", status)
		}
		cfg, set := knowledgeConfig(t, d, room)
		if cfg["distillOnClose"] != false || cfg["recallFloor"] != 0.3 || set["keepMe"] != float64(7) {
			t.Fatalf("saving replaced instead of merging: config %v settings %v", cfg, set)
		}
		rules, _ := json.Marshal(set["redactionRules"])
		if string(rules) != `[{"name":"ticket","pattern":"TCK-[0-9]+","replacement":"[ticket]"}]` {
			t.Fatalf("rules: %s", rules)
		}
		// The rule applies to the next write.
		served(t, threads, architect, "learn", map[string]any{"title": "See TCK-991", "body": "Ticket TCK-991 has the details.", "kind": "fact"})
		if _, body := ana.get(base); !strings.Contains(body, "<h3>See [ticket]</h3>") || strings.Contains(body, "TCK-991") {
			t.Fatalf("the saved rule did not redact the next write: %s", body)
		}
		// Ticking the box writes it, and only it.
		on := url.Values{"csrf": {ana.csrf()}, "distill_was": {"false"}, "distill_on_close": {"on"}, "rule_rows": {"1"},
			"name_0": {"ticket"}, "pattern_0": {`TCK-[0-9]+`}, "replacement_0": {"[ticket]"}}
		if status, _ := ana.postForm(base+"/settings", on); status != http.StatusSeeOther {
			t.Fatalf("save: %d", status)
		}
		if cfg, _ := knowledgeConfig(t, d, room); cfg["distillOnClose"] != true || cfg["recallFloor"] != 0.3 {
			t.Fatalf("after ticking: %v", cfg)
		}
		testfix.Exec(t, d, `UPDATE project SET knowledge_config = knowledge_config || '{"distillOnClose": true}'::jsonb WHERE id = $1`, room)
	})

	t.Run("only the host's owners and admins see and save the settings", func(t *testing.T) {
		t.Parallel()
		for _, p := range []*person{mo, gus} {
			if status, _ := p.get(base + "/settings"); status != http.StatusForbidden {
				t.Fatalf("settings page for a member or guest admin: %d", status)
			}
			p.wantPost(t, http.StatusForbidden, "settings save by a member or guest admin", base+"/settings", p.form("distill_was", "true", "rule_rows", "0"))
		}
	})

	t.Run("the thread a lesson cites is shown to the host's people only", func(t *testing.T) {
		t.Parallel()
		qa := s.threadsURL("escalations", "qa-lead")
		var sent struct {
			ThreadID string `json:"threadId"`
		}
		if err := json.Unmarshal([]byte(served(t, threads, architect, "send", map[string]any{"to": []string{"qa-lead"},
			"subject": "Flaky login test", "body": "The login test fails when the clock skews."})), &sent); err != nil {
			t.Fatal(err)
		}
		closed := served(t, qa, s.key("globex/qa-lead"), "close", map[string]any{"threadId": sent.ThreadID,
			"lesson": map[string]any{"title": "Freeze the clock in login tests", "body": "Login tests must freeze the clock.", "kind": "pitfall"}})
		at := strings.Index(closed, "knowledgeId")
		if at < 0 {
			t.Fatalf("the close stored no lesson: %s", closed)
		}
		id := idRe.FindString(closed[at:])
		if _, body := ana.get(base); !strings.Contains(body, base+"/"+id+"/thread") {
			t.Fatalf("no link to the cited thread: %s", body)
		}
		status, body := mo.get(base + "/" + id + "/thread")
		if status != http.StatusOK || !strings.Contains(body, "Flaky login test") || !strings.Contains(body, "fails when the clock skews") {
			t.Fatalf("cited thread for the host's member: %d %s", status, body)
		}
		for _, p := range []*person{gus, ivy} {
			if status, body := p.get(base + "/" + id + "/thread"); status != http.StatusNotFound || strings.Contains(body, "clock skews") {
				t.Fatalf("cited thread for a guest or another company: %d %s", status, body)
			}
		}
	})

	t.Run("another company's person gets 404 on every knowledge page and form", func(t *testing.T) {
		t.Parallel()
		id := learn("Staging resets nightly", "The staging database resets every night at 02:00.")
		token := ivy.csrf()
		for _, path := range []string{base, base + "/settings", base + "/" + id + "/thread"} {
			if status, body := ivy.get(path); status != http.StatusNotFound || strings.Contains(body, "Staging resets") {
				t.Fatalf("GET %s: %d", path, status)
			}
		}
		for _, action := range []string{"approve", "reject", "demote", "expire"} {
			if status, _ := ivy.postForm(base+"/"+id+"/"+action, url.Values{"csrf": {token}, "title": {"Initech was here"}}); status != http.StatusNotFound {
				t.Fatalf("POST %s: %d", action, status)
			}
		}
		if status, _ := ivy.postForm(base+"/settings", url.Values{"csrf": {token}, "distill_was": {"true"}, "rule_rows": {"0"}}); status != http.StatusNotFound {
			t.Fatalf("POST settings: %d", status)
		}
		// An id of another project, inside a room the person may use: Initech's own room.
		other := "/app/rooms/" + s.res.Projects["tps"].ID.String() + "/knowledge/" + id
		for _, action := range []string{"approve", "demote", "expire"} {
			if status, _ := ivy.postForm(other+"/"+action, url.Values{"csrf": {token}}); status != http.StatusNotFound {
				t.Fatalf("POST another project's entry in Initech's room, %s: %d", action, status)
			}
		}
		if status, _ := ivy.get(other + "/thread"); status != http.StatusNotFound {
			t.Fatalf("another project's entry's thread: %d", status)
		}
		if _, body := ana.get(base); !strings.Contains(body, "<h3>Staging resets nightly</h3>") {
			t.Fatalf("the entry changed: %s", body)
		}
	})

	t.Run("every knowledge form refuses a post without the session's CSRF token", func(t *testing.T) {
		t.Parallel()
		id := learn("Backups are encrypted", "Every backup is encrypted with the ops key.")
		for _, path := range []string{base + "/" + id + "/approve", base + "/" + id + "/reject", base + "/settings"} {
			if status, _ := ana.postForm(path, url.Values{"csrf": {gus.csrf()}, "distill_was": {"true"}, "rule_rows": {"0"}}); status != http.StatusForbidden {
				t.Fatalf("POST %s with another session's token: %d", path, status)
			}
		}
		if _, body := ana.get(base); !strings.Contains(body, "<h3>Backups are encrypted</h3>") || strings.Contains(body, "recall returns it") {
			t.Fatalf("a forged post changed the entry: %s", body)
		}
	})
}

func TestDashboardTaskUploadsAndMemoryFilters(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	room, roomURL, architect, qa := s.room, s.roomURL, s.architect, s.qa
	p := s.signIn(t, "ana", "gus", "ivy")
	ana, gus, ivy := p[0], p[1], p[2]
	tasks := "/app/rooms/" + room + "/tasks/"

	t.Run("the host and the sending company attach files; the recipient reads them; others are refused", func(t *testing.T) {
		t.Parallel()
		hostTask := idRe.FindString(served(t, roomURL, architect, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "Check the release notes"}))
		guestTask := idRe.FindString(served(t, roomURL, qa, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "Review the QA plan"}))
		if status, body := ana.upload(tasks+hostTask+"/attachments", ana.csrf(), "notes.txt", []byte("Release 4.2 notes: fixed login.")); status != http.StatusSeeOther {
			t.Fatalf("host upload: %d %s", status, body)
		}
		if got := served(t, roomURL, qa, "get_inbox", map[string]any{}); !strings.Contains(got, `"filename":"notes.txt"`) || !strings.Contains(got, "Release 4.2 notes") {
			t.Fatalf("the recipient does not get the file: %s", got)
		}
		if _, body := ana.get("/app/rooms/" + room + "/tasks"); !strings.Contains(body, ">notes.txt</a>") {
			t.Fatalf("the file is not listed for download: %s", body)
		}
		// The guest sent guestTask: its people attach to it; the host's task is not theirs.
		if status, body := gus.upload(tasks+guestTask+"/attachments", gus.csrf(), "plan.md", []byte("# QA plan")); status != http.StatusSeeOther {
			t.Fatalf("sending company's upload: %d %s", status, body)
		}
		status, body := gus.upload(tasks+hostTask+"/attachments", gus.csrf(), "sneaky.txt", []byte("not mine"))
		if status != http.StatusForbidden || !strings.Contains(body, "Only the company that sent the task") {
			t.Fatalf("a guest attaching to the host's task: %d %s", status, body)
		}
		if status, _ := ivy.upload(tasks+hostTask+"/attachments", ivy.csrf(), "x.txt", []byte("x")); status != http.StatusNotFound {
			t.Fatalf("another company uploading: %d", status)
		}
		for _, token := range []string{"-", gus.csrf()} { // none, and another session's
			if status, _ := ana.upload(tasks+hostTask+"/attachments", token, "forged.txt", []byte("forged")); status != http.StatusForbidden {
				t.Fatalf("upload with token %q: %d", token, status)
			}
		}
		if status, body := ana.upload(tasks+hostTask+"/attachments", ana.csrf(), "", []byte("")); status != http.StatusBadRequest || !strings.Contains(body, `id="file-err-`+hostTask+`"`) {
			t.Fatalf("an upload without a file: %d %s", status, body)
		}
		got := served(t, roomURL, qa, "get_inbox", map[string]any{})
		for _, name := range []string{"sneaky.txt", "forged.txt", "x.txt"} {
			if strings.Contains(got, name) {
				t.Fatalf("a refused upload was stored: %s", got)
			}
		}
	})

	t.Run("the Memory tab's search filters by company, category and tag like read_memory", func(t *testing.T) {
		t.Parallel()
		served(t, roomURL, architect, "write_memory", map[string]any{"content": "Widget pricing is reviewed quarterly by Acme", "category": "pricing", "tags": []string{"widgets"}})
		served(t, roomURL, qa, "write_memory", map[string]any{"content": "Widget pricing tests run nightly at Globex", "category": "qa", "tags": []string{"widgets"}})
		mem := "/app/rooms/" + room + "/memory?q=" + url.QueryEscape("widget pricing")
		_, all := ana.get(mem)
		if !strings.Contains(all, "reviewed quarterly") || !strings.Contains(all, "tests run nightly") {
			t.Fatalf("search: %s", all)
		}
		globex := s.res.Organisations["globex"].ID.String()
		// The host's filter offers every company of the room, not only its own.
		if _, body := ana.get("/app/rooms/" + room + "/memory"); !strings.Contains(body, `<option value="`+globex+`">Globex</option>`) {
			t.Fatalf("the company filter does not offer the guest company: %s", body)
		}
		if _, body := ana.get(mem + "&org_id=" + globex); strings.Contains(body, "reviewed quarterly") || !strings.Contains(body, "tests run nightly") {
			t.Fatalf("company filter: %s", body)
		}
		if _, body := ana.get(mem + "&category=pricing"); !strings.Contains(body, "reviewed quarterly") || strings.Contains(body, "tests run nightly") {
			t.Fatalf("category filter: %s", body)
		}
		if _, body := ana.get(mem + "&tag=nothing-here"); strings.Contains(body, "Widget pricing") {
			t.Fatalf("tag filter: %s", body)
		}
	})

	t.Run("a guest admin never sees another company's private memory", func(t *testing.T) {
		t.Parallel()
		served(t, roomURL, architect, "write_memory", map[string]any{"content": "Acme private margin target is 42 percent", "is_private": true, "category": "finance"})
		for _, path := range []string{"/app/rooms/" + room + "/memory", "/app/rooms/" + room + "/memory?category=finance",
			"/app/rooms/" + room + "/memory?q=" + url.QueryEscape("private margin target"),
			"/app/rooms/" + room + "/memory?q=" + url.QueryEscape("margin target") + "&org_id=" + s.res.Organisations["acme"].ID.String()} {
			if status, body := gus.get(path); status != http.StatusOK || strings.Contains(body, "42 percent") {
				t.Fatalf("GET %s as the guest admin: %d %s", path, status, body)
			}
		}
		if _, body := ana.get("/app/rooms/" + room + "/memory?category=finance"); !strings.Contains(body, "42 percent") {
			t.Fatalf("the host does not see its own private entry: %s", body)
		}
	})
}
