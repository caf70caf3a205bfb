package threads_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/threads"
)

func TestSendInboxAckReplyClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	var sent threads.SendResult
	testfix.Step(t, "send reaches both recipients", func(t *testing.T) {
		sent = e.send(t, "architect", threads.SendInput{
			To: []string{"backend", "frontend"}, Subject: "Deploy plan", Body: "Pushed the migration.\n\nCan you review\tthe rollback path?"})
		testfix.Check(t, "recipients", len(sent.To), 2)
		if sent.ThreadID == "" || sent.MessageID == "" {
			t.Fatalf("send returned no ids: %+v", sent)
		}
	})
	testfix.Step(t, "send queues one wake for the message", func(t *testing.T) {
		if len(e.waker.queued) != 1 {
			t.Fatalf("wakes queued: %+v", e.waker.queued)
		}
		q := e.waker.queued[0]
		testfix.Check(t, "members woken", len(q.MemberIDs), 2)
		testfix.Check(t, "source", q.Source, "message")
		testfix.Check(t, "thread", q.ThreadID.String(), sent.ThreadID)
		testfix.Check(t, "item", q.ItemID.String(), sent.MessageID)
	})
	testfix.Step(t, "inbox shows the message unread and never changes state", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{}))
			if len(in) != 1 {
				t.Fatalf("inbox %d: %+v", i, in)
			}
			testfix.Check(t, "unread", in[0].Unread, true)
			testfix.Check(t, "subject", in[0].Subject, "Deploy plan")
			testfix.Check(t, "from", in[0].From, "architect")
			testfix.Check(t, "preview", in[0].Preview, "Pushed the migration. Can you review the rollback path?")
			testfix.Check(t, "messageId", in[0].MessageID, sent.MessageID)
		}
	})
	testfix.Step(t, "an inbox item has exactly its fields, at in ISO 8601 with milliseconds", func(t *testing.T) {
		in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{}))
		b, _ := json.Marshal(in[0])
		if !regexp.MustCompile(`"at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`).Match(b) {
			t.Fatalf("at is not ISO with milliseconds: %s", b)
		}
		want := []string{"messageId", "threadId", "subject", "from", "unread", "at", "preview"}
		var keys map[string]any
		_ = json.Unmarshal(b, &keys)
		if len(keys) != len(want) {
			t.Fatalf("inbox item fields: %s", b)
		}
	})
	testfix.Step(t, "the sender has nothing in its own inbox", func(t *testing.T) {
		if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("architect"), threads.InboxInput{})); len(in) != 0 {
			t.Fatalf("sender's inbox: %+v", in)
		}
	})
	testfix.Step(t, "ack marks read for the acker only, twice is fine", func(t *testing.T) {
		ack := must[threads.AckResult](t)(e.svc.Ack(ctx, e.sc("backend"), sent.MessageID))
		if ack.Unread {
			t.Fatal("ack left it unread")
		}
		if _, err := e.svc.Ack(ctx, e.sc("backend"), sent.MessageID); err != nil {
			t.Fatalf("second ack: %v", err)
		}
		if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{UnreadOnly: true})); len(in) != 0 {
			t.Fatalf("unreadOnly after ack: %+v", in)
		}
		if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("frontend"), threads.InboxInput{UnreadOnly: true})); len(in) != 1 {
			t.Fatalf("frontend's unread: %+v", in)
		}
	})
	testfix.Step(t, "a part cannot ack a message not addressed to it", func(t *testing.T) {
		_, err := e.svc.Ack(ctx, e.sc("reader"), sent.MessageID)
		testfix.WantErr(t, err, apperr.NotFound, "message_not_found")
	})
	var rep threads.ReplyResult
	testfix.Step(t, "reply goes to every other participant", func(t *testing.T) {
		rep = must[threads.ReplyResult](t)(e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "Looks fine."}))
		for _, p := range []string{"architect", "frontend"} {
			in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc(p), threads.InboxInput{}))
			if len(in) == 0 || in[0].MessageID != rep.MessageID {
				t.Fatalf("%s did not get the reply first: %+v", p, in)
			}
		}
	})
	testfix.Step(t, "a non-participant who replies becomes a participant", func(t *testing.T) {
		must[threads.ReplyResult](t)(e.svc.Reply(ctx, e.sc("reader"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "FYI"}))
		if l := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("reader"), threads.ThreadsInput{})); len(l) != 1 {
			t.Fatalf("reader is not a participant after replying: %+v", l)
		}
	})
	testfix.Step(t, "show returns the thread with its messages in order", func(t *testing.T) {
		shown := must[threads.ShowResult](t)(e.svc.Show(ctx, e.sc("frontend"), sent.ThreadID))
		testfix.Check(t, "status", shown.Thread.Status, "open")
		if len(shown.Messages) != 3 {
			t.Fatalf("messages: %+v", shown.Messages)
		}
		testfix.Check(t, "first message's sender", shown.Messages[0].From, "architect")
		if !strings.Contains(shown.Messages[0].Body, "\n\nCan you review") {
			t.Errorf("first body lost its line breaks: %q", shown.Messages[0].Body)
		}
		testfix.Check(t, "second body", shown.Messages[1].Body, "Looks fine.")
	})
	testfix.Step(t, "close closes the thread and cancels its wakes", func(t *testing.T) {
		cl := must[threads.CloseResult](t)(e.svc.Close(ctx, e.sc("frontend"), threads.CloseInput{ThreadID: sent.ThreadID}))
		testfix.Check(t, "ok", cl.OK, true)
		testfix.Check(t, "status", cl.Status, "closed")
		if cl.Lesson != nil {
			t.Errorf("close without a lesson returned one: %+v", cl.Lesson)
		}
		if len(e.waker.canceled) != 1 || e.waker.canceled[0].String() != sent.ThreadID {
			t.Fatalf("close did not cancel the thread's wakes: %v", e.waker.canceled)
		}
	})
	testfix.Step(t, "a closed thread leaves every inbox", func(t *testing.T) {
		for _, p := range []string{"architect", "backend", "reader"} {
			if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc(p), threads.InboxInput{})); len(in) != 0 {
				t.Fatalf("%s still sees the closed thread: %+v", p, in)
			}
		}
		if n := e.count(t, "SELECT count(*) FROM delivery WHERE read_at IS NULL"); n != 0 {
			t.Fatalf("close left %d unread", n)
		}
	})
	testfix.Step(t, "a reply to a closed thread is refused naming the status", func(t *testing.T) {
		_, err := e.svc.Reply(ctx, e.sc("architect"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "one more"})
		testfix.WantErr(t, err, apperr.Conflict, "thread_closed")
		if !strings.Contains(err.Error(), "closed") {
			t.Fatalf("refusal does not name the status: %v", err)
		}
	})
	testfix.Step(t, "close is idempotent and the thread lists as closed", func(t *testing.T) {
		if cl := must[threads.CloseResult](t)(e.svc.Close(ctx, e.sc("architect"), threads.CloseInput{ThreadID: sent.ThreadID})); cl.Status != "closed" {
			t.Fatalf("second close: %+v", cl)
		}
		if st := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("architect"), threads.ThreadsInput{Status: ptr("closed")})); len(st) != 1 {
			t.Fatalf("threads status=closed: %+v", st)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestSendIsAllOrNothingAndBroadcastReachesEveryOtherPart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	_, err := e.svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"backend", "nobody"}, Subject: "s", Body: "b"})
	testfix.WantErr(t, err, apperr.NotFound, "unknown_part")
	if !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("the unknown part is not named: %v", err)
	}
	// A part of another project is unknown here too.
	_, err = e.svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"peter"}, Subject: "s", Body: "b"})
	testfix.WantErr(t, err, apperr.NotFound, "unknown_part")
	if n := e.count(t, "SELECT count(*) FROM message"); n != 0 || len(e.waker.queued) != 0 {
		t.Fatalf("a failed send stored %d messages / %d wakes", n, len(e.waker.queued))
	}
	_, err = e.svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"*", "backend"}, Subject: "s", Body: "b"})
	testfix.WantErr(t, err, apperr.Invalid, "invalid_recipient")
	_, err = e.svc.Send(ctx, e.sc("architect"), threads.SendInput{To: []string{"architect"}, Subject: "s", Body: "b"})
	testfix.WantErr(t, err, apperr.Invalid, "invalid_recipient")

	b := e.send(t, "architect", threads.SendInput{To: []string{"*"}, Subject: "All hands", Body: "Standup"})
	if strings.Join(b.To, ",") != "backend,frontend,reader" {
		t.Fatalf("broadcast recipients: %v", b.To)
	}
	if !e.waker.queued[0].Broadcast || len(e.waker.queued[0].MemberIDs) != 3 {
		t.Fatalf("broadcast wake: %+v", e.waker.queued[0])
	}
	for _, p := range []string{"backend", "frontend", "reader"} {
		if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc(p), threads.InboxInput{})); len(in) != 1 {
			t.Fatalf("%s: %+v", p, in)
		}
	}
	// Other project's part sees nothing.
	if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("peter"), threads.InboxInput{})); len(in) != 0 {
		t.Fatalf("peter: %+v", in)
	}
	// An offline, parked part still gets its message.
	e.exec(t, "UPDATE membership SET parked_until = now() + interval '1 hour', last_seen_at = now() - interval '3 days' WHERE part = 'backend'")
	e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: "b"})
	if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{})); len(in) != 2 {
		t.Fatalf("parked part's inbox: %+v", in)
	}
}

func TestUrgentAndNeedsHumanCapabilities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	_, err := e.svc.Send(ctx, e.sc("backend"), threads.SendInput{To: []string{"architect"}, Subject: "s", Body: "b", Urgent: true})
	testfix.WantErr(t, err, apperr.Forbidden, "capability_required")
	// needsHuman without the capability: ignored, delivered.
	s1 := e.send(t, "backend", threads.SendInput{To: []string{"architect"}, Subject: "s", Body: "b", NeedsHuman: true})
	if n := e.count(t, "SELECT count(*) FROM thread WHERE id = $1 AND needs_human", uuid.MustParse(s1.ThreadID)); n != 0 {
		t.Fatal("needsHuman without the capability flagged the thread")
	}
	if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("architect"), threads.InboxInput{})); len(in) != 1 {
		t.Fatal("the message was not delivered")
	}
	_, err = e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: s1.ThreadID, Body: "b", Urgent: true})
	testfix.WantErr(t, err, apperr.Forbidden, "capability_required")
	// With the capabilities.
	s2 := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: "b", Urgent: true, NeedsHuman: true})
	if n := e.count(t, "SELECT count(*) FROM thread WHERE id = $1 AND needs_human", uuid.MustParse(s2.ThreadID)); n != 1 {
		t.Fatal("needsHuman with the capability did not flag the thread")
	}
	if !e.waker.queued[len(e.waker.queued)-1].Urgent {
		t.Fatal("urgent not passed to the wake")
	}
}

func TestInboxPreviewAndPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	long := strings.Repeat("word  \n", 100)
	var ids []string
	for i := 0; i < 5; i++ {
		r := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: long})
		ids = append(ids, r.MessageID)
	}
	page1 := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{Limit: 2}))
	if len(page1) != 2 || page1[0].MessageID != ids[4] || page1[1].MessageID != ids[3] {
		t.Fatalf("page 1 is not newest first: %+v", page1)
	}
	p := page1[0].Preview
	if !strings.HasSuffix(p, "…") || strings.ContainsAny(p, "\n\t") || strings.Contains(p, "  ") || utf8.RuneCountInString(p) > threads.PreviewRunes+1 {
		t.Fatalf("preview %q", p)
	}
	page2 := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{Limit: 2, Before: &page1[1].MessageID}))
	if len(page2) != 2 || page2[0].MessageID != ids[2] || page2[1].MessageID != ids[1] {
		t.Fatalf("page 2: %+v", page2)
	}
	_, err := e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{Before: ptr("not-an-id")})
	testfix.WantErr(t, err, apperr.Invalid, "")
	if got := threads.Preview("short body"); got != "short body" {
		t.Fatalf("short preview %q", got)
	}
}

// TestShowPagesALongThread: show returned every message of a thread, however many:
// 400 replies of 20,000 characters made one answer of 104 MB. It answers pages, newest
// last, bounded by count and by bytes, and before reads the page before.
func TestShowPagesALongThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	read := func(t *testing.T, tid string, before *string) threads.ShowResult {
		t.Helper()
		return must[threads.ShowResult](t)(e.svc.ShowPage(ctx, e.sc("backend"), threads.ShowInput{ThreadID: tid, Before: before}))
	}
	thread := func(t *testing.T, replies int, body string) (string, []string) {
		t.Helper()
		r := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "long", Body: "first"})
		ids := []string{r.MessageID}
		for range replies {
			rr := must[threads.ReplyResult](t)(e.svc.Reply(ctx, e.sc("architect"), threads.ReplyInput{ThreadID: r.ThreadID, Body: body}))
			ids = append(ids, rr.MessageID)
		}
		return r.ThreadID, ids
	}

	t.Run("by count: the newest 200, then the rest", func(t *testing.T) {
		tid, ids := thread(t, threads.ShowMaxMessages+4, "short")
		first := read(t, tid, nil)
		if len(first.Messages) != threads.ShowMaxMessages || first.Messages[len(first.Messages)-1].ID != ids[len(ids)-1] ||
			first.Messages[0].ID != ids[5] || first.Before != ids[5] {
			t.Fatalf("first page: %d messages, %s…%s, before %q", len(first.Messages), first.Messages[0].ID, first.Messages[len(first.Messages)-1].ID, first.Before)
		}
		second := read(t, tid, &first.Before)
		if len(second.Messages) != 5 || second.Messages[0].ID != ids[0] || second.Messages[4].ID != ids[4] || second.Before != "" {
			t.Fatalf("second page: %+v", second)
		}
		// The dashboard's view of the thread (its page and live stream) shows the same page.
		v := must[threads.PersonThreadView](t)(e.svc.ThreadForPeople(ctx, e.person("Ana"), tid))
		if len(v.Messages) != threads.ShowMaxMessages || !v.EarlierOmitted || v.Messages[len(v.Messages)-1].ID.String() != ids[len(ids)-1] {
			t.Fatalf("a person's view: %d messages, earlier omitted %v", len(v.Messages), v.EarlierOmitted)
		}
	})
	t.Run("by bytes: no page holds more than 1 MiB of bodies", func(t *testing.T) {
		big := strings.Repeat("abcdefghij", threads.MaxBody/10)
		tid, ids := thread(t, 60, big)
		seen, before := 0, (*string)(nil)
		for {
			page := read(t, tid, before)
			size := 0
			for _, m := range page.Messages {
				size += text.JSONSize(m.Body)
			}
			if size > threads.ShowMaxBytes || len(page.Messages) == 0 {
				t.Fatalf("a page of %d messages, %d bytes", len(page.Messages), size)
			}
			seen += len(page.Messages)
			if page.Before == "" {
				break
			}
			before = &page.Before
		}
		if seen != len(ids) {
			t.Fatalf("%d of %d messages read", seen, len(ids))
		}
	})
}

// TestInboxPreviewOfALongBlankRun: a body whose first 600 characters collapse to a few
// words still previews as cut ("…"), never as if those words were the whole message.
func TestInboxPreviewOfALongBlankRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	for _, c := range []struct{ name, body, want string }{
		{"a few words, a long blank run, then the news", "Build log:" + strings.Repeat(" ", 600) + "FAILED at step 3", "Build log:…"},
		{"a long blank run first", strings.Repeat("\n", 700) + "the rest", "…"},
		{"exactly 600 characters is the whole body", strings.Repeat(" ", 590) + "0123456789", "0123456789"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: c.body})
			for _, m := range must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{})) {
				if m.MessageID == sent.MessageID {
					if m.Preview != c.want {
						t.Fatalf("preview %q, want %q", m.Preview, c.want)
					}
					return
				}
			}
			t.Fatal("the message is not in the inbox")
		})
	}
}

func TestThreadsAndSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	a := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "Database MIGRATION", Body: "rollback 100% safe_ok"})
	e.send(t, "frontend", threads.SendInput{To: []string{"reader"}, Subject: "CSS", Body: "colours"})
	mine := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{}))
	if len(mine) != 1 || mine[0].ID != a.ThreadID {
		t.Fatalf("backend's threads: %+v", mine)
	}
	if l := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{Query: ptr("rollback")})); len(l) != 1 {
		t.Fatalf("threads query on body: %+v", l)
	}
	if l := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{Status: ptr("canceled")})); len(l) != 0 {
		t.Fatalf("status filter: %+v", l)
	}
	// search: threads the part is NOT in, case-insensitive, subject or body.
	for _, c := range []struct {
		name, part, q string
		found         bool // a's thread, the one hit; else none
	}{
		{"a subject word", "frontend", "migration", true},
		{"a body word in capitals", "frontend", "ROLLBACK", true},
		{"never a thread the part is in", "backend", "migration", false},
		{"a literal percent (LIKE wildcards are literal)", "frontend", "0%", true},
		{"an underscore matches only itself", "frontend", "a_e", false},
		{"never another project's thread", "peter", "migration", false},
	} {
		t.Run("search: "+c.name, func(t *testing.T) {
			h := must[[]threads.SearchHit](t)(e.svc.Search(ctx, e.sc(c.part), threads.SearchInput{Query: c.q}))
			if c.found != (len(h) == 1) || len(h) > 1 || c.found && h[0].ThreadID != a.ThreadID {
				t.Fatalf("search %q as %s: %+v", c.q, c.part, h)
			}
		})
	}
	_, err := e.svc.Search(ctx, e.sc("frontend"), threads.SearchInput{Query: "m"})
	testfix.WantErr(t, err, apperr.Invalid, "")
	// The owner-rights search function sees nothing without a tenant.
	if n := e.count(t, "SELECT count(*) FROM rr_search_threads($1, '%migration%', 50, 'ffffffff-ffff-ffff-ffff-ffffffffffff')", e.sc("frontend").MemberID); n != 0 {
		t.Fatalf("rr_search_threads without a tenant returned %d threads", n)
	}
}

// TestThreadsPagesPastItsLimit: a part in more threads than one answer holds (or a search
// matching more) reads the older ones with before, each once, newest first.
func TestThreadsPagesPastItsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	var sent []string
	for i := range threads.MaxThreads + 5 {
		sent = append(sent, e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: fmt.Sprintf("report %d", i), Body: "b"}).ThreadID)
	}
	slices.Reverse(sent) // newest first, as listed
	first := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{}))
	t.Run("the first page holds the newest", func(t *testing.T) {
		if len(first) != threads.MaxThreads || first[0].ID != sent[0] {
			t.Fatalf("%d threads, first %v", len(first), first[0])
		}
	})
	t.Run("before reads the rest, each once", func(t *testing.T) {
		last := first[len(first)-1].ID
		rest := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{Before: &last}))
		var got []string
		for _, l := range append(first, rest...) {
			got = append(got, l.ID)
		}
		if !slices.Equal(got, sent) {
			t.Fatalf("pages list %d threads, want the %d sent in order", len(got), len(sent))
		}
	})
	t.Run("a before that is not an id is refused", func(t *testing.T) {
		_, err := e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{Before: ptr("yesterday")})
		testfix.WantErr(t, err, apperr.Invalid, "")
		_, err = e.svc.Search(ctx, e.sc("frontend"), threads.SearchInput{Query: "report", Before: ptr("yesterday")})
		testfix.WantErr(t, err, apperr.Invalid, "")
	})
	t.Run("search pages the same way, for a part in none of them", func(t *testing.T) {
		page := must[[]threads.SearchHit](t)(e.svc.Search(ctx, e.sc("frontend"), threads.SearchInput{Query: "report"}))
		if len(page) != threads.MaxThreads {
			t.Fatalf("%d hits on the first page", len(page))
		}
		last := page[len(page)-1].ThreadID
		rest := must[[]threads.SearchHit](t)(e.svc.Search(ctx, e.sc("frontend"), threads.SearchInput{Query: "report", Before: &last}))
		var got []string
		for _, h := range append(page, rest...) {
			got = append(got, h.ThreadID)
		}
		if !slices.Equal(got, sent) {
			t.Fatalf("pages list %d threads, want the %d sent in order", len(got), len(sent))
		}
	})
}

func TestIdsOfAnotherProjectAnswerNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	s := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: "b"})
	learned := must[knowledge.LearnResult](t)(e.know.Learn(ctx, e.sc("backend"), knowledge.LearnInput{Title: "Staging is read-only on Sundays", Body: "Backups run then; writes fail.", Kind: "pitfall"}))
	recalled := must[knowledge.RecallResult](t)(e.know.Recall(ctx, e.sc("backend"), knowledge.RecallInput{Query: "staging sundays"}))
	peter := e.sc("peter")
	// Each call is made in turn as the table is built; the steps check their answers.
	for _, c := range []struct {
		name   string
		err    error
		code   apperr.Code
		reason string
	}{
		{"show", errOf(e.svc.Show(ctx, peter, s.ThreadID)), apperr.NotFound, "thread_not_found"},
		{"reply", errOf(e.svc.Reply(ctx, peter, threads.ReplyInput{ThreadID: s.ThreadID, Body: "x"})), apperr.NotFound, "thread_not_found"},
		{"close", errOf(e.svc.Close(ctx, peter, threads.CloseInput{ThreadID: s.ThreadID})), apperr.NotFound, "thread_not_found"},
		{"ack", errOf(e.svc.Ack(ctx, peter, s.MessageID)), apperr.NotFound, "message_not_found"},
		{"event", errOf(e.svc.Event(ctx, peter, threads.EventInput{Type: "composing", Detail: json.RawMessage(`{"threadId":"` + s.ThreadID + `"}`)})),
			apperr.NotFound, "thread_not_found"},
		{"event error contradicting another project's entry", errOf(e.svc.Event(ctx, peter, threads.EventInput{Type: "error", Detail: json.RawMessage(`{"contradicts":"` + learned.KnowledgeID + `"}`)})),
			apperr.NotFound, "knowledge_not_found"},
		{"recall_used of another project's query", e.know.RecallUsed(ctx, peter, recalled.QueryID, learned.KnowledgeID), apperr.NotFound, "query_not_found"},
		// An id that exists nowhere answers the same way.
		{"show of an id that exists nowhere", errOf(e.svc.Show(ctx, peter, uuid.NewString())), apperr.NotFound, "thread_not_found"},
		// A non-participant of the same project cannot close it.
		{"close by a non-participant of the project", errOf(e.svc.Close(ctx, e.sc("frontend"), threads.CloseInput{ThreadID: s.ThreadID})),
			apperr.Forbidden, "not_participant"},
	} {
		t.Run(c.name, func(t *testing.T) { testfix.WantErr(t, c.err, c.code, c.reason) })
	}
}

// errOf is the error of a call's two results.
func errOf[T any](_ T, err error) error { return err }

func TestCancelByAPersonAndIdleAutoClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	s := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: "b"})
	c := must[threads.CancelResult](t)(e.svc.Cancel(audit.AsOperator(ctx, "ops"), "acme/one", uuid.MustParse(s.ThreadID)))
	if c.Status != "canceled" || !c.Canceled {
		t.Fatalf("cancel: %+v", c)
	}
	if again := must[threads.CancelResult](t)(e.svc.Cancel(ctx, "acme/one", uuid.MustParse(s.ThreadID))); again.Status != "canceled" || again.Canceled {
		t.Fatalf("a second cancel: %+v, want canceled already and nothing done", again)
	}
	// The operator's cancel is in the host's history, as a person's on the dashboard.
	if n := e.count(t, `SELECT count(*) FROM audit_event WHERE object_kind = 'thread' AND object_id = $1 AND action = 'canceled'
		AND actor_name = 'operator ops'`, s.ThreadID); n != 1 {
		t.Fatalf("%d audit events for the operator's cancel, want 1", n)
	}
	if len(e.waker.canceled) != 1 || e.waker.canceled[0].String() != s.ThreadID {
		t.Fatalf("cancel did not cancel the thread's wakes: %v", e.waker.canceled)
	}
	if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{})); len(in) != 0 {
		t.Fatal("a canceled thread stayed in the inbox")
	}
	cl := must[threads.CloseResult](t)(e.svc.Close(ctx, e.sc("backend"), threads.CloseInput{ThreadID: s.ThreadID}))
	if cl.Status != "canceled" {
		t.Fatalf("close after cancel reports %q, want canceled", cl.Status)
	}
	_, err := e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: s.ThreadID, Body: "x"})
	testfix.WantErr(t, err, apperr.Conflict, "thread_canceled")
	_, err = e.svc.Cancel(ctx, "initech/two", uuid.MustParse(s.ThreadID))
	testfix.WantErr(t, err, apperr.NotFound, "")

	// Idle auto-close: only threads idle longer than the window, and not while a message
	// in them is unread (a parked or offline recipient lost its mail).
	old := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "old", Body: "b"})
	e.exec(t, "UPDATE thread SET last_message_at = now() - interval '31 minutes' WHERE id = $1", uuid.MustParse(old.ThreadID))
	young := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "young", Body: "b"})
	if n := must[int](t)(e.svc.CloseIdle(ctx, threads.DefaultIdle)); n != 0 {
		t.Fatalf("CloseIdle closed %d threads with unread mail", n)
	}
	if in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{UnreadOnly: true})); len(in) != 2 {
		t.Fatalf("unread mail left the inbox: %+v", in)
	}
	must[threads.AckResult](t)(e.svc.Ack(ctx, e.sc("backend"), old.MessageID))
	n := must[int](t)(e.svc.CloseIdle(ctx, threads.DefaultIdle))
	if n != 1 {
		t.Fatalf("CloseIdle closed %d, want 1", n)
	}
	if len(e.waker.canceled) != 2 || e.waker.canceled[1].String() != old.ThreadID {
		t.Fatalf("idle close did not cancel the thread's wakes: %v", e.waker.canceled)
	}
	in := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{}))
	if len(in) != 1 || in[0].ThreadID != young.ThreadID {
		t.Fatalf("after idle close: %+v", in)
	}
	if must[threads.ShowResult](t)(e.svc.Show(ctx, e.sc("backend"), old.ThreadID)).Thread.Status != "closed" {
		t.Fatal("idle thread not closed")
	}
}

// TestRepliesDoNotQueueOnTheirThread: a reply holds its thread only against the paths that
// end it (FOR KEY SHARE), so it never waits for another reply's hold or touch of the same
// thread. Another transaction holds the lock a concurrent reply's touch takes (FOR NO KEY
// UPDATE) while a reply runs: the reply must finish without ever waiting for a lock (it
// used to take FOR UPDATE and queue behind every other reply until their commits).
func TestRepliesDoNotQueueOnTheirThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	sent := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "Busy", Body: "first"})
	// Touched just now: the reply's own touch has nothing to write within this second.
	e.exec(t, "UPDATE thread SET last_message_at = now() + interval '1 minute' WHERE id = $1", uuid.MustParse(sent.ThreadID))
	tx := e.Holder(t)
	// By project and id: on Citus a lock must name its shard (the distribution column).
	if _, err := tx.Exec(ctx, "SELECT 1 FROM thread WHERE project_id = $1 AND id = $2 FOR NO KEY UPDATE",
		e.sc("architect").ProjectID, uuid.MustParse(sent.ThreadID)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: sent.ThreadID, Body: "second"})
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("reply: %v", err)
			}
			return
		default:
		}
		// Polled outside tx, a statement each: within tx, pg_stat_activity lists the
		// backends of its first read only, and a reply on a connection opened later
		// would never be seen waiting.
		if e.Count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0 {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
			t.Fatal("the reply waited for another transaction's hold on its thread")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
