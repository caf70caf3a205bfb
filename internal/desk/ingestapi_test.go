package desk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wiretime"
)

func TestIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test", desk.ScopeIngestWrite, desk.ScopeConversationsRead)
	support := fx.res.Desk["acme"].Inboxes["support"].ID
	newConv := func(ext string) desk.IngestConversation {
		return desk.IngestConversation{ExternalID: ext, InboxID: support, Subject: "Webhook retries", CustomerEmail: "pat@customer.test",
			CustomerName: "Pat", CreatedAt: argAt("2026-11-10T10:00:00Z"), Messages: []desk.IngestMessage{
				{ExternalID: ext + "-m1", Type: desk.TypeCustomer, Body: "Our webhook receiver sees duplicate retries.", CreatedAt: argAt("2026-11-10T10:00:00Z"),
					Attachments: []desk.Attachment{{Filename: "log.txt", Size: 812}}},
				{ExternalID: ext + "-m2", Type: desk.TypeAutomated, Body: "We got your message.", CreatedAt: argAt("2026-11-10T10:00:02Z")},
			}}
	}
	// ingest stores newConv(ext) and returns its conversation's id.
	ingest := func(t *testing.T, ext string) string {
		t.Helper()
		c, err := fx.svc.IngestConversation(ctx, ana, newConv(ext))
		if err != nil {
			t.Fatal(err)
		}
		return c.ConversationID
	}
	// customerSays is a customer's message to append, of that external id and body.
	customerSays := func(ext, body string) desk.IngestAppend {
		return desk.IngestAppend{IngestMessage: desk.IngestMessage{ExternalID: ext, Type: desk.TypeCustomer, Body: body}}
	}
	read := func(conv string) desk.GetConversationResult {
		t.Helper()
		r, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: conv, Limit: desk.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("a conversation with its history is stored once per external id", func(t *testing.T) {
		first, err := fx.svc.IngestConversation(ctx, ana, newConv("hs-1"))
		if err != nil || !first.Created || !strings.HasPrefix(first.ConversationID, desk.PrefixConversation) {
			t.Fatalf("%+v %v", first, err)
		}
		again, err := fx.svc.IngestConversation(ctx, ana, newConv("hs-1"))
		if err != nil || again.Created || again.ConversationID != first.ConversationID {
			t.Fatalf("replay %+v %v", again, err)
		}
		r := read(first.ConversationID)
		if len(r.Messages) != 2 || r.Messages[0].Attachments[0].Filename != "log.txt" || r.Conversation.Status != desk.StatusOpen ||
			r.Conversation.CustomerName != "Pat" || r.Conversation.CreatedAt != "2026-11-10T10:00:00Z" {
			t.Fatalf("%+v", r)
		}
		found, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "duplicate retries"})
		if err != nil || len(found.Conversations) != 1 || found.Conversations[0].ID != first.ConversationID {
			t.Fatalf("search %+v %v", found, err)
		}
	})
	t.Run("concurrent identical creates store one conversation", func(t *testing.T) {
		var wg sync.WaitGroup
		got := make([]desk.IngestResult, 6)
		errs := make([]error, len(got))
		for i := range got {
			wg.Go(func() { got[i], errs[i] = fx.svc.IngestConversation(ctx, ana, newConv("race-1")) })
		}
		wg.Wait()
		created := 0
		for i, r := range got {
			if errs[i] != nil || r.ConversationID != got[0].ConversationID {
				t.Fatalf("%d: %+v %v", i, r, errs[i])
			}
			if r.Created {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("%d calls created it", created)
		}
	})
	t.Run("appending: a member's reply, then a replay, then a status change", func(t *testing.T) {
		conv := ingest(t, "hs-2")
		reply := desk.IngestAppend{IngestMessage: desk.IngestMessage{ExternalID: "hs-2-r1", Type: desk.TypeReply, Body: "We deduplicate by delivery id.",
			AuthorEmail: "Bo@acme.test", CreatedAt: argAt("2026-11-10T10:30:00Z")}}
		m, err := fx.svc.IngestMessage(ctx, ana, conv, reply)
		if err != nil || !m.Created || !strings.HasPrefix(m.MessageID, desk.PrefixMessage) {
			t.Fatalf("%+v %v", m, err)
		}
		again, err := fx.svc.IngestMessage(ctx, ana, conv, reply)
		if err != nil || again.Created || again.MessageID != m.MessageID {
			t.Fatalf("replay %+v %v", again, err)
		}
		r := read(conv)
		if len(r.Messages) != 3 || r.Conversation.FirstReplyAt == nil || *r.Conversation.FirstReplyAt != "2026-11-10T10:30:00Z" ||
			r.Conversation.UpdatedAt != "2026-11-10T10:30:00Z" || r.Messages[2].AuthorID == nil {
			t.Fatalf("%+v", r)
		}
		done := desk.IngestAppend{IngestMessage: desk.IngestMessage{ExternalID: "hs-2-a1", Type: desk.TypeAutomated, Body: "Marked as resolved.",
			CreatedAt: argAt("2026-11-10T11:00:00Z")}, Status: desk.StatusResolved}
		if _, err := fx.svc.IngestMessage(ctx, ana, conv, done); err != nil {
			t.Fatal(err)
		}
		r = read(conv)
		if r.Conversation.Status != desk.StatusResolved || r.Conversation.ResolvedAt == nil || *r.Conversation.ResolvedAt != "2026-11-10T11:00:00Z" {
			t.Fatalf("%+v", r.Conversation)
		}
	})
	t.Run("conversations of one shown second list by id, as the contract sorts", func(t *testing.T) {
		// Times were stored to the microsecond and answers show seconds: the later
		// fraction listed first, two equal times with ids descending.
		var ids []string
		for i, frac := range []string{"2", "7"} {
			when := at("2026-11-10T09:00:00." + frac + "Z")
			c, err := fx.svc.IngestConversation(ctx, ana, desk.IngestConversation{ExternalID: fmt.Sprintf("frac-%d", i), InboxID: support,
				Subject: "Quokka sighting " + frac, CustomerEmail: "pat@customer.test", CreatedAt: new(wiretime.Arg(when)),
				Messages: []desk.IngestMessage{{ExternalID: fmt.Sprintf("frac-%d-m", i), Type: desk.TypeCustomer, Body: "A quokka at the door.", CreatedAt: new(wiretime.Arg(when))}}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ConversationID)
		}
		found, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "quokka"})
		if err != nil || len(found.Conversations) != 2 {
			t.Fatalf("search %+v %v", found, err)
		}
		for i, c := range found.Conversations {
			if c.ID != ids[i] || c.UpdatedAt != "2026-11-10T09:00:00Z" {
				t.Fatalf("result %d: %s at %s, want %s at 2026-11-10T09:00:00Z (ids ascending within one second)", i, c.ID, c.UpdatedAt, ids[i])
			}
		}
	})
	t.Run("a message's external id on another conversation is a conflict and writes nothing", func(t *testing.T) {
		other := ingest(t, "hs-3")
		_, err := fx.svc.IngestMessage(ctx, ana, other, customerSays("hs-1-m1", "moved?"))
		wantErr(t, err, apperr.Conflict, desk.ReasonExternalIDConflict, "another conversation")
		if n := len(read(other).Messages); n != 2 {
			t.Fatalf("%d messages", n)
		}
	})
	t.Run("a new conversation carrying a stored message's external id is a conflict and writes nothing", func(t *testing.T) {
		c := newConv("hs-6")
		c.Messages[1].ExternalID = "hs-1-m1"
		_, err := fx.svc.IngestConversation(ctx, ana, c)
		wantErr(t, err, apperr.Conflict, desk.ReasonExternalIDConflict, "another conversation")
		again, err := fx.svc.IngestConversation(ctx, ana, newConv("hs-6"))
		if err != nil || !again.Created || len(read(again.ConversationID).Messages) != 2 {
			t.Fatalf("the refused call left the conversation behind: %+v %v", again, err)
		}
	})
	t.Run("a conversation's external id reused for another ticket is a conflict and writes nothing", func(t *testing.T) {
		first := ingest(t, "hs-8")
		other := newConv("hs-8")
		other.Subject, other.CustomerEmail = "A totally different ticket", "other@customer.test"
		_, err := fx.svc.IngestConversation(ctx, ana, other)
		wantErr(t, err, apperr.Conflict, desk.ReasonExternalIDConflict, "another subject")
		moved := newConv("hs-8")
		moved.CustomerEmail = "someone@customer.test"
		_, err = fx.svc.IngestConversation(ctx, ana, moved)
		wantErr(t, err, apperr.Conflict, desk.ReasonExternalIDConflict, "another customer_email")
		// The same ticket sent again with its status moved on is still a replay.
		resolved := newConv("hs-8")
		resolved.CustomerEmail = "PAT@customer.test"
		resolved.Status = desk.StatusResolved
		again, err := fx.svc.IngestConversation(ctx, ana, resolved)
		if err != nil || again.Created || again.ConversationID != first {
			t.Fatalf("replay %+v %v", again, err)
		}
		if r := read(first); r.Conversation.Subject != "Webhook retries" || len(r.Messages) != 2 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("a message's external id reused with another body is a conflict and writes nothing", func(t *testing.T) {
		conv := ingest(t, "hs-9")
		_, err := fx.svc.IngestMessage(ctx, ana, conv, customerSays("hs-9-m1", "not the same message at all"))
		wantErr(t, err, apperr.Conflict, desk.ReasonExternalIDConflict, "another body")
		_, err = fx.svc.IngestMessage(ctx, ana, conv, customerSays("hs-9-m2", "We got your message."))
		wantErr(t, err, apperr.Conflict, desk.ReasonExternalIDConflict, "another type")
		if r := read(conv); len(r.Messages) != 2 || r.Messages[0].Body != "Our webhook receiver sees duplicate retries." {
			t.Fatalf("%+v", r.Messages)
		}
	})
	t.Run("two messages of one call with the same external id are refused", func(t *testing.T) {
		c := newConv("hs-7")
		c.Messages[1].ExternalID = c.Messages[0].ExternalID
		_, err := fx.svc.IngestConversation(ctx, ana, c)
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "messages[1].external_id")
	})
	t.Run("refused: no ingest scope, a member's token, another workspace's ids", func(t *testing.T) {
		noScope := fx.scope("acme", "ana@acme.test", desk.ScopeConversationsRead)
		_, err := fx.svc.IngestConversation(ctx, noScope, newConv("x-1"))
		if e := wantErr(t, err, apperr.Forbidden, "FORBIDDEN", desk.ScopeIngestWrite); e.Details["required_scope"] != desk.ScopeIngestWrite {
			t.Fatalf("%+v", e)
		}
		bo := fx.scope("acme", "bo@acme.test", desk.ScopeIngestWrite)
		_, err = fx.svc.IngestConversation(ctx, bo, newConv("x-2"))
		wantErr(t, err, apperr.Forbidden, "FORBIDDEN", desk.MsgIngestRole)
		gus := fx.scope("globex", "gus@globex.test", desk.ScopeIngestWrite)
		// acme's refund is conv_3; globex has only conv_1.
		_, err = fx.svc.IngestMessage(ctx, gus, fx.conv["refund"], customerSays("g-1", "hi"))
		wantErr(t, err, apperr.NotFound, "NOT_FOUND", desk.MsgConversationNotFound)
		c := newConv("g-2")
		c.InboxID = "inbox_99" // globex has inbox_1 and inbox_2 of its own
		_, err = fx.svc.IngestConversation(ctx, gus, c)
		wantErr(t, err, apperr.NotFound, "NOT_FOUND", desk.MsgInboxNotFound)
	})
	t.Run("bounds and shapes are checked before anything is written", func(t *testing.T) {
		cases := map[string]func(*desk.IngestConversation){
			"external_id":    func(c *desk.IngestConversation) { c.ExternalID = "" },
			"customer_email": func(c *desk.IngestConversation) { c.CustomerEmail = "not an address" },
			"status":         func(c *desk.IngestConversation) { c.Status = "closed" },
			"at most 100":    func(c *desk.IngestConversation) { c.Messages = make([]desk.IngestMessage, desk.MaxIngestMessages+1) },
			"in the future":  func(c *desk.IngestConversation) { c.CreatedAt = new(wiretime.Arg(now.Add(time.Hour))) },
			// A sender's zero time for a missing one: Go's year 1, Unix's 1970.
			`"created_at" is before 1990-01-01`:             func(c *desk.IngestConversation) { c.CreatedAt = new(wiretime.Arg(time.Time{})) },
			`"messages[1].created_at" is before 1990-01-01`: func(c *desk.IngestConversation) { c.Messages[1].CreatedAt = new(wiretime.Arg(time.Unix(0, 0))) },
			"customer, reply":                               func(c *desk.IngestConversation) { c.Messages[0].Type = desk.TypeNote },
			"required for a":                                func(c *desk.IngestConversation) { c.Messages[0].Type = desk.TypeReply },
			"not an active":                                 func(c *desk.IngestConversation) { c.AssigneeEmail = "gus@globex.test" },
			"before the":                                    func(c *desk.IngestConversation) { c.Messages[1].CreatedAt = argAt("2026-11-09T00:00:00Z") },
			"attachments[0]":                                func(c *desk.IngestConversation) { c.Messages[0].Attachments[0].Size = -1 },
			// A right-to-left override shows "invoice\u202Etxt.exe" as "invoiceexe.txt".
			"formatting character": func(c *desk.IngestConversation) { c.Messages[0].Attachments[0].Filename = "invoice\u202Etxt.exe" },
			"only for a resol":     func(c *desk.IngestConversation) { c.ResolvedAt = new(wiretime.Arg(now)) },
		}
		for want, mutate := range cases {
			c := newConv("bad-" + want)
			mutate(&c)
			_, err := fx.svc.IngestConversation(ctx, ana, c)
			wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", want)
		}
		if n := testfix.Scalar[int](t, fx.d, "SELECT count(*) FROM desk_conversation WHERE external_id LIKE 'bad-%'"); n != 0 {
			t.Fatalf("%d stored", n)
		}
	})
	t.Run("a page of messages is bounded by its encoded bytes", func(t *testing.T) {
		// 100,000 control characters are 600 KB once encoded: one page of 50 such
		// messages was 64 MB, held twice in the answer.
		c, err := fx.svc.IngestConversation(ctx, ana, desk.IngestConversation{ExternalID: "hs-ctl", InboxID: support, Subject: "Control characters",
			CustomerEmail: "ctl@customer.test", CreatedAt: argAt("2026-11-10T10:00:00Z")})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if _, err := fx.svc.IngestMessage(ctx, ana, c.ConversationID, desk.IngestAppend{IngestMessage: desk.IngestMessage{
				ExternalID: fmt.Sprintf("ctl-%d", i), Type: desk.TypeCustomer, Body: strings.Repeat("\x01", 100_000), CreatedAt: argAt("2026-11-10T10:01:00Z")}}); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		r := read(c.ConversationID)
		enc, err := json.Marshal(r.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) > desk.MaxPageBytes+desk.MaxPageBytes/10 || r.NextCursor == nil {
			t.Fatalf("a page of %d messages, %d bytes encoded, next cursor %v", len(r.Messages), len(enc), r.NextCursor != nil)
		}
	})
	t.Run("a conversation whose search text is full still takes messages", func(t *testing.T) {
		// A search text holds at most 1 MB of distinct words: about ten log dumps of
		// 99,000 characters fill it. Every message after that failed (INTERNAL) and was
		// never stored.
		c, err := fx.svc.IngestConversation(ctx, ana, desk.IngestConversation{ExternalID: "hs-5", InboxID: support, Subject: "Exporter log dumps",
			CustomerEmail: "pat@customer.test", CreatedAt: argAt("2026-11-10T10:00:00Z")})
		if err != nil {
			t.Fatal(err)
		}
		word := 0
		dump := func() string {
			var b strings.Builder
			for b.Len() < 99_000 {
				word++
				fmt.Fprintf(&b, "w%031d ", word)
			}
			return b.String()
		}
		for i := range 14 {
			body := dump()
			if i == 13 {
				body = "Thanks, that fixed the exporter."
			}
			if _, err := fx.svc.IngestMessage(ctx, ana, c.ConversationID, desk.IngestAppend{IngestMessage: desk.IngestMessage{
				ExternalID: fmt.Sprintf("hs-5-%d", i), Type: desk.TypeCustomer, Body: body, CreatedAt: argAt("2026-11-10T10:01:00Z")}}); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		// 14 messages of 99 KB: more than one page holds (desk.MaxPageBytes), read page by page.
		stored, pages := 0, 0
		for in := (desk.GetConversationInput{ConversationID: c.ConversationID, Limit: desk.MaxLimit}); ; pages++ {
			r, err := fx.svc.GetConversation(ctx, ana, in)
			if err != nil {
				t.Fatal(err)
			}
			stored += len(r.Messages)
			if r.NextCursor == nil {
				break
			}
			in.Cursor = *r.NextCursor
		}
		if stored != 14 || pages == 0 {
			t.Fatalf("%d messages stored in %d pages, want 14 in more than one", stored, pages+1)
		}
		for _, q := range []string{"exporter dumps", fmt.Sprintf("w%031d", 1)} {
			found, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: q})
			if err != nil || len(found.Conversations) != 1 || found.Conversations[0].ID != c.ConversationID {
				t.Fatalf("search %q: %+v %v", q, found, err)
			}
		}
	})
	t.Run("a resolved conversation is resolved with its last message unless told", func(t *testing.T) {
		c := newConv("hs-4")
		c.Status = desk.StatusResolved
		r, err := fx.svc.IngestConversation(ctx, ana, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(r.ConversationID).Conversation.ResolvedAt; got == nil || *got != "2026-11-10T10:00:02Z" {
			t.Fatalf("%v", got)
		}
	})
}

func TestIngestRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test", desk.ScopeIngestWrite)
	gus := fx.scope("globex", "gus@globex.test", desk.ScopeIngestWrite)
	// Refused arguments are counted like any call, and cost no write.
	bad := desk.IngestConversation{}
	call := func() error {
		_, err := fx.svc.IngestConversation(ctx, ana, bad)
		return err
	}
	for i := range desk.IngestPerWindow {
		if err := call(); !strings.Contains(fmt.Sprint(err), "external_id") {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	t.Run("the workspace's calls past the limit are refused until the window ends", func(t *testing.T) {
		e := wantErr(t, call(), apperr.RateLimited, "RATE_LIMITED", desk.MsgIngestLimit)
		if s, ok := e.Details["retry_after_seconds"].(int); !ok || s < 1 || s > 60 {
			t.Fatalf("%v", e.Details)
		}
	})
	t.Run("another workspace has its own budget", func(t *testing.T) {
		_, err := fx.svc.IngestConversation(ctx, gus, bad)
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "external_id")
	})
	t.Run("a new window starts over", func(t *testing.T) {
		fx.clock.Add(desk.IngestWindow)
		wantErr(t, call(), apperr.Invalid, "INVALID_ARGUMENT", "external_id")
	})
}
