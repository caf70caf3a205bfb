package desk_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
)

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, id(it))
	}
	return out
}

func convIDs(r desk.SearchResult) []string {
	return ids(r.Conversations, func(c desk.ConversationSummary) string { return c.ID })
}

// pages reads a paged tool from the first page ("" cursor) until a page has no next
// cursor, and returns what read names on each page.
func pages(t *testing.T, read func(cursor string) (names []string, next *string, err error)) [][]string {
	t.Helper()
	var out [][]string
	cursor := ""
	for {
		names, next, err := read(cursor)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, names)
		if next == nil {
			return out
		}
		cursor = *next
	}
}

func TestSearchConversations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana, cy, bo := fx.scope("acme", "ana@acme.test"), fx.scope("acme", "cy@acme.test"), fx.scope("acme", "bo@acme.test")

	t.Run("every word matches subject or public messages, as a word or its start", func(t *testing.T) {
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "CSV import"})
		if err != nil {
			t.Fatal(err)
		}
		// csv: subject; invoice: "CSV import add-on" in its message; refund: "import" only.
		if got := convIDs(r); !slices.Equal(got, []string{fx.conv["invoice"], fx.conv["csv"]}) || r.NextCursor != nil {
			t.Fatalf("got %v next %v", got, r.NextCursor)
		}
		c := r.Conversations[1]
		if c.Subject != "CSV import fails" || c.Status != "open" || c.InboxID != fx.res.Desk["acme"].Inboxes["support"].ID ||
			c.AssigneeID == nil || !strings.HasPrefix(*c.AssigneeID, "usr_") || c.CustomerEmail != "kim@customer.test" ||
			c.UpdatedAt != "2026-11-07T09:00:00Z" || c.CreatedAt != "2026-11-06T17:00:00Z" {
			t.Fatalf("summary: %+v", c)
		}
		if r, _ := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "colum"}); !slices.Equal(convIDs(r), []string{fx.conv["csv"]}) {
			t.Fatalf("prefix: %v", convIDs(r))
		}
	})
	t.Run("a word with a hyphen, a dot or a slash is found", func(t *testing.T) {
		// "add-on" was read back as the phrase add-on <-> add <-> on, which the stripped
		// search text never matches: every such query found nothing.
		for _, q := range []string{"add-on", "import add-on", "ADD-ON invoice"} {
			r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: q})
			if err != nil || !slices.Equal(convIDs(r), []string{fx.conv["invoice"]}) {
				t.Fatalf("%q: %v %v", q, convIDs(r), err)
			}
		}
	})
	t.Run("private notes are never searched", func(t *testing.T) {
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "zebracorn"})
		if err != nil || len(r.Conversations) != 0 {
			t.Fatalf("%v %v", convIDs(r), err)
		}
	})
	t.Run("filters are AND-ed", func(t *testing.T) {
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Status: "resolved"})
		if err != nil || !slices.Equal(convIDs(r), []string{fx.conv["refund"]}) {
			t.Fatalf("%v %v", convIDs(r), err)
		}
		r, err = fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Status: "open", InboxID: new(fx.res.Desk["acme"].Inboxes["billing"].ID)})
		if err != nil || len(r.Conversations) != 0 {
			t.Fatalf("%v %v", convIDs(r), err)
		}
		r, err = fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", InboxID: new(fx.res.Desk["acme"].Inboxes["billing"].ID)})
		if err != nil || !slices.Equal(convIDs(r), []string{fx.conv["invoice"]}) {
			t.Fatalf("%v %v", convIDs(r), err)
		}
	})
	t.Run("sorted by updated_at descending and paged with cursors", func(t *testing.T) {
		got := pages(t, func(cursor string) ([]string, *string, error) {
			r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Limit: 1, Cursor: cursor})
			return convIDs(r), r.NextCursor, err
		})
		if want := [][]string{{fx.conv["refund"]}, {fx.conv["invoice"]}, {fx.conv["csv"]}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("got %v want %v", got, want)
		}
	})
	t.Run("a restricted inbox is visible to its members, owners and admins only", func(t *testing.T) {
		for _, c := range []struct {
			name string
			r    func() (desk.SearchResult, error)
			want int
		}{
			{"owner", func() (desk.SearchResult, error) {
				return fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "invoice"})
			}, 1},
			{"listed member", func() (desk.SearchResult, error) {
				return fx.svc.SearchConversations(ctx, bo, desk.SearchInput{Query: "invoice"})
			}, 1},
			{"other member", func() (desk.SearchResult, error) {
				return fx.svc.SearchConversations(ctx, cy, desk.SearchInput{Query: "invoice"})
			}, 0},
		} {
			r, err := c.r()
			if err != nil || len(r.Conversations) != c.want {
				t.Fatalf("%s: %v %v", c.name, convIDs(r), err)
			}
		}
		_, err := fx.svc.SearchConversations(ctx, cy, desk.SearchInput{Query: "invoice", InboxID: new(fx.res.Desk["acme"].Inboxes["billing"].ID)})
		wantErr(t, err, apperr.NotFound, "NOT_FOUND", desk.MsgInboxNotFound)
	})
	t.Run("another workspace's conversations and inboxes are not there", func(t *testing.T) {
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "Globex"})
		if err != nil || len(r.Conversations) != 0 {
			t.Fatalf("%v %v", convIDs(r), err)
		}
	})
}

func TestGetConversation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana, cy := fx.scope("acme", "ana@acme.test"), fx.scope("acme", "cy@acme.test")

	t.Run("messages oldest first, without notes by default, attachments as metadata", func(t *testing.T) {
		r, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["csv"]})
		if err != nil {
			t.Fatal(err)
		}
		types := ids(r.Messages, func(m desk.Message) string { return m.Type })
		if !slices.Equal(types, []string{"customer", "automated", "reply", "customer"}) || r.NextCursor != nil {
			t.Fatalf("types %v", types)
		}
		if r.Conversation.ID != fx.conv["csv"] || r.Conversation.Subject != "CSV import fails" || r.Conversation.FirstReplyAt == nil ||
			*r.Conversation.FirstReplyAt != "2026-11-06T17:30:00Z" || r.Conversation.ResolvedAt != nil {
			t.Fatalf("conversation %+v", r.Conversation)
		}
		m := r.Messages[0]
		if !strings.HasPrefix(m.ID, "msg_") || m.Body != "My CSV upload fails. Which columns are required?" || m.CreatedAt != "2026-11-06T17:00:00Z" || m.AuthorID != nil {
			t.Fatalf("first message %+v", m)
		}
		if a := r.Messages[2].Attachments; len(a) != 1 || a[0] != (desk.Attachment{Filename: "columns.pdf", Size: 48213}) || r.Messages[2].AuthorID == nil {
			t.Fatalf("reply %+v", r.Messages[2])
		}
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "zebracorn") || strings.Contains(string(b), "url") {
			t.Fatalf("leaks: %s", b)
		}
	})
	t.Run("include_private_notes adds the notes in their place", func(t *testing.T) {
		r, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["csv"], IncludePrivateNotes: true})
		if err != nil {
			t.Fatal(err)
		}
		if types := ids(r.Messages, func(m desk.Message) string { return m.Type }); !slices.Equal(types, []string{"customer", "automated", "note", "reply", "customer"}) {
			t.Fatalf("types %v", types)
		}
		if !strings.HasPrefix(r.Messages[2].ID, "note_") || !strings.Contains(r.Messages[2].Body, "zebracorn") {
			t.Fatalf("note %+v", r.Messages[2])
		}
	})
	t.Run("pages follow each other with the cursor", func(t *testing.T) {
		got := pages(t, func(cursor string) ([]string, *string, error) {
			r, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["csv"], IncludePrivateNotes: true, Limit: 2, Cursor: cursor})
			return ids(r.Messages, func(m desk.Message) string { return m.Type }), r.NextCursor, err
		})
		if want := [][]string{{"customer", "automated"}, {"note", "reply"}, {"customer"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("a conversation in a restricted inbox is NOT_FOUND to other members", func(t *testing.T) {
		_, err := fx.svc.GetConversation(ctx, cy, desk.GetConversationInput{ConversationID: fx.conv["invoice"]})
		wantErr(t, err, apperr.NotFound, "NOT_FOUND", desk.MsgConversationNotFound)
	})
	t.Run("absent, malformed and foreign ids answer alike", func(t *testing.T) {
		for _, id := range []string{"conv_999999", "conv_abc", "inbox_1", "conv_01", "", fx.conv["globex-csv"] + "0"} {
			_, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: id})
			wantErr(t, err, apperr.NotFound, "NOT_FOUND", desk.MsgConversationNotFound)
		}
	})
}

func TestListInboxes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)

	t.Run("visible inboxes by name with their open conversations counted, nothing secret", func(t *testing.T) {
		r, err := fx.svc.ListInboxes(ctx, fx.scope("acme", "al@acme.test"), desk.PageInput{})
		if err != nil {
			t.Fatal(err)
		}
		want := []desk.Inbox{
			{ID: fx.res.Desk["acme"].Inboxes["billing"].ID, Name: "Billing", OpenCount: 1},
			{ID: fx.res.Desk["acme"].Inboxes["support"].ID, Name: "Support", OpenCount: 3},
		}
		if !slices.Equal(r.Inboxes, want) || r.NextCursor != nil {
			t.Fatalf("got %+v", r)
		}
		if b, _ := json.Marshal(r); strings.Contains(string(b), "fwd") {
			t.Fatalf("forwarding address leaked: %s", b)
		}
	})
	t.Run("a member sees the restricted inbox only when listed", func(t *testing.T) {
		r, err := fx.svc.ListInboxes(ctx, fx.scope("acme", "cy@acme.test"), desk.PageInput{})
		if err != nil || len(r.Inboxes) != 1 || r.Inboxes[0].Name != "Support" {
			t.Fatalf("%+v %v", r, err)
		}
		r, err = fx.svc.ListInboxes(ctx, fx.scope("acme", "bo@acme.test"), desk.PageInput{})
		if err != nil || len(r.Inboxes) != 2 {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("paged by one", func(t *testing.T) {
		got := pages(t, func(cursor string) ([]string, *string, error) {
			r, err := fx.svc.ListInboxes(ctx, fx.scope("acme", "ana@acme.test"), desk.PageInput{Limit: 1, Cursor: cursor})
			return ids(r.Inboxes, func(i desk.Inbox) string { return i.Name }), r.NextCursor, err
		})
		if want := [][]string{{"Billing"}, {"Support"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("names sort as a person reads them, on any database locale, page after page", func(t *testing.T) {
		// Under the database's C.UTF-8 "Support" came before "billing", and "Élan" after "Zeta".
		if _, err := fx.apply(ctx, desk.WorkspaceSpec{Workspace: "globex", Inboxes: []desk.InboxSpec{
			{Slug: "zeta", Name: "Zeta"}, {Slug: "upper", Name: "Support"}, {Slug: "lower", Name: "billing"}, {Slug: "elan", Name: "Élan"}}}); err != nil {
			t.Fatal(err)
		}
		got := pages(t, func(cursor string) ([]string, *string, error) {
			r, err := fx.svc.ListInboxes(ctx, fx.scope("globex", "gus@globex.test"), desk.PageInput{Limit: 1, Cursor: cursor})
			return ids(r.Inboxes, func(i desk.Inbox) string { return i.Name }), r.NextCursor, err
		})
		var names []string
		for _, p := range got {
			names = append(names, p...)
		}
		// With the workspace's own Billing and Help.
		if !slices.Equal(names, []string{"billing", "Billing", "Élan", "Help", "Support", "Zeta"}) {
			t.Fatalf("got %v", names)
		}
	})
}

func TestFindSavedReplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	sc := fx.scope("acme", "cy@acme.test")

	t.Run("title or body, sorted by title", func(t *testing.T) {
		r, err := fx.svc.FindSavedReplies(ctx, sc, desk.FindSavedRepliesInput{Query: "import"})
		if err != nil {
			t.Fatal(err)
		}
		// "CSV import requirements" (title) before "Refund policy" (body: import error).
		if got := ids(r.SavedReplies, func(s desk.SavedReply) string { return s.Title }); !slices.Equal(got, []string{"CSV import requirements", "Refund policy"}) {
			t.Fatalf("got %v", got)
		}
		if r.SavedReplies[0].ID != fx.res.Desk["acme"].SavedReplies["csv-import"].ID || !strings.HasPrefix(r.SavedReplies[0].Body, "Use a UTF-8 CSV") {
			t.Fatalf("%+v", r.SavedReplies[0])
		}
	})
	t.Run("the contract's example", func(t *testing.T) {
		r, err := fx.svc.FindSavedReplies(ctx, sc, desk.FindSavedRepliesInput{Query: "CSV import"})
		if err != nil || len(r.SavedReplies) != 1 || r.SavedReplies[0].Title != "CSV import requirements" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("paged", func(t *testing.T) {
		got := pages(t, func(cursor string) ([]string, *string, error) {
			r, err := fx.svc.FindSavedReplies(ctx, sc, desk.FindSavedRepliesInput{Query: "import", Limit: 1, Cursor: cursor})
			return ids(r.SavedReplies, func(s desk.SavedReply) string { return s.Title }), r.NextCursor, err
		})
		if want := [][]string{{"CSV import requirements"}, {"Refund policy"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("got %v", got)
		}
	})
}

func TestCursors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test")
	first, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Limit: 1})
	if err != nil || first.NextCursor == nil {
		t.Fatal(first, err)
	}
	cur := *first.NextCursor

	t.Run("changed arguments are INVALID_ARGUMENT", func(t *testing.T) {
		for _, in := range []desk.SearchInput{{Query: "imports", Limit: 1}, {Query: "import", Limit: 2}, {Query: "import", Limit: 1, Status: "open"}} {
			in.Cursor = cur
			_, err := fx.svc.SearchConversations(ctx, ana, in)
			wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "other arguments")
		}
	})
	t.Run("a tampered cursor is INVALID_ARGUMENT", func(t *testing.T) {
		body, mac, _ := strings.Cut(cur, ".")
		for _, bad := range []string{"x" + cur, body + "." + strings.Repeat("A", len(mac)), body, "not a cursor", cur[:len(cur)-2]} {
			_, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Limit: 1, Cursor: bad})
			wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "cursor is not valid")
		}
	})
	t.Run("another member's cursor is INVALID_ARGUMENT", func(t *testing.T) {
		_, err := fx.svc.SearchConversations(ctx, fx.scope("acme", "al@acme.test"), desk.SearchInput{Query: "import", Limit: 1, Cursor: cur})
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "cursor is not valid")
	})
	t.Run("another tool's cursor is INVALID_ARGUMENT", func(t *testing.T) {
		_, err := fx.svc.FindSavedReplies(ctx, ana, desk.FindSavedRepliesInput{Query: "import", Limit: 1, Cursor: cur})
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "cursor is not valid")
	})
	t.Run("a cursor names neither the workspace's nor the person's account id", func(t *testing.T) {
		// Cursors are opaque to the client but only signed, not sealed: a readable account
		// id would tie the person's ids in two workspaces together (docs/desk.md, "Ids").
		body, _, _ := strings.Cut(cur, ".")
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []uuid.UUID{ana.OrgID, ana.Person.UserID} {
			if strings.Contains(string(raw), id.String()) {
				t.Fatalf("the cursor's payload %s holds the account id %s", raw, id)
			}
		}
	})
	t.Run("after 15 minutes it is CURSOR_EXPIRED", func(t *testing.T) {
		fx.clock.Add(desk.CursorTTL)
		if _, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Limit: 1, Cursor: cur}); err != nil {
			t.Fatalf("at exactly 15 minutes: %v", err)
		}
		fx.clock.Add(time.Second)
		_, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", Limit: 1, Cursor: cur})
		wantErr(t, err, apperr.Invalid, "CURSOR_EXPIRED", "restart pagination")
	})
}

// TestIsolation tries every id argument of every tool with ids that exist only in the
// other workspace: each answers exactly like an id that exists nowhere.
func TestIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	// globex gets a third inbox and conversations up to conv_8: numbers acme does not have
	// (acme has inbox_1-2 and conv_1-6).
	globex := fx.orgs["globex"]
	err := fx.d.Operator(ctx, func(tx *pg.Tx) error {
		if _, err := desk.ApplyWorkspace(ctx, tx, fx.q, globex, desk.WorkspaceSpec{Workspace: "globex", Inboxes: []desk.InboxSpec{{Slug: "extra", Name: "Extra"}}}); err != nil {
			return err
		}
		for range 7 {
			if _, _, err := desk.AddConversation(ctx, tx, fx.q, globex, desk.NewConversation{InboxID: 3, Subject: "Globex import", Status: desk.StatusOpen,
				CustomerEmail: "g@globex-customer.test", CreatedAt: at("2026-11-03T10:00:00Z")}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ana, gus := fx.scope("acme", "ana@acme.test"), fx.scope("globex", "gus@globex.test")
	missingConv, missingInbox := "conv_424242", "inbox_424242"
	same := func(t *testing.T, f func(id string) error, foreign, missing string) {
		t.Helper()
		e1, e2 := f(foreign), f(missing)
		a, ok1 := apperr.As(e1)
		b, ok2 := apperr.As(e2)
		if !ok1 || !ok2 || a.Code != apperr.NotFound || a.Message != b.Message || a.Reason != b.Reason || len(a.Details) != 0 || len(b.Details) != 0 {
			t.Fatalf("foreign %v, missing %v", e1, e2)
		}
	}
	if _, err := fx.svc.GetConversation(ctx, gus, desk.GetConversationInput{ConversationID: "conv_8"}); err != nil {
		t.Fatalf("globex's own conv_8: %v", err)
	}
	t.Run("get_conversation.conversation_id", func(t *testing.T) {
		same(t, func(id string) error {
			_, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: id})
			return err
		}, "conv_8", missingConv)
	})
	t.Run("add_private_note.conversation_id", func(t *testing.T) {
		same(t, func(id string) error {
			_, err := fx.svc.AddPrivateNote(ctx, ana, desk.NoteInput{ConversationID: id, Body: "x", IdempotencyKey: "key-" + id})
			return err
		}, "conv_8", missingConv)
	})
	t.Run("search_conversations.inbox_id", func(t *testing.T) {
		same(t, func(id string) error {
			_, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", InboxID: &id})
			return err
		}, "inbox_3", missingInbox)
	})
	t.Run("get_report.inbox_id", func(t *testing.T) {
		same(t, func(id string) error {
			_, err := fx.svc.GetReport(ctx, ana, desk.ReportInput{Metric: desk.MetricConversationVolume, StartDate: "2026-11-01", EndDate: "2026-11-02", InboxID: &id})
			return err
		}, "inbox_3", missingInbox)
	})
	// An empty inbox_id names no inbox: it is refused like any missing one, never read
	// as "no filter" (which would widen the answer to every inbox).
	t.Run("search_conversations.inbox_id empty", func(t *testing.T) {
		same(t, func(id string) error {
			_, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import", InboxID: &id})
			return err
		}, "inbox_3", "")
	})
	t.Run("get_report.inbox_id empty", func(t *testing.T) {
		same(t, func(id string) error {
			_, err := fx.svc.GetReport(ctx, ana, desk.ReportInput{Metric: desk.MetricConversationVolume, StartDate: "2026-11-01", EndDate: "2026-11-02", InboxID: &id})
			return err
		}, "inbox_3", "")
	})
}
