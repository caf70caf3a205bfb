package desk_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// Two workspaces: acme (Scale, Los Angeles) with an open inbox and a restricted one, and
// globex (Growth, Berlin) whose ids collide with acme's numbers on purpose (both count
// from 1), plus initech on the starter plan.
const workspaces = `
organisations:
  - {slug: acme, name: Acme, plan: scale, timezone: America/Los_Angeles}
  - {slug: globex, name: Globex, plan: growth, timezone: Europe/Berlin}
  - {slug: initech, name: Initech, plan: starter}
users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner}
  - {email: al@acme.test, name: Al, org: acme, role: admin}
  - {email: bo@acme.test, name: Bo, org: acme, role: member}
  - {email: cy@acme.test, name: Cy, org: acme, role: member}
  - {email: gus@globex.test, name: Gus, org: globex, role: admin}
  - {email: ida@initech.test, name: Ida, org: initech, role: owner}
desk:
  - workspace: acme
    inboxes:
      - {slug: support, name: Support, forwarding_address: support-fwd@mail.acme.test}
      - {slug: billing, name: Billing, members: [bo@acme.test]}
    saved_replies:
      - {slug: csv-import, title: CSV import requirements, body: "Use a UTF-8 CSV with customer_email, subject, body, created_at, and status. Maximum 10 MB and 5,000 rows per file."}
      - {slug: refund, title: Refund policy, body: "Refunds are issued within 14 days of an import error report."}
      - {slug: hello, title: A friendly greeting, body: "Hello! Thanks for reaching out."}
  - workspace: globex
    inboxes:
      - {slug: help, name: Help}
      - {slug: billing, name: Billing}
    saved_replies:
      - {slug: csv, title: CSV import at Globex, body: "Globex imports CSV files."}
  - workspace: initech
    inboxes:
      - {slug: support, name: Support}
`

// clock is a test clock every replica of the service reads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	t     testing.TB
	d     *pg.DB
	q     *db.Queries
	svc   *desk.Service
	clock *clock
	res   admin.Result
	orgs  map[string]uuid.UUID
	acme  uuid.UUID // orgs["acme"]: the workspace most tests act in
	// ana is Ana, acme's owner, as the dashboard passes her to the service: the person
	// most tests of its actions act as.
	ana   desk.Member
	users map[string]uuid.UUID
	// conv holds the seeded conversations' public ids by name.
	conv map[string]string
}

// now is the fixture's present: 2026-11-10 12:00 in Los Angeles.
var now = time.Date(2026, 11, 10, 20, 0, 0, 0, time.UTC)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// argAt is at as the ingest API's optional time argument.
func argAt(s string) *wiretime.Arg { return new(wiretime.Arg(at(s))) }

func newFixture(t *testing.T) *fixture {
	return newFixtureWith(t, nil)
}

func newFixtureWith(t testing.TB, limits map[string]desk.Limits) *fixture {
	t.Helper()
	b := testfix.Seed(t, workspaces)
	d, res, q := b.DB, b.Result, db.New()
	clk := &clock{t: now}
	svc, err := desk.New(desk.Deps{DB: d, Q: q, CursorKey: []byte(strings.Repeat("k", 32)), Secrets: testfix.Detector(t), Limits: limits, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{t: t, d: d, q: q, svc: svc, clock: clk, res: res, orgs: map[string]uuid.UUID{}, users: map[string]uuid.UUID{}, conv: map[string]string{}}
	for slug, o := range res.Organisations {
		fx.orgs[slug] = o.ID
	}
	fx.acme = fx.orgs["acme"]
	for email, u := range res.Users {
		fx.users[email] = u.ID
	}
	fx.ana = desk.Member{OrgID: fx.acme, UserID: fx.users["ana@acme.test"], Name: "Ana", Role: desk.RoleOwner}
	fx.seed()
	return fx
}

func (fx *fixture) inbox(org, slug string) int64 {
	id, _ := strings.CutPrefix(fx.res.Desk[org].Inboxes[slug].ID, desk.PrefixInbox)
	var n int64
	if err := json.Unmarshal([]byte(id), &n); err != nil {
		fx.t.Fatalf("inbox %s/%s: %v", org, slug, err)
	}
	return n
}

func (fx *fixture) user(email string) *uuid.UUID { u := fx.users[email]; return &u }

// apply applies a workspace's entry of an admin file, as `relayroom admin apply` does.
func (fx *fixture) apply(ctx context.Context, spec desk.WorkspaceSpec) (desk.WorkspaceOut, error) {
	var out desk.WorkspaceOut
	err := fx.d.Operator(ctx, func(tx *pg.Tx) (err error) {
		out, err = desk.ApplyWorkspace(ctx, tx, fx.q, fx.orgs[spec.Workspace], spec)
		return err
	})
	return out, err
}

// seed stores the conversations every test reads.
func (fx *fixture) seed() {
	fx.t.Helper()
	acme, globex := fx.orgs["acme"], fx.orgs["globex"]
	support, billing := fx.inbox("acme", "support"), fx.inbox("acme", "billing")
	msg := func(typ, body, ts string, author *uuid.UUID) desk.NewMessage {
		return desk.NewMessage{Type: typ, Body: body, CreatedAt: at(ts), AuthorID: author}
	}
	convs := []struct {
		name string
		org  uuid.UUID
		c    desk.NewConversation
	}{
		{"csv", acme, desk.NewConversation{InboxID: support, Subject: "CSV import fails", Status: desk.StatusOpen, AssigneeID: fx.user("ana@acme.test"),
			CustomerEmail: "kim@customer.test", CustomerName: "Kim", CreatedAt: at("2026-11-06T17:00:00Z"), Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "My CSV upload fails. Which columns are required?", "2026-11-06T17:00:00Z", nil),
				msg(desk.TypeAutomated, "We received your request and will answer soon.", "2026-11-06T17:00:05Z", nil),
				msg(desk.TypeNote, "Customer is on the legacy importer; zebracorn flag set.", "2026-11-06T17:10:00Z", fx.user("bo@acme.test")),
				{Type: desk.TypeReply, Body: "Could you send the file you tried?", CreatedAt: at("2026-11-06T17:30:00Z"), AuthorID: fx.user("bo@acme.test"),
					Attachments: []desk.Attachment{{Filename: "columns.pdf", Size: 48213}}},
				msg(desk.TypeCustomer, "Here it is.", "2026-11-07T09:00:00Z", nil),
			}}},
		{"invoice", acme, desk.NewConversation{InboxID: billing, Subject: "Invoice for the import add-on", Status: desk.StatusPending,
			CustomerEmail: "lee@customer.test", CustomerName: "Lee", CreatedAt: at("2026-11-08T16:00:00Z"), Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "Where is my invoice for the CSV import add-on?", "2026-11-08T16:00:00Z", nil),
			}}},
		{"refund", acme, desk.NewConversation{InboxID: support, Subject: "Refund request", Status: desk.StatusResolved,
			CustomerEmail: "max@customer.test", CreatedAt: at("2026-11-09T10:00:00Z"), ResolvedAt: new(at("2026-11-09T12:00:00Z")),
			Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "I want a refund after a failed import.", "2026-11-09T10:00:00Z", nil),
				msg(desk.TypeReply, "Refund issued.", "2026-11-09T11:00:00Z", fx.user("ana@acme.test")),
			}}},
		// Los Angeles leaves daylight saving time at 2026-11-01 09:00 UTC (02:00 PDT): that
		// local day lasts 25 hours, from 07:00 UTC to 08:00 UTC the next day.
		{"dst-start", acme, desk.NewConversation{InboxID: support, Subject: "Login loop", Status: desk.StatusOpen,
			CustomerEmail: "a@customer.test", CreatedAt: at("2026-11-01T07:30:00Z"), Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "I keep getting logged out.", "2026-11-01T07:30:00Z", nil),
				msg(desk.TypeAutomated, "Thanks, we got it.", "2026-11-01T07:31:00Z", nil),
				msg(desk.TypeNote, "Looks like the cookie bug.", "2026-11-01T07:32:00Z", fx.user("al@acme.test")),
				msg(desk.TypeReply, "Clearing cookies fixes it.", "2026-11-01T07:37:00Z", fx.user("al@acme.test")),
			}}},
		{"dst-late", acme, desk.NewConversation{InboxID: support, Subject: "Late night question", Status: desk.StatusOpen,
			CustomerEmail: "b@customer.test", CreatedAt: at("2026-11-02T07:30:00Z"), Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "Still awake?", "2026-11-02T07:30:00Z", nil),
			}}},
		{"dst-next", acme, desk.NewConversation{InboxID: billing, Subject: "Billing address", Status: desk.StatusOpen,
			CustomerEmail: "c@customer.test", CreatedAt: at("2026-11-02T08:30:00Z"), Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "Please change my billing address.", "2026-11-02T08:30:00Z", nil),
			}}},
		{"globex-csv", globex, desk.NewConversation{InboxID: fx.inbox("globex", "help"), Subject: "CSV import at Globex", Status: desk.StatusOpen,
			CustomerEmail: "z@globex-customer.test", CreatedAt: at("2026-11-06T17:00:00Z"), Messages: []desk.NewMessage{
				msg(desk.TypeCustomer, "Our CSV import fails too.", "2026-11-06T17:00:00Z", nil),
			}}},
	}
	err := fx.d.Operator(context.Background(), func(tx *pg.Tx) error {
		for _, c := range convs {
			id, created, err := desk.AddConversation(context.Background(), tx, fx.q, c.org, c.c)
			if err != nil {
				return err
			}
			if !created {
				fx.t.Fatalf("%s: not created", c.name)
			}
			fx.conv[c.name] = desk.PrefixConversation + itoa(id)
		}
		return nil
	})
	if err != nil {
		fx.t.Fatal(err)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// scope authenticates a person through a personal access token with the given scopes
// (every scope when none is given), as the endpoint does.
func (fx *fixture) scope(org, email string, scopes ...string) tenancy.Scope {
	fx.t.Helper()
	if len(scopes) == 0 {
		scopes = desk.Scopes
	}
	tok, err := fx.svc.CreateToken(context.Background(), fx.orgs[org], email, scopes, time.Hour)
	if err != nil {
		fx.t.Fatal(err)
	}
	sc, err := fx.svc.Authenticate(context.Background(), tok.Token)
	if err != nil {
		fx.t.Fatal(err)
	}
	return sc
}

// wantErr checks an error's apperr code, the code the desk format sends, and that its
// message holds want.
func wantErr(t *testing.T, err error, code apperr.Code, wire, want string) *apperr.Error {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok {
		t.Fatalf("want %s, got %v", wire, err)
	}
	got := map[apperr.Code]string{apperr.Invalid: "INVALID_ARGUMENT", apperr.NotFound: "NOT_FOUND", apperr.Forbidden: "FORBIDDEN",
		apperr.RateLimited: "RATE_LIMITED", apperr.Conflict: "CONFLICT", apperr.Unauthenticated: "UNAUTHENTICATED",
		apperr.Unavailable: "UPSTREAM_UNAVAILABLE"}[e.Code]
	if e.Reason != "" {
		got = e.Reason
	}
	if e.Code != code || got != wire || !strings.Contains(e.Message, want) {
		t.Fatalf("want %s %s %q, got %s (reason %q): %q", code, wire, want, e.Code, e.Reason, e.Message)
	}
	return e
}
