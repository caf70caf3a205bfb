package app_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/testfix"
)

// dashboardFile is the demo (Acme hosts Escalations, Globex is its guest) plus Initech,
// a company with nothing to do with it, hosting a room of its own.
const dashboardFile = signInCast + `agents:
  - {org: acme, slug: architect, name: Architect, model: claude-opus-4, kind: always_on}
  - {org: globex, slug: qa-lead, name: QA Lead, model: gpt-5, kind: session}
  - {org: initech, slug: peter, name: Peter, model: gpt-5}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, access: manager}
      - {agent: globex/qa-lead, part: qa-lead, access: write}
    guests:
      - {org: globex, status: active, grants: [read_memory, write_memory, assign_tasks]}
  - slug: tps
    name: TPS Reports
    host: initech
    members:
      - {agent: initech/peter, part: peter}
`

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// person is a browser-like client signed in to the dashboard.
type person struct {
	t    testing.TB
	base string
	c    *http.Client
}

// signIn signs a person in through the sign-in form, as a browser does.
func signIn(t testing.TB, base, email, password string) *person {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &person{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, body := p.get("/login")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the sign-in page: %s", body)
	}
	status, _ := p.postForm("/login", url.Values{"csrf": {m[1]}, "email": {email}, "password": {password}, "return": {"/app/"}})
	if status != http.StatusSeeOther {
		t.Fatalf("sign in as %s: status %d", email, status)
	}
	return p
}

func (p *person) do(req *http.Request) (int, string, http.Header) {
	p.t.Helper()
	res, err := p.c.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(res.Body).WriteTo(&b); err != nil {
		p.t.Fatal(err)
	}
	return res.StatusCode, b.String(), res.Header
}

func (p *person) get(path string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	status, body, _ := p.do(req)
	return status, body
}

func (p *person) postForm(path string, form url.Values) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.base)
	status, body, _ := p.do(req)
	return status, body
}

// wantPost posts form to path and fails t unless the answer has status want; what names
// the step in the failure.
func (p *person) wantPost(t testing.TB, want int, what, path string, form url.Values) {
	t.Helper()
	if status, _ := p.postForm(path, form); status != want {
		t.Fatalf("%s: %d", what, status)
	}
}

// liveStream opens path's live stream as p and returns its reader once the stream is open
// (its first line: the subscription is in place). It is closed when t ends, and after 20
// seconds at the latest.
func (p *person) liveStream(t *testing.T, path string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	res, err := p.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() }) // a read body: closing it cannot fail in a way that matters
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(res.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return r
}

// nextData reads the stream up to a data line that holds want and returns it; the stream
// ending first fails t, saying what never arrived.
func nextData(t *testing.T, r *bufio.Reader, want, what string) string {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s never arrived: %v", what, err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, want) {
			return line
		}
	}
}

// csrf is the session's form token, read from the home page.
func (p *person) csrf() string {
	p.t.Helper()
	_, body := p.get("/app/")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		p.t.Fatalf("no CSRF token on the home page: %s", body)
	}
	return m[1]
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	room, roomURL, architect, qa := s.room, s.roomURL, s.architect, s.qa
	other := s.res.Projects["tps"].ID.String()
	p := s.signIn(t, "ana", "gus", "ivy", "mo")
	ana, gus, ivy, mo := p[0], p[1], p[2], p[3]

	t.Run("a person who is not signed in is sent to the sign-in page", func(t *testing.T) {
		t.Parallel()
		anon := &person{t: t, base: s.base, c: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		req, _ := http.NewRequest(http.MethodGet, s.base+"/app/rooms/"+room, nil)
		status, _, h := anon.do(req)
		if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login?return=") {
			t.Fatalf("want a redirect to /login, got %d %q", status, h.Get("Location"))
		}
	})

	t.Run("home lists the rooms of the person's company, as host and as guest", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			p          *person
			want, hide string
		}{{ana, "Escalations", "TPS Reports"}, {gus, "Escalations", "TPS Reports"}, {ivy, "TPS Reports", "Escalations"}} {
			status, body := c.p.get("/app/")
			if status != http.StatusOK || !strings.Contains(body, c.want) || strings.Contains(body, c.hide) {
				t.Fatalf("home: %d, want %q without %q:\n%s", status, c.want, c.hide, body)
			}
		}
	})

	t.Run("every page sets a strict content security policy", func(t *testing.T) {
		t.Parallel()
		project := "/app/projects/" + room
		for _, path := range []string{"/app/", "/app/rooms/" + room, "/app/rooms/" + room + "/memory", "/app/rooms/" + room + "/tasks",
			"/app/rooms/" + room + "/knowledge", "/app/rooms/" + room + "/knowledge/settings", project + "/threads", project + "/roster",
			project + "/activity", project + "/usage", project + "/usage.csv", project + "/wakes/" + room, "/app/admin", "/app/admin/agents",
			"/app/admin/projects", "/app/admin/agreements", "/app/admin/people", "/app/admin/clients", "/app/desk/reports",
			"/app/rooms/" + other, "/app/no-such-page", "/app/invite/qyt_iv_nosuchlink"} {
			req, _ := http.NewRequest(http.MethodGet, s.base+path, nil)
			_, _, h := ana.do(req)
			if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
				t.Errorf("GET %s: CSP %q", path, csp)
			}
			// Under no-referrer Chromium posts the page's forms with "Origin: null", which the
			// origin check refuses: nobody could sign in (the browser test shows it).
			if rp := h.Get("Referrer-Policy"); rp != "same-origin" {
				t.Errorf("GET %s: Referrer-Policy %q, want same-origin", path, rp)
			}
		}
	})

	t.Run("another company's person gets 404 for every page and form of the room, and changes nothing", func(t *testing.T) {
		t.Parallel()
		secret := served(t, roomURL, architect, "write_memory", map[string]any{"content": "The escalation runbook lives in vault 7", "tags": []string{"runbook"}})
		id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(secret)
		token := ivy.csrf()
		for _, path := range []string{"/app/rooms/" + room, "/app/rooms/" + room + "/memory", "/app/rooms/" + room + "/events", "/app/rooms/" + room + "/tasks"} {
			status, body := ivy.get(path)
			if status != http.StatusNotFound || strings.Contains(body, "vault 7") || strings.Contains(body, "Escalations") {
				t.Fatalf("GET %s: want 404 without the room's content, got %d %s", path, status, body)
			}
		}
		for _, path := range []string{"/app/rooms/" + room + "/messages", "/app/rooms/" + room + "/memory/" + id + "/deprecate",
			"/app/rooms/" + room + "/tasks/" + id + "/review", "/app/rooms/" + room + "/tasks/" + id + "/cancel"} {
			status, _ := ivy.postForm(path, url.Values{"csrf": {token}, "content": {"from initech"}})
			if status != http.StatusNotFound {
				t.Fatalf("POST %s: want 404, got %d", path, status)
			}
		}
		msgs := served(t, roomURL, architect, "get_messages", map[string]any{"limit": 50})
		if strings.Contains(msgs, "from initech") {
			t.Fatalf("another company's person posted: %s", msgs)
		}
		if got := served(t, roomURL, architect, "read_memory", map[string]any{"query": "escalation runbook vault"}); !strings.Contains(got, "vault 7") {
			t.Fatalf("another company's person deprecated an entry: %s", got)
		}
		// The same 404 as an id that does not exist at all.
		status, missing := ivy.get("/app/rooms/00000000-0000-7000-8000-000000000000")
		status2, theirs := ivy.get("/app/rooms/" + room)
		if status != status2 || missing != theirs {
			t.Fatalf("another company's room answers unlike a missing one: %d vs %d", status, status2)
		}
		// And the other way round: Acme's people see nothing of Initech's room.
		if status, _ := ana.get("/app/rooms/" + other); status != http.StatusNotFound {
			t.Fatalf("Ana on Initech's room: %d", status)
		}
	})

	t.Run("every form refuses a post without the session's CSRF token", func(t *testing.T) {
		t.Parallel()
		text := served(t, roomURL, architect, "write_memory", map[string]any{"content": "Deploys freeze on Fridays at noon"})
		id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(text)
		for _, token := range []string{"", gus.csrf()} { // none, and another session's
			for _, path := range []string{"/app/rooms/" + room + "/messages", "/app/rooms/" + room + "/memory/" + id + "/deprecate", "/app/rooms/" + room + "/tasks/" + id + "/cancel"} {
				status, _ := ana.postForm(path, url.Values{"csrf": {token}, "content": {"no token " + token}})
				if status != http.StatusForbidden {
					t.Fatalf("POST %s with token %q: want 403, got %d", path, token, status)
				}
			}
		}
		if got := served(t, roomURL, architect, "get_messages", map[string]any{"limit": 50}); strings.Contains(got, "no token") {
			t.Fatalf("a post without the token was stored: %s", got)
		}
		if got := served(t, roomURL, architect, "read_memory", map[string]any{"query": "deploys freeze fridays"}); !strings.Contains(got, "Fridays at noon") {
			t.Fatalf("a deprecation without the token was stored: %s", got)
		}
	})

	t.Run("a person's post reaches agents as Name [Organisation] (human)", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			p    *person
			text string
			from string
		}{{ana, "Host here: please look at ticket 41", "Ana [Acme Corp] (human)"}, {gus, "Guest here: ticket 41 reproduced", "Gus [Globex] (human)"}} {
			status, _ := c.p.postForm("/app/rooms/"+room+"/messages", url.Values{"csrf": {c.p.csrf()}, "content": {c.text}})
			if status != http.StatusSeeOther {
				t.Fatalf("post: %d", status)
			}
			got := served(t, roomURL, qa, "get_messages", map[string]any{"limit": 50})
			if !strings.Contains(got, `"from":"`+c.from+`","content":"`+c.text+`"`) {
				t.Fatalf("want %q from %q in get_messages: %s", c.text, c.from, got)
			}
		}
	})

	t.Run("a blank message is refused beside the composer and not stored", func(t *testing.T) {
		t.Parallel()
		status, body := ana.postForm("/app/rooms/"+room+"/messages", url.Values{"csrf": {ana.csrf()}, "content": {"   "}})
		if status != http.StatusBadRequest || !strings.Contains(body, "content must not be blank") {
			t.Fatalf("blank post: %d %s", status, body)
		}
	})

	t.Run("a NUL or invalid UTF-8 in a form or a search is a 400, never an internal error", func(t *testing.T) {
		t.Parallel()
		for _, content := range []string{"nul\x00here", "bad \xff byte"} {
			if status, body := ana.postForm("/app/rooms/"+room+"/messages", url.Values{"csrf": {ana.csrf()}, "content": {content}}); status != http.StatusBadRequest {
				t.Fatalf("post %q: %d %s", content, status, body)
			}
		}
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		anon := &person{t: t, base: ana.base, c: &http.Client{Timeout: 30 * time.Second, Jar: jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		_, page := anon.get("/login")
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token on the sign-in page: %s", page)
		}
		for _, email := range []string{"ana\x00@acme.test", "ana\xff@acme.test"} {
			if status, body := anon.postForm("/login", url.Values{"csrf": {m[1]}, "email": {email}, "password": {"x"}}); status != http.StatusBadRequest {
				t.Fatalf("sign in as %q: %d %.300s", email, status, body)
			}
		}
		for _, q := range []string{"%00", "%FF"} {
			if status, body := ana.get("/app/rooms/" + room + "/memory?q=" + q); status != http.StatusBadRequest {
				t.Fatalf("search %s: %d %.300s", q, status, body)
			}
		}
	})

	t.Run("a deprecated entry leaves read_memory and shows who deprecated it", func(t *testing.T) {
		t.Parallel()
		text := served(t, roomURL, qa, "write_memory", map[string]any{"content": "Staging database password rotates monthly", "category": "ops"})
		id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(text)
		if status, body := ana.get("/app/rooms/" + room + "/memory?q=staging+rotates"); status != http.StatusOK || !strings.Contains(body, "rotates monthly") {
			t.Fatalf("memory search: %d %s", status, body)
		}
		status, _ := ana.postForm("/app/rooms/"+room+"/memory/"+id+"/deprecate", url.Values{"csrf": {ana.csrf()}})
		if status != http.StatusSeeOther {
			t.Fatalf("deprecate: %d", status)
		}
		if got := served(t, roomURL, qa, "read_memory", map[string]any{"query": "staging database password rotates"}); strings.Contains(got, "rotates monthly") {
			t.Fatalf("read_memory still returns the deprecated entry: %s", got)
		}
		_, body := ana.get("/app/rooms/" + room + "/memory?category=ops")
		if !strings.Contains(body, "rotates monthly") || !strings.Contains(body, "Deprecated</span> by Ana") {
			t.Fatalf("the Memory tab does not show the deprecation: %s", body)
		}
		// Deprecated once: a second time answers not found, nothing is deleted.
		ana.wantPost(t, http.StatusNotFound, "second deprecation", "/app/rooms/"+room+"/memory/"+id+"/deprecate", ana.form())
	})

	t.Run("a guest's person cannot deprecate the host's entries", func(t *testing.T) {
		t.Parallel()
		text := served(t, roomURL, architect, "write_memory", map[string]any{"content": "Host decision: pager rotation is weekly"})
		id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(text)
		gus.wantPost(t, http.StatusNotFound, "guest deprecating the host's entry", "/app/rooms/"+room+"/memory/"+id+"/deprecate", gus.form())
		if got := served(t, roomURL, qa, "read_memory", map[string]any{"query": "pager rotation weekly"}); !strings.Contains(got, "rotation is weekly") {
			t.Fatalf("the host's entry was deprecated by a guest: %s", got)
		}
	})

	t.Run("only the host's owners and admins decide knowledge, and an approval makes recall return it", func(t *testing.T) {
		t.Parallel()
		threads := s.threadsURL("escalations", "architect")
		text := served(t, threads, architect, "learn", map[string]any{"title": "Rollbacks need the feature flag off first",
			"body": "Turn the flag off before rolling back the deploy, or the migration reruns.", "kind": "procedure"})
		id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(text)
		path := "/app/rooms/" + room + "/knowledge/" + id + "/approve"
		mo.wantPost(t, http.StatusForbidden, "a member approving", path, mo.form())
		gus.wantPost(t, http.StatusForbidden, "a guest admin approving", path, gus.form())
		ivy.wantPost(t, http.StatusNotFound, "another company approving", path, ivy.form())
		if got := served(t, threads, architect, "recall", map[string]any{"query": "rollback feature flag"}); strings.Contains(got, "Rollbacks need") {
			t.Fatalf("a refused approval made the entry trusted: %s", got)
		}
		if status, body := ana.get("/app/rooms/" + room + "/knowledge"); status != http.StatusOK || !strings.Contains(body, "Approve “Rollbacks need the feature flag off first”") {
			t.Fatalf("review queue: %d %s", status, body)
		}
		ana.wantPost(t, http.StatusSeeOther, "the owner approving", path, ana.form())
		if got := served(t, threads, architect, "recall", map[string]any{"query": "rollback feature flag"}); !strings.Contains(got, "Rollbacks need") {
			t.Fatalf("recall does not return the approved entry: %s", got)
		}
		if _, body := ana.get("/app/rooms/" + room + "/knowledge"); !strings.Contains(body, "approved by person:Ana") || !strings.Contains(body, "Recall hit rate") {
			t.Fatalf("knowledge page after approval: %s", body)
		}
	})

	t.Run("a live stream asked to resume after something that is no id is refused", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/app/rooms/" + room + "/events?after=nope", "/app/projects/" + s.res.Projects["escalations"].ID.String() + "/events?after=nope"} {
			if status, body := ana.get(path); status != http.StatusBadRequest || !strings.Contains(body, "after is not") {
				t.Errorf("%s: %d %s", path, status, body)
			}
		}
	})

	t.Run("the live stream delivers a message committed after a newer one was sent", func(t *testing.T) {
		t.Parallel()
		r := ana.liveStream(t, "/app/rooms/"+room+"/events")
		served(t, roomURL, qa, "post_message", map[string]any{"content": "the newer message, sent first"})
		nextData(t, r, "the newer message, sent first", "the newer message")
		// An agent's message whose id was made 5 s ago, when its transaction started,
		// commits only now (another replica's slow write, say).
		id := uuid.Must(uuid.NewV7())
		ms := uint64(time.Now().Add(-5 * time.Second).UnixMilli())
		for i := range 6 {
			id[i] = byte(ms >> (40 - 8*i))
		}
		testfix.OpAll(t, s.d, testfix.Stmt{SQL: `INSERT INTO room_message (project_id, id, author_agent_id, author_org_id, content)
			VALUES ($1, $2, $3, $4, 'the older message, committed late')`, Args: []any{room, id, s.res.Agents["globex/qa-lead"].ID, s.res.Organisations["globex"].ID}},
			testfix.Stmt{SQL: `SELECT pg_notify($1, $2)`, Args: []any{rooms.RoomChannel, room}})
		nextData(t, r, "the older message, committed late", "the message committed late")
	})

	t.Run("a post is counted as the composer counts it: a line break is one character", func(t *testing.T) {
		t.Parallel()
		// The form sends each line break as CRLF: 3,334 lines of "a" are 6,668
		// characters in the composer, and were refused as 10,002.
		body := strings.Repeat("a\r\n", 3334)
		if status, got := ana.postForm("/app/rooms/"+room+"/messages", url.Values{"csrf": {ana.csrf()}, "content": {body}}); status != http.StatusSeeOther {
			t.Fatalf("post: %d %.300s", status, got)
		}
		n := testfix.Scalar[int](t, s.d, `SELECT count(*) FROM room_message WHERE content = $1`, strings.Repeat("a\n", 3334))
		if n != 1 {
			t.Fatalf("%d messages stored with LF line breaks, want 1", n)
		}
	})

	t.Run("the live stream delivers an agent's message through LISTEN/NOTIFY", func(t *testing.T) {
		t.Parallel()
		r := ana.liveStream(t, "/app/rooms/"+room+"/events")
		served(t, roomURL, qa, "post_message", map[string]any{"content": "live from the guest agent"})
		if line := nextData(t, r, "live from the guest agent", "the message"); !strings.Contains(line, `"from":"QA Lead [Globex] (agent · gpt-5)"`) {
			t.Fatalf("live message: %s", line)
		}
	})
}
