package app_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/testfix"
)

// dashboardDeskFile is a desk workspace with people who sign in: Acme (Ana owner, Mo and
// Bo members; Billing restricted to Bo, with a forwarding address that no page shows) and
// Globex, whose inbox_3 and reply_8 have no counterpart in Acme (whose tests below make
// three replies beside its one: a number Acme reaches is no other workspace's alone).
const dashboardDeskFile = deskCompanies + `users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner, password: "demo-password-ana"}
  - {email: mo@acme.test, name: Mo, org: acme, role: member, password: "demo-password-mo"}
  - {email: bo@acme.test, name: Bo, org: acme, role: member, password: "demo-password-bo"}
  - {email: gus@globex.test, name: Gus, org: globex, role: owner, password: "demo-password-gus"}
desk:
  - workspace: acme
    inboxes:
      - {slug: support, name: Support}
      - {slug: billing, name: Billing, members: [bo@acme.test], forwarding_address: billing-fwd@acme.test}
    saved_replies:
      - {slug: csv-import, title: CSV import requirements, body: "Use a UTF-8 CSV."}
  - workspace: globex
    inboxes:
      - {slug: support, name: Support}
      - {slug: sales, name: Sales}
      - {slug: vip, name: VIP}
    saved_replies:
      - {slug: a, title: Globex A, body: "a"}
      - {slug: b, title: Globex B, body: "b"}
      - {slug: c, title: Globex C, body: "c"}
      - {slug: d, title: Globex D, body: "d"}
      - {slug: e, title: Globex E, body: "e"}
      - {slug: f, title: Globex F, body: "f"}
      - {slug: g, title: Globex G, body: "g"}
      - {slug: h, title: Globex H, body: "h"}
`

// deskImportGood and deskImportBad are import files; the bad one's line 3 has no email.
const (
	deskImportGood = "customer_email,subject,body,created_at,status\n" +
		"kim@customer.test,Export to PDF,How do I export?,2026-11-06T17:00:00Z,open\n" +
		"lee@customer.test,Refund,Please refund seat 3.,2026-11-07T09:30:00Z,resolved\n"
	deskImportBad = "customer_email,subject,body,created_at,status\n" +
		"kim@customer.test,Export to PDF,How do I export?,2026-11-06T17:00:00Z,open\n" +
		"not-an-email,Refund,Please refund seat 3.,2026-11-07T09:30:00Z,resolved\n"
)

var importDataField = regexp.MustCompile(`name="data" value="([^"]*)"`)

// postMultipart posts fields in order (as a browser does, the CSRF field first) and, when
// fileName is not empty, the file field after them.
func (p *person) postMultipart(path string, fields [][2]string, fileName, file string) (int, string) {
	p.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			p.t.Fatal(err)
		}
	}
	if fileName != "" {
		fw, err := mw.CreateFormFile("file", fileName)
		if err != nil {
			p.t.Fatal(err)
		}
		if _, err := fw.Write([]byte(file)); err != nil {
			p.t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		p.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, p.base+path, &b)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", p.base)
	status, body, _ := p.do(req)
	return status, body
}

// form is a posted form with the session's CSRF token and the pairs kv (name, value, …).
func (p *person) form(kv ...string) url.Values {
	v := url.Values{"csrf": {p.csrf()}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

// TestDashboardDesk drives the desk's inboxes, saved replies and CSV import pages as
// Acme's owner Ana and members Mo and Bo, on a real server and database.
func TestDashboardDesk(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: dashboardDeskFile})
	d := openSeeded(t, s)
	acme := s.res.Organisations["acme"].ID
	count := func(t *testing.T, sql string, args ...any) int {
		t.Helper()
		return testfix.Scalar[int](t, d, sql, args...)
	}
	userID := func(email string) string {
		return testfix.Scalar[string](t, d, `SELECT id::text FROM app_user WHERE email = $1`, email)
	}
	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	mo := signIn(t, s.base, "mo@acme.test", "demo-password-mo")
	bo := signIn(t, s.base, "bo@acme.test", "demo-password-bo")
	must := func(t *testing.T, status, want int, body string) {
		t.Helper()
		if status != want {
			t.Fatalf("status %d, want %d: %s", status, want, body)
		}
	}
	contains := func(t *testing.T, body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Fatalf("the page lacks %q: %s", w, body)
			}
		}
	}

	// Before the parallel ones, which change who sees Support.
	t.Run("each person sees the inboxes they may see, never a forwarding address", func(t *testing.T) {
		_, page := mo.get("/app/desk/inboxes")
		contains(t, page, "Support")
		if strings.Contains(page, "Billing") {
			t.Fatalf("a member not listed sees the restricted inbox: %s", page)
		}
		if status, _ := mo.get("/app/desk/inboxes/inbox_2"); status != http.StatusNotFound {
			t.Fatalf("a member opened a restricted inbox that does not list them: %d", status)
		}
		_, page = bo.get("/app/desk/inboxes")
		contains(t, page, "Billing", "Restricted")
		for _, path := range []string{"/app/desk/inboxes", "/app/desk/inboxes/inbox_2"} {
			status, page := ana.get(path)
			must(t, status, http.StatusOK, page)
			contains(t, page, "Billing", "Restricted to Bo")
			if strings.Contains(page, "billing-fwd") {
				t.Fatalf("%s shows the forwarding address: %s", path, page)
			}
		}
	})

	t.Run("inbox visibility: members refused, owners restrict and open it, audited", func(t *testing.T) {
		t.Parallel()
		members := `SELECT count(*) FROM desk_inbox_member WHERE org_id = $1`
		before := count(t, members, acme)
		status, body := mo.postForm("/app/desk/inboxes/inbox_1/access", mo.form("visibility", "restricted", "members", userID("mo@acme.test")))
		must(t, status, http.StatusForbidden, body)
		status, body = ana.postForm("/app/desk/inboxes/inbox_1/access", ana.form("visibility", "restricted"))
		must(t, status, http.StatusBadRequest, body)
		contains(t, body, `id="members-error"`, "at least one member", "nothing was saved")
		if count(t, members, acme) != before || count(t, `SELECT count(*) FROM desk_inbox WHERE org_id = $1 AND restricted`, acme) != 1 {
			t.Fatal("a refused change was stored")
		}
		status, body = ana.postForm("/app/desk/inboxes/inbox_1/access", ana.form("visibility", "restricted", "members", userID("bo@acme.test")))
		must(t, status, http.StatusSeeOther, body)
		if status, _ := mo.get("/app/desk/inboxes/inbox_1"); status != http.StatusNotFound {
			t.Fatalf("Mo still sees Support once it is restricted to Bo: %d", status)
		}
		_, page := ana.get("/app/desk/inboxes/inbox_1")
		contains(t, page, "<td>access_changed</td>", "Bo (and owners and admins)", "<td>Ana [Acme]</td>")
		status, body = ana.postForm("/app/desk/inboxes/inbox_1/access", ana.form("visibility", "everyone"))
		must(t, status, http.StatusSeeOther, body)
		status, page = mo.get("/app/desk/inboxes/inbox_1")
		must(t, status, http.StatusOK, page)
		if strings.Contains(page, "access_changed") || strings.Contains(page, "Bo (and owners") {
			t.Fatalf("a member reads whom the inbox was restricted to in its history: %s", page)
		}
	})

	t.Run("saved replies: bounds beside the field, nothing half-saved, created and edited with their history", func(t *testing.T) {
		t.Parallel()
		replies := `SELECT count(*) FROM desk_saved_reply WHERE org_id = $1`
		before := count(t, replies, acme)
		status, body := mo.postForm("/app/desk/replies", mo.form("title", "Mine", "body", "text"))
		must(t, status, http.StatusForbidden, body)
		status, body = ana.postForm("/app/desk/replies", ana.form("title", strings.Repeat("t", 201), "body", "kept body"))
		must(t, status, http.StatusBadRequest, body)
		contains(t, body, `id="title-error"`, "1 to 200 characters", "kept body")
		if count(t, replies, acme) != before {
			t.Fatal("a refused reply was stored")
		}
		req, err := http.NewRequest(http.MethodPost, s.base+"/app/desk/replies", strings.NewReader(ana.form("title", "Shipping times", "body", "Orders ship in 2 days.").Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.base)
		status, _, hdr := ana.do(req)
		must(t, status, http.StatusSeeOther, "")
		loc, _, _ := strings.Cut(hdr.Get("Location"), "?")
		if !strings.HasPrefix(loc, "/app/desk/replies/reply_") {
			t.Fatalf("created reply's address: %q", hdr.Get("Location"))
		}
		status, body = ana.postForm(loc, ana.form("title", "Shipping", "body", "  "))
		must(t, status, http.StatusBadRequest, body)
		contains(t, body, `id="body-error"`)
		if count(t, `SELECT count(*) FROM desk_saved_reply WHERE org_id = $1 AND title = 'Shipping times' AND body = 'Orders ship in 2 days.'`, acme) != 1 {
			t.Fatal("a refused edit changed the reply")
		}
		status, body = mo.postForm(loc, mo.form("title", "Shipping", "body", "Mo's"))
		must(t, status, http.StatusForbidden, body)
		status, body = ana.postForm(loc, ana.form("title", "Shipping", "body", "Orders ship in 3 days."))
		must(t, status, http.StatusSeeOther, body)
		_, page := ana.get(loc)
		contains(t, page, "Orders ship in 3 days.", "<td>created</td>", "<td>edited</td>", "title: Shipping")
		_, page = mo.get("/app/desk/replies")
		contains(t, page, "Shipping", "CSV import requirements")
		if strings.Contains(page, `id="new-reply"`) {
			t.Fatal("a member is offered the form that creates replies")
		}
	})

	// A form is URL-encoded: a character of three UTF-8 bytes is nine bytes sent, so a
	// body at the bound in Chinese was 180,000 bytes, past the 128 KiB form limit, and
	// was refused as "The form could not be read." instead of saved.
	t.Run("saved replies: a body at the bound in any script is saved, one past it refused beside the field", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			char string
			n    int
			want int
		}{{"語", desk.MaxSavedReplyBody, http.StatusSeeOther}, {"😀", desk.MaxSavedReplyBody, http.StatusSeeOther}, {"語", desk.MaxSavedReplyBody + 1, http.StatusBadRequest}} {
			status, body := ana.postForm("/app/desk/replies", ana.form("title", fmt.Sprintf("%d of %s", c.n, c.char), "body", strings.Repeat(c.char, c.n)))
			if status != c.want || (c.want == http.StatusBadRequest && !strings.Contains(body, `id="body-error"`)) {
				t.Fatalf("%d × %s: status %d, want %d: %.300s", c.n, c.char, status, c.want, body)
			}
		}
	})

	t.Run("another workspace's ids answer 404 like absent ones", func(t *testing.T) {
		t.Parallel()
		if n := count(t, `SELECT count(*) FROM desk_saved_reply WHERE org_id = $1`, s.res.Organisations["globex"].ID); n != 8 {
			t.Fatalf("Globex holds %d saved replies: reply_8 is not its own", n)
		}
		for _, path := range []string{"/app/desk/inboxes/inbox_3", "/app/desk/inboxes/inbox_99", "/app/desk/inboxes/inbox_x", "/app/desk/replies/reply_8", "/app/desk/replies/reply_99"} {
			if status, body := ana.get(path); status != http.StatusNotFound {
				t.Errorf("GET %s: %d %s", path, status, body)
			}
		}
		if status, _ := ana.postForm("/app/desk/inboxes/inbox_3/access", ana.form("visibility", "everyone")); status != http.StatusNotFound {
			t.Errorf("POST another workspace's inbox access: %d", status)
		}
		if status, _ := ana.postForm("/app/desk/replies/reply_8", ana.form("title", "x", "body", "y")); status != http.StatusNotFound {
			t.Errorf("POST another workspace's reply: %d", status)
		}
		if status, _ := ana.postMultipart("/app/desk/import/preview", [][2]string{{"csrf", ana.csrf()}, {"inbox", "inbox_3"}}, "a.csv", deskImportGood); status != http.StatusNotFound {
			t.Errorf("import into another workspace's inbox: %d", status)
		}
		if count(t, `SELECT count(*) FROM desk_saved_reply WHERE title = 'x'`) != 0 {
			t.Fatal("another workspace's reply was changed")
		}
	})

	t.Run("a deactivated owner is refused on every desk page, reports included", func(t *testing.T) {
		t.Parallel()
		gus := signIn(t, s.base, "gus@globex.test", "demo-password-gus")
		pages := []string{"/app/desk/reports", "/app/desk/inboxes", "/app/desk/replies", "/app/desk/import"}
		for _, path := range pages {
			status, body := gus.get(path)
			must(t, status, http.StatusOK, body)
		}
		count(t, `UPDATE org_member SET deactivated_at = now() WHERE org_id = $1 AND user_id = $2 RETURNING 1`,
			s.res.Organisations["globex"].ID, userID("gus@globex.test"))
		for _, path := range pages {
			status, body := gus.get(path)
			must(t, status, http.StatusForbidden, body)
			contains(t, body, "no longer an active member")
		}
	})

	t.Run("CSRF: every form refused without the session's token", func(t *testing.T) {
		t.Parallel()
		for path, f := range map[string]url.Values{
			"/app/desk/inboxes/inbox_2/access": {"visibility": {"everyone"}},
			"/app/desk/replies":                {"title": {"x"}, "body": {"y"}},
			"/app/desk/replies/reply_1":        {"title": {"x"}, "body": {"y"}},
		} {
			if status, _ := ana.postForm(path, f); status != http.StatusForbidden {
				t.Errorf("POST %s without a token: %d", path, status)
			}
			f.Set("csrf", mo.csrf())
			if status, _ := ana.postForm(path, f); status != http.StatusForbidden {
				t.Errorf("POST %s with another session's token: %d", path, status)
			}
		}
		for _, path := range []string{"/app/desk/import/preview", "/app/desk/import/run"} {
			if status, _ := ana.postMultipart(path, [][2]string{{"inbox", "inbox_1"}}, "a.csv", deskImportGood); status != http.StatusForbidden {
				t.Errorf("POST %s without a token: %d", path, status)
			}
			if status, _ := ana.postMultipart(path, [][2]string{{"csrf", mo.csrf()}, {"inbox", "inbox_1"}}, "a.csv", deskImportGood); status != http.StatusForbidden {
				t.Errorf("POST %s with another session's token: %d", path, status)
			}
		}
		if count(t, `SELECT count(*) FROM desk_saved_reply WHERE title = 'x'`)+count(t, `SELECT count(*) FROM desk_inbox WHERE org_id = $1 AND NOT restricted AND slug = 'billing'`, acme) != 0 {
			t.Fatal("a form without its token changed something")
		}
	})

	t.Run("CSV import: preview by line, nothing from a bad file, a good one once, audited", func(t *testing.T) {
		t.Parallel()
		convs := `SELECT count(*) FROM desk_conversation WHERE org_id = $1 AND inbox_id = 2` // Billing: the next import goes to Support
		before := count(t, convs, acme)
		status, body := mo.postMultipart("/app/desk/import/preview", [][2]string{{"csrf", mo.csrf()}, {"inbox", "inbox_2"}}, "a.csv", deskImportGood)
		must(t, status, http.StatusForbidden, body)
		if status, _ := mo.get("/app/desk/import"); status != http.StatusForbidden {
			t.Fatalf("a member opened the import form: %d", status)
		}
		status, body = ana.postMultipart("/app/desk/import/preview", [][2]string{{"csrf", ana.csrf()}, {"inbox", "inbox_2"}}, "bad.csv", deskImportBad)
		must(t, status, http.StatusBadRequest, body)
		contains(t, body, "line 3", `customer_email &#34;not-an-email&#34; is not an email address`, "Export to PDF")
		if strings.Contains(body, `id="run-import"`) {
			t.Fatal("a file with a bad row is offered the Import button")
		}
		status, body = ana.postMultipart("/app/desk/import/run", [][2]string{{"csrf", ana.csrf()}, {"inbox", "inbox_2"}}, "bad.csv", deskImportBad)
		must(t, status, http.StatusBadRequest, body)
		if count(t, convs, acme) != before {
			t.Fatal("a bad file imported rows")
		}
		status, body = ana.postMultipart("/app/desk/import/preview", [][2]string{{"csrf", ana.csrf()}, {"inbox", "inbox_2"}}, "good.csv", deskImportGood)
		must(t, status, http.StatusOK, body)
		contains(t, body, "2 good row(s)", "Import 2 row(s) into Billing", "lee@customer.test")
		m := importDataField.FindStringSubmatch(body)
		if m == nil || count(t, convs, acme) != before {
			t.Fatalf("the preview wrote rows, or carries no file: %s", body)
		}
		run := [][2]string{{"csrf", ana.csrf()}, {"inbox", "inbox_2"}, {"name", "good.csv"}, {"data", m[1]}}
		status, body = ana.postMultipart("/app/desk/import/run", run, "", "")
		must(t, status, http.StatusOK, body)
		contains(t, body, `id="import-result"`, "2 conversation(s) created")
		status, body = ana.postMultipart("/app/desk/import/run", run, "", "")
		must(t, status, http.StatusOK, body)
		contains(t, body, "0 conversation(s) created, 2 imported before")
		if count(t, convs, acme) != before+2 {
			t.Fatalf("importing twice did not store the two rows once: %d", count(t, convs, acme)-before)
		}
		_, page := ana.get("/app/desk/inboxes/inbox_2")
		contains(t, page, "<td>imported</td>", "lines: 2-3", "created: 2")
	})

	t.Run("a long import streams its progress after every chunk", func(t *testing.T) {
		t.Parallel()
		rows := desk.ImportProgressEvery*2 + 100
		var file strings.Builder
		file.WriteString("customer_email,subject,body,created_at,status\n")
		for i := range rows {
			fmt.Fprintf(&file, "c%d@customer.test,Question %d,Body %d,2026-11-06T17:00:00Z,open\n", i, i, i)
		}
		csrf := ana.csrf()
		status, body := ana.postMultipart("/app/desk/import/preview", [][2]string{{"csrf", csrf}, {"inbox", "inbox_1"}}, "long.csv", file.String())
		must(t, status, http.StatusOK, body)
		contains(t, body, fmt.Sprintf("%d good row(s); the first %d are shown", rows, desk.ImportPreviewRows))
		m := importDataField.FindStringSubmatch(body)
		if m == nil {
			t.Fatal("the preview carries no file")
		}
		status, body = ana.postMultipart("/app/desk/import/run", [][2]string{{"csrf", csrf}, {"inbox", "inbox_1"}, {"data", m[1]}}, "", "")
		must(t, status, http.StatusOK, body)
		first, second := fmt.Sprintf("%d of %d rows imported", desk.ImportProgressEvery, rows), fmt.Sprintf("%d of %d rows imported", 2*desk.ImportProgressEvery, rows)
		i, j, k := strings.Index(body, first), strings.Index(body, second), strings.Index(body, fmt.Sprintf("%d conversation(s) created", rows))
		if i < 0 || j < i || k < j {
			t.Fatalf("the progress lines are not each chunk's, in order, before the result: %s", body)
		}
		if n := count(t, `SELECT count(*) FROM desk_conversation WHERE org_id = $1 AND inbox_id = 1 AND subject LIKE 'Question %'`, acme); n != rows {
			t.Fatalf("%d of %d rows stored", n, rows)
		}
	})
}

// TestDashboardDeskReportsPastTheDeskLimit: the reports page reads through the desk's rate
// limits, which the workspace's assistants share. Past them the person is told to wait
// (429, the limit's message, Retry-After), and nothing is logged as an outage.
func TestDashboardDeskReportsPastTheDeskLimit(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: dashboardDeskFile, tune: func(c *config.Config) {
		// One page's worth of reads a minute (a page reads each metric once).
		c.DeskLimits = map[string]desk.Limits{}
		for plan, l := range desk.DefaultLimits() {
			l.MemberReads = len(desk.Metrics)
			c.DeskLimits[plan] = l
		}
	}})
	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	if status, body := ana.get("/app/desk/reports"); status != http.StatusOK {
		t.Fatalf("the first page: status %d: %s", status, body)
	}
	req, err := http.NewRequest(http.MethodGet, s.base+"/app/desk/reports", nil)
	if err != nil {
		t.Fatal(err)
	}
	status, body, header := ana.do(req)
	t.Run("the page past the limit says to wait, and for how long", func(t *testing.T) {
		if status != http.StatusTooManyRequests || !strings.Contains(body, "Member read-call limit exceeded.") {
			t.Fatalf("status %d: %s", status, body)
		}
		secs, err := strconv.Atoi(header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 || !strings.Contains(body, "try again in "+strconv.Itoa(secs)+" s") {
			t.Fatalf("Retry-After %q, page %s", header.Get("Retry-After"), body)
		}
	})
	t.Run("a spent limit is not logged as an error", func(t *testing.T) {
		if strings.Contains(s.logs.String(), `"level":"ERROR"`) {
			t.Fatalf("error lines: %s", s.logs.String())
		}
	})
}
