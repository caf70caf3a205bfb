package app_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/relayroom/relayroom/internal/dashboard"
)

// threadsFile: Acme (in Seoul) hosts Escalations with two parts of its own and Globex's
// qa-lead, an active guest; Initech hosts a project of its own and has nothing to do with
// Escalations. The architect may flag threads for people.
const threadsFile = `
organisations:
  - {slug: acme, name: Acme Corp, timezone: Asia/Seoul}
  - {slug: globex, name: Globex}
  - {slug: initech, name: Initech}
` + signInPeople + `agents:
  - {org: acme, slug: architect, name: Architect, model: claude-opus-4, kind: always_on}
  - {org: acme, slug: backend, name: Backend, model: claude-sonnet-4, kind: always_on}
  - {org: globex, slug: qa-lead, name: QA Lead, model: gpt-5, kind: session}
  - {org: initech, slug: peter, name: Peter, model: gpt-5}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, access: manager, capabilities: [needsHuman]}
      - {agent: acme/backend, part: backend, access: write}
      - {agent: globex/qa-lead, part: qa-lead, access: write}
    guests:
      - {org: globex, status: active, grants: [read_memory, write_memory]}
  - slug: tps
    name: TPS Reports
    host: initech
    members:
      - {agent: initech/peter, part: peter}
`

var (
	threadIDField  = regexp.MustCompile(`"threadId":"([0-9a-f-]{36})"`)
	messageIDField = regexp.MustCompile(`"messageId":"([0-9a-f-]{36})"`)
)

func TestDashboardThreads(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, threadsFile, nil)
	project := s.res.Projects["escalations"].ID.String()
	pages := "/app/projects/" + project
	architect, backend, qa := s.key("acme/architect"), s.key("acme/backend"), s.key("globex/qa-lead")
	asArchitect, asBackend, asQA := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend"), s.threadsURL("escalations", "qa-lead")
	send := func(url, key string, to []string, subject, body string, needsHuman bool) string {
		t.Helper()
		args := map[string]any{"to": to, "subject": subject, "body": body}
		if needsHuman {
			args["needsHuman"] = true
		}
		return threadIDField.FindStringSubmatch(served(t, url, key, "send", args))[1]
	}
	hostOnly := send(asArchitect, architect, []string{"backend"}, "Host-only rollout plan", "Backend: the rollout plan is in the vault", false)
	flagged := send(asArchitect, architect, []string{"qa-lead"}, "Flaky login test", "QA: the login test fails one run in ten", true)
	closed := send(asBackend, backend, []string{"architect"}, "Closed topic", "Done already", false)
	served(t, asBackend, backend, "close", map[string]any{"threadId": closed})

	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	mo := signIn(t, s.base, "mo@acme.test", "demo-password-mo")
	gus := signIn(t, s.base, "gus@globex.test", "demo-password-gus")
	ivy := signIn(t, s.base, "ivy@initech.test", "demo-password-ivy")

	list := func(p *person, query string) string {
		t.Helper()
		status, body := p.get(pages + "/threads" + query)
		if status != http.StatusOK {
			t.Fatalf("threads%s: %d %s", query, status, body)
		}
		return body
	}

	t.Run("another company's person gets 404 on every page, stream and form of the project, the same as a missing id", func(t *testing.T) {
		t.Parallel()
		token := ivy.csrf()
		for _, path := range []string{pages, pages + "/threads", pages + "/threads/" + flagged, pages + "/roster", pages + "/activity",
			pages + "/events", pages + "/events?thread=" + flagged, pages + "/usage", pages + "/usage.csv"} {
			status, body := ivy.get(path)
			if status != http.StatusNotFound || strings.Contains(body, "Escalations") || strings.Contains(body, "Flaky") {
				t.Fatalf("GET %s: want 404 without the project's content, got %d %s", path, status, body)
			}
		}
		if status, _ := ivy.postForm(pages+"/threads/"+flagged+"/cancel", url.Values{"csrf": {token}}); status != http.StatusNotFound {
			t.Fatalf("another company's cancel: %d", status)
		}
		status, missing := ivy.get("/app/projects/00000000-0000-7000-8000-000000000000/threads")
		status2, theirs := ivy.get(pages + "/threads")
		if status != status2 || missing != theirs {
			t.Fatalf("another company's project answers unlike a missing one: %d vs %d", status, status2)
		}
		// A thread id of another project inside one's own project is no thread either.
		if status, _ := ana.get("/app/projects/" + s.res.Projects["tps"].ID.String() + "/threads"); status != http.StatusNotFound {
			t.Fatalf("Ana on Initech's project: %d", status)
		}
		if status, _ := ana.get(pages + "/threads/00000000-0000-7000-8000-000000000000"); status != http.StatusNotFound {
			t.Fatalf("a missing thread: %d", status)
		}
	})

	t.Run("the thread list filters by status, part and the needsHuman flag", func(t *testing.T) {
		t.Parallel()
		all := list(ana, "")
		for _, want := range []string{"Host-only rollout plan", "Flaky login test", "Closed topic", "needs a person"} {
			if !strings.Contains(all, want) {
				t.Fatalf("the host's list lacks %q: %s", want, all)
			}
		}
		for _, c := range []struct{ query, want, hide string }{
			{"?status=closed", "Closed topic", "Flaky login test"},
			{"?status=open", "Flaky login test", "Closed topic"},
			{"?part=qa-lead", "Flaky login test", "Host-only rollout plan"},
			{"?part=backend", "Host-only rollout plan", "Flaky login test"},
			{"?flagged=1", "Flaky login test", "Host-only rollout plan"},
		} {
			body := list(ana, c.query)
			if !strings.Contains(body, c.want) || strings.Contains(body, c.hide) {
				t.Fatalf("threads%s: want %q without %q: %s", c.query, c.want, c.hide, body)
			}
		}
		if status, body := ana.get(pages + "/threads?status=lost"); status != http.StatusBadRequest || !strings.Contains(body, "Choose a status") {
			t.Fatalf("an unknown status: %d %s", status, body)
		}
	})

	t.Run("a guest's people see only the threads its parts take part in", func(t *testing.T) {
		t.Parallel()
		body := list(gus, "")
		if !strings.Contains(body, "Flaky login test") || strings.Contains(body, "Host-only") || strings.Contains(body, "Closed topic") {
			t.Fatalf("the guest's list: %s", body)
		}
		if status, body := gus.get(pages + "/threads/" + hostOnly); status != http.StatusNotFound || strings.Contains(body, "vault") {
			t.Fatalf("a guest opening the host's thread: %d %s", status, body)
		}
		gus.wantPost(t, http.StatusNotFound, "a guest canceling the host's thread", pages+"/threads/"+hostOnly+"/cancel", gus.form())
		if got := served(t, asBackend, backend, "show", map[string]any{"threadId": hostOnly}); !strings.Contains(got, `"status":"open"`) {
			t.Fatalf("the guest's refused cancel changed the thread: %s", got)
		}
		if status, body := gus.get(pages + "/threads/" + flagged); status != http.StatusOK || !strings.Contains(body, "the login test fails") {
			t.Fatalf("the guest's own thread: %d %s", status, body)
		}
	})

	t.Run("the thread view shows who read each message", func(t *testing.T) {
		t.Parallel()
		thread := send(asArchitect, architect, []string{"qa-lead", "backend"}, "Read receipts", "Who reads this first?", false)
		_, body := ana.get(pages + "/threads/" + thread)
		if !strings.Contains(body, "qa-lead: unread") || !strings.Contains(body, "backend: unread") || !strings.Contains(body, "Who reads this first?") {
			t.Fatalf("before any ack: %s", body)
		}
		inbox := served(t, asQA, qa, "inbox", map[string]any{"limit": 50})
		var mid string
		for _, line := range strings.Split(inbox, "},{") {
			if strings.Contains(line, thread) {
				mid = messageIDField.FindStringSubmatch(line)[1]
			}
		}
		served(t, asQA, qa, "ack", map[string]any{"messageId": mid})
		_, body = ana.get(pages + "/threads/" + thread)
		if !regexp.MustCompile(`qa-lead: read <time`).MatchString(body) || !strings.Contains(body, "backend: unread") {
			t.Fatalf("after qa-lead's ack: %s", body)
		}
	})

	t.Run("a person cancels a thread: agents are told it was canceled and the feed says who", func(t *testing.T) {
		t.Parallel()
		thread := send(asArchitect, architect, []string{"qa-lead"}, "Cancel me", "This one goes nowhere", false)
		if status, _ := ana.postForm(pages+"/threads/"+thread+"/cancel", url.Values{"csrf": {""}}); status != http.StatusForbidden {
			t.Fatalf("a cancel without the CSRF token: %d", status)
		}
		if got := served(t, asQA, qa, "show", map[string]any{"threadId": thread}); !strings.Contains(got, `"status":"open"`) {
			t.Fatalf("a refused cancel changed the thread: %s", got)
		}
		status, _ := mo.postForm(pages+"/threads/"+thread+"/cancel", url.Values{"csrf": {mo.csrf()}})
		if status != http.StatusSeeOther {
			t.Fatalf("cancel: %d", status)
		}
		if code, _ := toolError(t, asQA, qa, "reply", map[string]any{"threadId": thread, "body": "still there?"}); code != "thread_canceled" {
			t.Fatalf("a reply to the canceled thread: %s", code)
		}
		if got := served(t, asArchitect, architect, "close", map[string]any{"threadId": thread}); !strings.Contains(got, `"status":"canceled"`) {
			t.Fatalf("close of the canceled thread: %s", got)
		}
		if got := served(t, asQA, qa, "inbox", map[string]any{"limit": 50}); strings.Contains(got, thread) {
			t.Fatalf("the canceled thread is still in an inbox: %s", got)
		}
		_, body := ana.get(pages + "/threads/" + thread)
		if !strings.Contains(body, `state-canceled">canceled`) || strings.Contains(body, `id="cancel-thread"`) || !strings.Contains(body, "by a person (cancel)") {
			t.Fatalf("the canceled thread's page: %s", body)
		}
		_, body = ana.get(pages + "/activity")
		if !strings.Contains(body, "thread.canceled") || !strings.Contains(body, "Mo [Acme Corp] (human)") || !strings.Contains(body, thread) {
			t.Fatalf("the activity feed does not record the cancel: %s", body)
		}
		if status, body := ana.postForm(pages+"/threads/"+closed+"/cancel", url.Values{"csrf": {ana.csrf()}}); status != http.StatusConflict || !strings.Contains(body, "already closed") {
			t.Fatalf("canceling a closed thread: %d %s", status, body)
		}
	})

	t.Run("the roster shows who is online and the amber limited badge in the viewer's timezone", func(t *testing.T) {
		t.Parallel()
		reset := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Minute)
		served(t, asBackend, backend, "event", map[string]any{"type": "limited", "detail": map[string]any{"resetAt": reset.Format(time.RFC3339)}})
		seoul, err := time.LoadLocation("Asia/Seoul")
		if err != nil {
			t.Fatal(err)
		}
		_, body := ana.get(pages + "/roster")
		if !strings.Contains(body, "limited until "+reset.In(seoul).Format("15:04")) || !strings.Contains(body, `badge online">online`) {
			t.Fatalf("Ana's roster (Seoul), want limited until %s: %s", reset.In(seoul).Format("15:04"), body)
		}
		if _, body := gus.get(pages + "/roster"); !strings.Contains(body, "limited until "+reset.Format("15:04")) {
			t.Fatalf("Gus's roster (UTC), want limited until %s: %s", reset.Format("15:04"), body)
		}
	})

	t.Run("the activity feed shows events; a guest sees only its own parts'", func(t *testing.T) {
		t.Parallel()
		served(t, asBackend, backend, "event", map[string]any{"type": "deploy", "detail": map[string]any{"service": "billing-api"}})
		served(t, asQA, qa, "event", map[string]any{"type": "test.run", "detail": map[string]any{"suite": "login-e2e"}})
		_, body := ana.get(pages + "/activity")
		if !strings.Contains(body, "billing-api") || !strings.Contains(body, "login-e2e") || !strings.Contains(body, "backend [Acme Corp]") {
			t.Fatalf("the host's feed: %s", body)
		}
		_, body = gus.get(pages + "/activity")
		if strings.Contains(body, "billing-api") || !strings.Contains(body, "login-e2e") {
			t.Fatalf("the guest's feed: %s", body)
		}
	})

	t.Run("usage sums by model and part, as charts, tables and CSV", func(t *testing.T) {
		t.Parallel()
		use := map[string]any{"model": "claude-opus-4", "input_tokens": 1000, "output_tokens": 200, "cache_tokens": 50, "cost_usd": 0.5}
		served(t, asArchitect, architect, "event", map[string]any{"type": "work", "usage": use})
		served(t, asArchitect, architect, "event", map[string]any{"type": "work", "usage": use})
		served(t, asQA, qa, "event", map[string]any{"type": "work", "usage": map[string]any{"model": "gpt-5", "input_tokens": 10, "output_tokens": 20, "cost_usd": 0.01}})
		day := time.Now().UTC().Format(time.DateOnly)
		status, body := ana.get(pages + "/usage?days=7")
		if status != http.StatusOK || strings.Count(body, `<svg class="chart" viewBox`) != 4 {
			t.Fatalf("usage page: %d %s", status, body)
		}
		// Today's row of the tokens-by-model table: claude-opus-4 2500, gpt-5 30, total 2530.
		if !strings.Contains(body, `<th scope="row">`+day+`</th><td>2500</td><td>30</td><td>2530</td>`) ||
			!strings.Contains(body, `<td>$1.0000</td><td>$0.0100</td><td>$1.0100</td>`) {
			t.Fatalf("usage tables: %s", body)
		}
		req, _ := http.NewRequest(http.MethodGet, s.base+pages+"/usage.csv?days=7", nil)
		status, csv, h := ana.do(req)
		if status != http.StatusOK || h.Get("Content-Type") != "text/csv; charset=utf-8" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
			t.Fatalf("csv: %d %v", status, h)
		}
		want := "day,part,model,events,input_tokens,output_tokens,cache_tokens,cost_usd\n" +
			day + ",architect,claude-opus-4,2,2000,400,100,1.000000\n" +
			day + ",qa-lead,gpt-5,1,10,20,0,0.010000\n"
		if csv != want {
			t.Fatalf("csv:\n%s\nwant:\n%s", csv, want)
		}
		req, _ = http.NewRequest(http.MethodGet, s.base+pages+"/usage.csv?days=7", nil)
		if _, csv, _ := gus.do(req); strings.Contains(csv, "architect") || !strings.Contains(csv, "qa-lead,gpt-5") {
			t.Fatalf("the guest's csv: %s", csv)
		}
		if status, _ := ana.get(pages + "/usage?days=400"); status != http.StatusBadRequest {
			t.Fatalf("a period beyond the limit: %d", status)
		}
	})

	t.Run("the thread stream lights up a composing part through LISTEN/NOTIFY", func(t *testing.T) {
		t.Parallel()
		r := ana.liveStream(t, pages+"/events?thread="+flagged)
		served(t, asQA, qa, "event", map[string]any{"type": "composing", "detail": map[string]any{"threadId": flagged}})
		nextData(t, r, `"composing":["qa-lead"]`, "the composing part")
	})

	t.Run("a burst of replies reaches a thread stream in one event a second", func(t *testing.T) {
		t.Parallel()
		// Each reply made each watching stream read and send the whole thread (up to 1 MiB
		// each): 16 streams took 337 MB for 20 two-byte replies.
		burst := threadIDField.FindStringSubmatch(served(t, asBackend, backend, "send", map[string]any{"to": []string{"architect"}, "subject": "Paced burst", "body": "first"}))[1]
		r := ana.liveStream(t, pages+"/events?thread="+burst)
		states := make(chan string, 64)
		go func() {
			defer close(states)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.HasPrefix(line, "data: ") {
					states <- line
				}
			}
		}()
		<-states // the state when the page opened
		began := time.Now()
		const replies = 10
		for i := range replies {
			// Apart, as agents reply: replies at once were already announced together.
			time.Sleep(150 * time.Millisecond)
			served(t, asArchitect, architect, "reply", map[string]any{"threadId": burst, "body": fmt.Sprintf("burst reply %d", i)})
		}
		took := time.Since(began)
		sent := 0
		for line := range states {
			sent++
			if strings.Contains(line, fmt.Sprintf("burst reply %d", replies-1)) {
				break
			}
		}
		// Sends are at least dashboard.StreamPushEvery apart: over the replies and the one
		// wait that may follow them, no more than one a second, and one more at the start.
		if most := int(took/dashboard.StreamPushEvery) + 2; sent > most {
			t.Fatalf("%d replies in %v reached the stream in %d events, want at most %d", replies, took, sent, most)
		}
	})

	t.Run("a thread stream sends what changed, not the thread again", func(t *testing.T) {
		t.Parallel()
		// Each change sent the whole page of messages again: 16 streams of a 1 MB thread
		// sent 16 MB for each two-byte reply.
		id := threadIDField.FindStringSubmatch(served(t, asBackend, backend, "send", map[string]any{"to": []string{"architect"}, "subject": "Only the changes", "body": "the opening message"}))[1]
		r := ana.liveStream(t, pages+"/events?thread="+id)
		nextData(t, r, "the opening message", "the state when the page opened")
		served(t, asArchitect, architect, "reply", map[string]any{"threadId": id, "body": "reply one"})
		nextData(t, r, "reply one", "the first reply")
		served(t, asArchitect, architect, "reply", map[string]any{"threadId": id, "body": "reply two"})
		if line := nextData(t, r, "reply two", "the second reply"); strings.Contains(line, "reply one") || strings.Contains(line, "the opening message") {
			t.Fatalf("the second reply's event sent unchanged messages again: %s", line)
		}
		served(t, asArchitect, architect, "event", map[string]any{"type": "composing", "detail": map[string]any{"threadId": id}})
		if line := nextData(t, r, `"composing":["architect"]`, "the composing part"); !strings.Contains(line, `"messages":[]`) {
			t.Fatalf("a change of who is composing sent messages: %s", line)
		}
	})

	t.Run("the activity stream delivers a new event through LISTEN/NOTIFY", func(t *testing.T) {
		t.Parallel()
		r := gus.liveStream(t, pages+"/events?after="+uuid.Must(uuid.NewV7()).String()) // after every event so far
		served(t, asQA, qa, "event", map[string]any{"type": "review.done", "detail": map[string]any{"pr": "live-1234"}})
		if line := nextData(t, r, "live-1234", "the event"); !strings.Contains(line, `"type":"review.done"`) || !strings.Contains(line, `"part":"qa-lead"`) {
			t.Fatalf("live event: %s", line)
		}
	})

	t.Run("the activity stream delivers an event committed after a newer one was sent", func(t *testing.T) {
		t.Parallel()
		// An event's id is made before its transaction commits: "late" is older than
		// "first", but commits after "first" was sent.
		start := uuid.Must(uuid.NewV7())
		late := uuid.Must(uuid.NewV7())
		r := ana.liveStream(t, pages+"/events?after="+start.String())
		served(t, asQA, qa, "event", map[string]any{"type": "review.first", "detail": map[string]any{"pr": "first-5678"}})
		nextData(t, r, "first-5678", "the first event")
		ownerExec(t, s, `INSERT INTO activity_event (project_id, id, type, detail, created_at)
			VALUES ($1, $2, 'review.late', '{"pr":"late-9012"}', now())`, uuid.MustParse(project), late)
		// The next event wakes the stream, which must also send the late one.
		served(t, asQA, qa, "event", map[string]any{"type": "review.second", "detail": map[string]any{"pr": "second-3456"}})
		nextData(t, r, "late-9012", "the event committed late")
	})

	t.Run("home links to each project's thread pages", func(t *testing.T) {
		t.Parallel()
		_, body := ana.get("/app/")
		if !strings.Contains(body, `href="`+pages+`/threads"`) || !strings.Contains(body, `href="`+pages+`/usage"`) {
			t.Fatalf("home: %s", body)
		}
		// The flagged thread under "Needs you" opens its thread view.
		if !strings.Contains(body, `<a href="`+pages+`/threads/`+flagged+`">Thread flagged for people</a>`) {
			t.Fatalf("home's needs-you link to the flagged thread: %s", body)
		}
	})
}
