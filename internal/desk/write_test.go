package desk_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

func values(r desk.Report) []any {
	out := make([]any, 0, len(r.Points))
	for _, p := range r.Points {
		if p.Value == nil {
			out = append(out, nil)
		} else {
			out = append(out, *p.Value)
		}
	}
	return out
}

func TestGetReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	al := fx.scope("acme", "al@acme.test")
	report := func(metric, start, end, inbox string) (desk.Report, error) {
		in := desk.ReportInput{Metric: metric, StartDate: start, EndDate: end}
		if inbox != "" {
			in.InboxID = &inbox
		}
		return fx.svc.GetReport(ctx, al, in)
	}

	t.Run("days of the workspace's timezone across the end of DST (a 25-hour day is one point)", func(t *testing.T) {
		r, err := report(desk.MetricConversationVolume, "2026-10-31", "2026-11-02", "")
		if err != nil {
			t.Fatal(err)
		}
		// 2026-11-01 07:30Z is 00:30 PDT on Nov 1; 2026-11-02 07:30Z is 23:30 PST, still Nov 1;
		// 2026-11-02 08:30Z is 00:30 PST on Nov 2.
		if r.Timezone != "America/Los_Angeles" || r.Unit != "conversations" || r.Aggregation != "count" ||
			!slices.Equal(ids(r.Points, func(p desk.Point) string { return p.Date }), []string{"2026-10-31", "2026-11-01", "2026-11-02"}) ||
			!slices.Equal(values(r), []any{0.0, 2.0, 1.0}) {
			t.Fatalf("%+v %v", r, values(r))
		}
	})
	t.Run("first response: mean seconds to the first member reply, notes and automated messages ignored, null when none", func(t *testing.T) {
		r, err := report(desk.MetricFirstResponseTime, "2026-11-01", "2026-11-02", "")
		if err != nil {
			t.Fatal(err)
		}
		if r.Unit != "seconds" || r.Aggregation != "mean" || !slices.Equal(values(r), []any{420.0, nil}) {
			t.Fatalf("%+v %v", r, values(r))
		}
		// csv: created 17:00Z, answered 17:30Z on Nov 6 (1800 s); refund: 3600 s on Nov 9.
		r, err = report(desk.MetricFirstResponseTime, "2026-11-06", "2026-11-09", "")
		if err != nil || !slices.Equal(values(r), []any{1800.0, nil, nil, 3600.0}) {
			t.Fatalf("%v %v", values(r), err)
		}
	})
	t.Run("resolution time on the day of resolution", func(t *testing.T) {
		r, err := report(desk.MetricResolutionTime, "2026-11-08", "2026-11-10", "")
		if err != nil || !slices.Equal(values(r), []any{nil, 7200.0, nil}) {
			t.Fatalf("%v %v", values(r), err)
		}
	})
	t.Run("one inbox", func(t *testing.T) {
		r, err := report(desk.MetricConversationVolume, "2026-11-01", "2026-11-02", fx.res.Desk["acme"].Inboxes["billing"].ID)
		if err != nil || !slices.Equal(values(r), []any{0.0, 1.0}) {
			t.Fatalf("%v %v", values(r), err)
		}
	})
	t.Run("ranges", func(t *testing.T) {
		for _, c := range []struct{ start, end, want string }{
			{"2026-11-02", "2026-11-01", "is before start_date"},
			{"2026-10-01", "2026-11-01", "at most 31 days"},
			{"2024-11-09", "2024-11-10", "24 months"},
			{"2026-11-10", "2026-11-11", "in the future"},
			{"2026-02-30", "2026-03-01", "must be a date"},
		} {
			_, err := report(desk.MetricConversationVolume, c.start, c.end, "")
			wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", c.want)
		}
		for _, ok := range [][2]string{{"2026-10-11", "2026-11-10"}, {"2024-11-10", "2024-11-10"}} {
			if _, err := report(desk.MetricConversationVolume, ok[0], ok[1], ""); err != nil {
				t.Fatalf("%v: %v", ok, err)
			}
		}
	})
	t.Run("owners and admins only", func(t *testing.T) {
		_, err := fx.svc.GetReport(ctx, fx.scope("acme", "bo@acme.test"), desk.ReportInput{Metric: desk.MetricConversationVolume, StartDate: "2026-11-01", EndDate: "2026-11-01"})
		wantErr(t, err, apperr.Forbidden, "FORBIDDEN", desk.MsgReportsRole)
	})
	t.Run("a stored zone PostgreSQL does not know reports in UTC, not INTERNAL", func(t *testing.T) {
		// "Local" passed the admin file's check before it was refused there.
		testfix.Exec(t, fx.d, `UPDATE organisation SET timezone = 'Local' WHERE id = $1`, fx.acme)
		defer testfix.Exec(t, fx.d, `UPDATE organisation SET timezone = 'America/Los_Angeles' WHERE id = $1`, fx.acme)
		r, err := fx.svc.GetReport(ctx, fx.scope("acme", "al@acme.test"), desk.ReportInput{Metric: desk.MetricConversationVolume, StartDate: "2026-11-01", EndDate: "2026-11-02"})
		if err != nil || r.Timezone != "UTC" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("a reopening leaves a past day's resolution time as reported", func(t *testing.T) {
		// "refund" was resolved on Nov 9 after 7200 s. Reopening it on the 10th removed
		// the 9th's only observation; resolving it again moved it to a later day.
		ingest := fx.scope("acme", "ana@acme.test", desk.ScopeIngestWrite, desk.ScopeConversationsRead)
		before, err := report(desk.MetricResolutionTime, "2026-11-09", "2026-11-10", "")
		if err != nil || !slices.Equal(values(before), []any{7200.0, nil}) {
			t.Fatalf("before: %v %v", values(before), err)
		}
		for i, status := range []string{desk.StatusOpen, desk.StatusResolved} {
			if _, err := fx.svc.IngestMessage(ctx, ingest, fx.conv["refund"], desk.IngestAppend{IngestMessage: desk.IngestMessage{
				ExternalID: fmt.Sprintf("refund-again-%d", i), Type: desk.TypeCustomer, Body: "About that refund again.",
				CreatedAt: argAt(fmt.Sprintf("2026-11-10T0%d:00:00Z", i+1))}, Status: status}); err != nil {
				t.Fatal(err)
			}
			r, err := report(desk.MetricResolutionTime, "2026-11-09", "2026-11-10", "")
			if err != nil || !slices.Equal(values(r), []any{7200.0, nil}) {
				t.Fatalf("after it was set %s again: %v %v", status, values(r), err)
			}
		}
	})
}

func TestAddPrivateNote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	bo := fx.scope("acme", "bo@acme.test")
	in := desk.NoteInput{ConversationID: fx.conv["csv"], Body: "Confirmed import format with the customer. Waiting for a corrected CSV.", IdempotencyKey: "note-demo-1042-v1"}

	first, err := fx.svc.AddPrivateNote(ctx, bo, in)
	t.Run("appends an internal note and changes nothing else", func(t *testing.T) {
		if err != nil {
			t.Fatal(err)
		}
		if first.Replayed || first.Note.ConversationID != in.ConversationID || first.Note.Visibility != "internal" || first.Note.Body != in.Body || first.Note.ID[:5] != "note_" {
			t.Fatalf("%+v", first)
		}
		r, err := fx.svc.GetConversation(ctx, bo, desk.GetConversationInput{ConversationID: in.ConversationID, IncludePrivateNotes: true})
		if err != nil {
			t.Fatal(err)
		}
		last := r.Messages[len(r.Messages)-1]
		if last.ID != first.Note.ID || last.Type != "note" || r.Conversation.Status != "open" || r.Conversation.UpdatedAt != "2026-11-07T09:00:00Z" {
			t.Fatalf("%+v %+v", r.Conversation, last)
		}
		s, _ := fx.svc.SearchConversations(ctx, bo, desk.SearchInput{Query: "corrected"})
		if len(s.Conversations) != 0 {
			t.Fatalf("the note was searched: %v", convIDs(s))
		}
	})
	t.Run("the same key and arguments replay the note", func(t *testing.T) {
		again, err := fx.svc.AddPrivateNote(ctx, bo, in)
		if err != nil || !again.Replayed || again.Note != first.Note {
			t.Fatalf("%+v %v", again, err)
		}
		if n := fx.notes(in.ConversationID); n != 2 { // the seeded one and ours
			t.Fatalf("%d notes", n)
		}
	})
	t.Run("the same key with other arguments is IDEMPOTENCY_CONFLICT", func(t *testing.T) {
		other := in
		other.Body = "Something else."
		_, err := fx.svc.AddPrivateNote(ctx, bo, other)
		wantErr(t, err, apperr.Conflict, "IDEMPOTENCY_CONFLICT", "different arguments")
		other = in
		other.ConversationID = fx.conv["refund"]
		_, err = fx.svc.AddPrivateNote(ctx, bo, other)
		wantErr(t, err, apperr.Conflict, "IDEMPOTENCY_CONFLICT", "different arguments")
		// The key answers before the arguments are looked at: a conversation that is gone
		// or hidden, or a body the secret scan refuses, was NOT_FOUND or INVALID_ARGUMENT,
		// which would have the caller write the note again under a new key.
		key, _, err := auth.Generate(auth.AgentKeyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		for name, mod := range map[string]func(*desk.NoteInput){
			"a conversation that does not exist": func(n *desk.NoteInput) { n.ConversationID = "conv_999999" },
			"a conversation id that is not one":  func(n *desk.NoteInput) { n.ConversationID = "nope" },
			"a body holding a credential":        func(n *desk.NoteInput) { n.Body = "their key is " + key },
		} {
			other = in
			mod(&other)
			_, err = fx.svc.AddPrivateNote(ctx, bo, other)
			if e, ok := apperr.As(err); !ok || e.Code != apperr.Conflict {
				t.Fatalf("%s: %v, want IDEMPOTENCY_CONFLICT", name, err)
			}
		}
	})
	t.Run("keys are the member's: another member's same key writes its own note", func(t *testing.T) {
		r, err := fx.svc.AddPrivateNote(ctx, fx.scope("acme", "cy@acme.test"), in)
		if err != nil || r.Replayed || r.Note.ID == first.Note.ID {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("after 24 hours the key is new again, and the clean-up deletes it", func(t *testing.T) {
		fx.clock.Add(desk.NoteKeyRetention + time.Second)
		if n, err := fx.svc.DeleteExpiredNoteKeys(ctx); err != nil || n != 2 { // bo's and cy's
			t.Fatalf("deleted %d: %v", n, err)
		}
		r, err := fx.svc.AddPrivateNote(ctx, bo, in)
		if err != nil || r.Replayed || r.Note.ID == first.Note.ID {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("concurrent identical calls write one note", func(t *testing.T) {
		in := in
		in.IdempotencyKey = "concurrent-key-1"
		before := fx.notes(in.ConversationID)
		var wg sync.WaitGroup
		results := make([]desk.NoteResult, 8)
		errs := make([]error, 8)
		for i := range results {
			wg.Go(func() { results[i], errs[i] = fx.svc.AddPrivateNote(ctx, bo, in) })
		}
		wg.Wait()
		created := 0
		for i := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if !results[i].Replayed {
				created++
			}
			if results[i].Note.ID != results[0].Note.ID {
				t.Fatalf("two notes: %v %v", results[i].Note.ID, results[0].Note.ID)
			}
		}
		if created != 1 || fx.notes(in.ConversationID) != before+1 {
			t.Fatalf("created %d, notes %d -> %d", created, before, fx.notes(in.ConversationID))
		}
	})
	t.Run("a note holding a credential is refused", func(t *testing.T) {
		key, _, err := auth.Generate(auth.AgentKeyPrefix)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fx.svc.AddPrivateNote(ctx, bo, desk.NoteInput{ConversationID: in.ConversationID, IdempotencyKey: "secret-key-1",
			Body: "their key is " + key})
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "looks like it contains a secret")
	})
	t.Run("a note holding a desk personal access token is refused", func(t *testing.T) {
		// The toolset's own credential: pasted into a note, every member and every
		// assistant of the workspace could read it and act as its holder.
		tok, err := fx.svc.CreateToken(ctx, fx.orgs["acme"], "ana@acme.test", desk.Scopes, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		before := fx.notes(in.ConversationID)
		_, err = fx.svc.AddPrivateNote(ctx, bo, desk.NoteInput{ConversationID: in.ConversationID, IdempotencyKey: "secret-key-pt",
			Body: "the customer pasted " + tok.Token + " into the chat"})
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "looks like it contains a secret")
		if n := fx.notes(in.ConversationID); n != before {
			t.Fatalf("notes %d -> %d: the note was written", before, n)
		}
	})
	t.Run("a conversation the member cannot see is NOT_FOUND", func(t *testing.T) {
		_, err := fx.svc.AddPrivateNote(ctx, fx.scope("acme", "cy@acme.test"), desk.NoteInput{ConversationID: fx.conv["invoice"], Body: "x", IdempotencyKey: "hidden-key-1"})
		wantErr(t, err, apperr.NotFound, "NOT_FOUND", desk.MsgConversationNotFound)
	})
}

// notes counts a conversation's notes, as the workspace's owner sees them.
func (fx *fixture) notes(conv string) int {
	fx.t.Helper()
	r, err := fx.svc.GetConversation(context.Background(), fx.scope("acme", "ana@acme.test"),
		desk.GetConversationInput{ConversationID: conv, IncludePrivateNotes: true, Limit: desk.MaxLimit})
	if err != nil {
		fx.t.Fatal(err)
	}
	n := 0
	for _, m := range r.Messages {
		if m.Type == "note" {
			n++
		}
	}
	return n
}

// TestAccess is the plan × role × scope matrix: which tool each caller may use.
func TestAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	tools := map[string]struct {
		scope string
		run   func(sc tenancy.Scope) error
	}{
		desk.ToolSearchConversations: {desk.ScopeConversationsRead, func(sc tenancy.Scope) error {
			_, err := fx.svc.SearchConversations(ctx, sc, desk.SearchInput{Query: "import"})
			return err
		}},
		desk.ToolGetConversation: {desk.ScopeConversationsRead, func(sc tenancy.Scope) error {
			_, err := fx.svc.GetConversation(ctx, sc, desk.GetConversationInput{ConversationID: "conv_1"})
			return err
		}},
		desk.ToolListInboxes: {desk.ScopeInboxesRead, func(sc tenancy.Scope) error {
			_, err := fx.svc.ListInboxes(ctx, sc, desk.PageInput{})
			return err
		}},
		desk.ToolFindSavedReplies: {desk.ScopeSavedRepliesRead, func(sc tenancy.Scope) error {
			_, err := fx.svc.FindSavedReplies(ctx, sc, desk.FindSavedRepliesInput{Query: "import"})
			return err
		}},
		desk.ToolGetReport: {desk.ScopeReportsRead, func(sc tenancy.Scope) error {
			_, err := fx.svc.GetReport(ctx, sc, desk.ReportInput{Metric: desk.MetricConversationVolume, StartDate: "2026-11-01", EndDate: "2026-11-01"})
			return err
		}},
		desk.ToolAddPrivateNote: {desk.ScopeNotesWrite, func(sc tenancy.Scope) error {
			_, err := fx.svc.AddPrivateNote(ctx, sc, desk.NoteInput{ConversationID: "conv_1", Body: "ok", IdempotencyKey: "matrix-" + time.Now().Format(time.RFC3339Nano)})
			return err
		}},
	}
	people := []struct{ org, email, plan, role string }{
		{"acme", "ana@acme.test", "scale", "owner"}, {"acme", "al@acme.test", "scale", "admin"}, {"acme", "bo@acme.test", "scale", "member"},
		{"globex", "gus@globex.test", "growth", "admin"}, {"initech", "ida@initech.test", "starter", "owner"},
	}
	for name, tool := range tools {
		for _, p := range people {
			t.Run(name+"/"+p.plan+"/"+p.role, func(t *testing.T) {
				full := fx.scope(p.org, p.email)
				others := slices.DeleteFunc(slices.Clone(desk.Scopes), func(s string) bool { return s == tool.scope })
				lacking := fx.scope(p.org, p.email, others...)
				err, errLacking := tool.run(full), tool.run(lacking)
				switch {
				case p.plan == "starter":
					wantErr(t, err, apperr.Forbidden, "PLAN_REQUIRED", "does not include MCP access")
					wantErr(t, errLacking, apperr.Forbidden, "PLAN_REQUIRED", "does not include MCP access")
					return
				case name == desk.ToolAddPrivateNote && p.plan == "growth":
					wantErr(t, err, apperr.Forbidden, "PLAN_REQUIRED", desk.MsgNoteScale)
				case name == desk.ToolGetReport && p.role == "member":
					wantErr(t, err, apperr.Forbidden, "FORBIDDEN", desk.MsgReportsRole)
				case err != nil:
					t.Fatalf("allowed call refused: %v", err)
				}
				e := wantErr(t, errLacking, apperr.Forbidden, "FORBIDDEN", tool.scope)
				if e.Details["required_scope"] != tool.scope {
					t.Fatalf("details %v", e.Details)
				}
			})
		}
	}
	t.Run("a member removed from the workspace gets AUTH_REQUIRED from every tool", func(t *testing.T) {
		tok, err := fx.svc.CreateToken(ctx, fx.orgs["acme"], "bo@acme.test", desk.Scopes, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		testfix.Exec(t, fx.d, "DELETE FROM org_member WHERE org_id = $1 AND user_id = $2", fx.orgs["acme"], fx.users["bo@acme.test"])
		sc, err := fx.svc.Authenticate(ctx, tok.Token)
		if err != nil {
			t.Fatalf("the token still verifies: %v", err)
		}
		for _, tool := range tools {
			wantErr(t, tool.run(sc), apperr.Unauthenticated, "AUTH_REQUIRED", "no longer an active member")
		}
	})
	t.Run("expired, revoked, unknown and malformed tokens are refused at the HTTP level", func(t *testing.T) {
		tok, err := fx.svc.CreateToken(ctx, fx.orgs["acme"], "ana@acme.test", desk.Scopes, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		fx.clock.Add(time.Minute)
		_, err = fx.svc.Authenticate(ctx, tok.Token)
		wantErr(t, err, apperr.Unauthenticated, "UNAUTHENTICATED", desk.MsgTokenExpired)
		fx.clock.Add(-time.Minute)

		live, err := fx.svc.CreateToken(ctx, fx.orgs["acme"], "ana@acme.test", desk.Scopes, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := fx.svc.RevokeToken(ctx, fx.orgs["acme"], live.ID); !ok || err != nil {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		for _, bad := range []string{live.Token, "", "qyt_pt_nope", testfix.Mistype(live.Token), "sk-qyt-whatever"} {
			_, err = fx.svc.Authenticate(ctx, bad)
			wantErr(t, err, apperr.Unauthenticated, "UNAUTHENTICATED", desk.MsgUnauthorized)
		}
	})
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := map[string]desk.Limits{
		desk.PlanScale:  {Window: time.Minute, MemberReads: 2, MemberWrites: 1, WorkspaceReads: 3, WorkspaceWrites: 5},
		desk.PlanGrowth: {Window: time.Minute, MemberReads: 1, MemberWrites: 1, WorkspaceReads: 1, WorkspaceWrites: 1},
	}
	fx := newFixtureWith(t, limits)
	fx.clock.Add(30 * time.Second) // 20:00:30: the minute's window ends in 30 s
	ana, bo := fx.scope("acme", "ana@acme.test"), fx.scope("acme", "bo@acme.test")
	read := func(sc tenancy.Scope) error { _, err := fx.svc.ListInboxes(ctx, sc, desk.PageInput{}); return err }
	write := func(sc tenancy.Scope, key string) error {
		_, err := fx.svc.AddPrivateNote(ctx, sc, desk.NoteInput{ConversationID: fx.conv["csv"], Body: "n", IdempotencyKey: key})
		return err
	}

	t.Run("per member", func(t *testing.T) {
		if err := read(ana); err != nil {
			t.Fatal(err)
		}
		if err := read(ana); err != nil {
			t.Fatal(err)
		}
		e := wantErr(t, read(ana), apperr.RateLimited, "RATE_LIMITED", "Member read-call limit exceeded.")
		if e.Details["retry_after_seconds"] != 30 {
			t.Fatalf("details %v", e.Details)
		}
	})
	t.Run("writes are counted apart from reads", func(t *testing.T) {
		if err := write(ana, "rate-key-1"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, write(ana, "rate-key-2"), apperr.RateLimited, "RATE_LIMITED", "Member write-call limit exceeded.")
	})
	t.Run("a member's calls past its own limit do not spend the workspace's", func(t *testing.T) {
		// ana's third read was refused by her limit: acme's window of 3 counts her first
		// two only, so bo's first read is served. One runaway client must not lock its
		// team out.
		for range 3 {
			wantErr(t, read(ana), apperr.RateLimited, "RATE_LIMITED", "Member read-call limit exceeded.")
		}
		if err := read(bo); err != nil {
			t.Fatalf("bo's first read, after ana's refused ones: %v", err)
		}
	})
	t.Run("per workspace", func(t *testing.T) {
		// ana's two reads and bo's one filled acme's window of 3: bo is refused on his next.
		wantErr(t, read(bo), apperr.RateLimited, "RATE_LIMITED", "Workspace read-call limit exceeded.")
		// globex has its own windows.
		if err := read(fx.scope("globex", "gus@globex.test")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a Growth caller's note is PLAN_REQUIRED however often it is tried, never RATE_LIMITED", func(t *testing.T) {
		// Growth has no MCP write at all: counting its refused notes against the write
		// limit turned the third attempt into RATE_LIMITED, telling the assistant to wait
		// and retry a call that can never succeed.
		gus := fx.scope("globex", "gus@globex.test")
		for i := range 3 {
			_, err := fx.svc.AddPrivateNote(ctx, gus, desk.NoteInput{ConversationID: "conv_1", Body: "n", IdempotencyKey: fmt.Sprintf("growth-key-%d", i)})
			wantErr(t, err, apperr.Forbidden, "PLAN_REQUIRED", desk.MsgNoteScale)
		}
	})
	t.Run("a new window starts over", func(t *testing.T) {
		fx.clock.Add(30 * time.Second)
		if err := read(bo); err != nil {
			t.Fatal(err)
		}
	})
}
