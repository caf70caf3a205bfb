package rooms_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wake"
)

func TestMessagesOrderLimitAndPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for i := range 7 {
		r := e.call("architect", e.one, "post_message", map[string]any{"content": fmt.Sprintf("message %d", i)}).obj(t)
		if r["success"] != true || r["visible_to"] != rooms.VisibleToAll || str(r, "posted_at") == "" {
			t.Fatalf("post: %v", r)
		}
		ids = append(ids, str(r, "message_id"))
	}
	got := e.call("peter", e.one, "get_messages", map[string]any{"limit": 3}).obj(t)
	msgs := got["messages"].([]any)
	if got["count"].(float64) != 3 || len(msgs) != 3 {
		t.Fatalf("limit: %s", fmtJSON(got))
	}
	for i, m := range msgs { // the newest three, oldest first
		if str(m.(map[string]any), "id") != ids[4+i] || str(m.(map[string]any), "content") != fmt.Sprintf("message %d", 4+i) {
			t.Fatalf("order: %s", fmtJSON(msgs))
		}
	}
	page := e.call("peter", e.one, "get_messages", map[string]any{"limit": 3, "before": ids[4]}).obj(t)["messages"].([]any)
	if len(page) != 3 || str(page[0].(map[string]any), "id") != ids[1] || str(page[2].(map[string]any), "id") != ids[3] {
		t.Fatalf("before: %s", fmtJSON(page))
	}
	last := e.call("peter", e.one, "get_messages", map[string]any{"before": ids[0]}).obj(t)
	if last["count"].(float64) != 0 {
		t.Fatalf("before the first: %v", last)
	}
	// A message id of another room (or none at all) is answered alike.
	other := str(e.call("peter", e.two, "post_message", map[string]any{"content": "room two"}).obj(t), "message_id")
	wantError(t, e.call("peter", e.one, "get_messages", map[string]any{"before": other}), "Message not found: "+other)
	missing := uuid.Must(uuid.NewV7()).String()
	wantError(t, e.call("peter", e.one, "get_messages", map[string]any{"before": missing}), "Message not found: "+missing)
	wantError(t, e.call("peter", e.one, "get_messages", map[string]any{"before": "nope"}), "Message not found: nope")
	// Room two's message is not in room one.
	if all := e.call("peter", e.one, "get_messages", map[string]any{"limit": 100}).obj(t); all["count"].(float64) != 7 {
		t.Fatalf("room one has %v messages", all["count"])
	}
}

// TestMessagesAreBoundedByBytes: 100 messages of 10,000 control characters (six bytes
// each once written, and an answer holds them twice) made 12 MB a call. An answer holds
// at most rooms.MaxMessagesBytes of content as JSON writes it, says so with truncated,
// and before reads the rest.
func TestMessagesAreBoundedByBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := strings.Repeat("\x01", rooms.MaxPost) // 60 KB once written
	n := rooms.MaxMessagesBytes/text.JSONSize(body) + 3
	for range n {
		if r := e.call("architect", e.one, "post_message", map[string]any{"content": body}); r.IsError {
			t.Fatal(r.Text)
		}
	}
	got := e.call("peter", e.one, "get_messages", map[string]any{"limit": rooms.MaxMessagesLimit}).obj(t)
	msgs := got["messages"].([]any)
	size := 0
	for _, m := range msgs {
		size += text.JSONSize(str(m.(map[string]any), "content"))
	}
	if len(msgs) == 0 || len(msgs) >= n || size > rooms.MaxMessagesBytes || got["count"].(float64) != float64(len(msgs)) {
		t.Fatalf("%d of %d messages, %d bytes of content", len(msgs), n, size)
	}
	rest := e.call("peter", e.one, "get_messages", map[string]any{"limit": rooms.MaxMessagesLimit, "before": str(msgs[0].(map[string]any), "id")}).obj(t)
	t.Run("before reads the rest", func(t *testing.T) {
		if c := int(rest["count"].(float64)); c != n-len(msgs) {
			t.Fatalf("before the page, %d of the %d older messages", c, n-len(msgs))
		}
	})
	// Fewer messages than limit is otherwise a room that holds no more: the cut answer
	// says it was cut, and only it.
	t.Run("the cut answer says truncated", func(t *testing.T) {
		if got["truncated"] != true {
			t.Fatalf("%d of %d messages and no truncated: %v", len(msgs), n, got["truncated"])
		}
	})
	t.Run("a whole answer has no truncated", func(t *testing.T) {
		if _, ok := rest["truncated"]; ok {
			t.Fatalf("the rest, which fits, says truncated: %v", rest["truncated"])
		}
	})
}

func TestMessageFromFormats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Pat joins before the agents' first calls: a resolved caller's directory may be up
	// to tenancy.ScopeCacheTTL old (docs/tenancy.md), and this test is about how names
	// are shown, not how soon a new member appears.
	userID := uuid.Must(uuid.NewV7())
	e.exec("INSERT INTO app_user (id, email, name) VALUES ($1, 'pm@acme.test', 'Pat')", userID)
	e.exec("INSERT INTO org_member (org_id, user_id, role) VALUES ($1, $2, 'member')", e.res.Organisations["acme"].ID, userID)
	e.call("architect", e.one, "post_message", map[string]any{"content": "agent with a model"}).obj(t)
	e.call("gavin", e.one, "post_message", map[string]any{"content": "agent without a model"}).obj(t)
	// A person's message keeps the name they had when posting (author_name); one from
	// before that column reads the directory, which shows a person only to their own
	// organisation.
	insert := func(content string, agent, user *uuid.UUID, org *uuid.UUID, name *string) {
		e.exec(`INSERT INTO room_message (project_id, id, author_agent_id, author_user_id, author_org_id, author_name, content) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			e.one, uuid.Must(uuid.NewV7()), agent, user, org, name, content)
	}
	acme, pat := e.res.Organisations["acme"].ID, "Pat"
	insert("a person", nil, &userID, &acme, &pat)
	insert("a person from before names were kept", nil, &userID, &acme, nil)
	insert("a person whose name is gone", nil, &userID, &acme, nil)
	insert("an agent that was deleted", nil, nil, nil, nil)

	for _, c := range []struct {
		viewer string
		want   []string
	}{
		{"architect", []string{ // the host's own agent reads its organisation's directory
			"Architect [Acme Corp] (agent · claude-opus-4)",
			"Gavin [Hooli] (agent)",
			"Pat [Acme Corp] (human)",
			"Pat [Acme Corp] (human)",
			"Pat [Acme Corp] (human)",
			"Agent [Unknown org] (agent)",
		}},
		{"gavin", []string{ // a guest sees the host person's kept name, not "Human"
			"Architect [Acme Corp] (agent · claude-opus-4)",
			"Gavin [Hooli] (agent)",
			"Pat [Acme Corp] (human)",
			"Human [Acme Corp] (human)",
			"Human [Acme Corp] (human)",
			"Agent [Unknown org] (agent)",
		}},
	} {
		t.Run(c.viewer, func(t *testing.T) {
			msgs := e.call(c.viewer, e.one, "get_messages", nil).obj(t)["messages"].([]any)
			if len(msgs) != len(c.want) {
				t.Fatalf("messages: %s", fmtJSON(msgs))
			}
			for i, w := range c.want {
				if got := str(msgs[i].(map[string]any), "from"); got != w {
					t.Errorf("message %d from = %q, want %q", i, got, w)
				}
			}
		})
	}
	// A name blanked in the directory after posting leaves the fallback.
	e.exec("UPDATE app_user SET name = '' WHERE id = $1", userID)
	msgs := e.call("architect", e.one, "get_messages", nil).obj(t)["messages"].([]any)
	if got := str(msgs[3].(map[string]any), "from"); got != "Human [Acme Corp] (human)" {
		t.Fatalf("a blanked name: %q", got)
	}
}

type recordingQueue struct {
	mu   sync.Mutex
	reqs []wake.Request
}

func (q *recordingQueue) Queue(_ context.Context, _ *pg.Tx, r wake.Request) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reqs = append(q.reqs, r)
	return nil
}

// New work wakes the always-on agents it concerns, and only those: a session agent sees
// it at its next call. The service keeps the always-on parts itself (their kind comes
// with the lookup it makes anyway), so the wake service is handed exactly the parts to
// wake.
func TestNewWorkQueuesWakes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := &recordingQueue{}
	e.svc.Wakes = q
	ctx := context.Background()
	arch, qa := e.scope("architect", e.one), e.scope("qa-lead", e.one)
	// An urgent task wakes past the recipient's budget only from a part with the urgent
	// capability, as an urgent message does; without it, within the budget.
	if _, err := e.svc.SendTask(ctx, arch, rooms.SendTaskInput{ToAgentSlug: "qa-lead", Goal: "triage", Priority: "urgent"}); err != nil {
		t.Fatal(err)
	}
	if len(q.reqs) != 1 || q.reqs[0].Urgent {
		t.Fatalf("an urgent task from a part without the urgent capability: %+v", q.reqs)
	}
	q.reqs = nil
	arch.Capabilities = append(arch.Capabilities, tenancy.CapUrgent)
	res, err := e.svc.SendTask(ctx, arch, rooms.SendTaskInput{ToAgentSlug: "qa-lead", Goal: "triage", Priority: "urgent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.reqs) != 1 || q.reqs[0].Source != "task" || !q.reqs[0].Urgent ||
		len(q.reqs[0].MemberIDs) != 1 || q.reqs[0].MemberIDs[0] != qa.MemberID || q.reqs[0].ItemID.String() != res.TaskID {
		t.Fatalf("task wake: %+v", q.reqs)
	}
	// A task for a session agent wakes nobody.
	back, err := e.svc.SendTask(ctx, qa, rooms.SendTaskInput{ToAgentSlug: "architect", Goal: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.reqs) != 1 {
		t.Fatalf("a task for a session agent queued a wake: %+v", q.reqs[1:])
	}
	// A message wakes the room's always-on agents but the poster: qa-lead alone.
	if _, err := e.svc.PostMessage(ctx, arch, "hello"); err != nil {
		t.Fatal(err)
	}
	if w := q.reqs[1]; w.Source != "room_message" || len(w.MemberIDs) != 1 || w.MemberIDs[0] != qa.MemberID {
		t.Fatalf("message wake: %+v", w)
	}
	if _, err := e.svc.PostMessage(ctx, qa, "hello"); err != nil {
		t.Fatal(err)
	}
	if len(q.reqs) != 2 {
		t.Fatalf("the always-on poster was woken by its own message: %+v", q.reqs[2:])
	}
	// A response wakes an always-on sender, and not a session one.
	if _, err := e.svc.RespondToTask(ctx, qa, rooms.RespondInput{TaskID: res.TaskID, Result: "ok", Status: "done"}); err != nil {
		t.Fatal(err)
	}
	if len(q.reqs) != 2 {
		t.Fatalf("a response woke a session sender: %+v", q.reqs[2:])
	}
	if _, err := e.svc.RespondToTask(ctx, arch, rooms.RespondInput{TaskID: back.TaskID, Result: "ok", Status: "done"}); err != nil {
		t.Fatal(err)
	}
	if w := q.reqs[2]; w.Source != "task" || len(w.MemberIDs) != 1 || w.MemberIDs[0] != qa.MemberID {
		t.Fatalf("response wake: %+v", w)
	}
	// A refused call queues nothing.
	if _, err := e.svc.PostMessage(ctx, e.scope("hank", e.one), "x"); err == nil {
		t.Fatal("pending guest posted")
	}
	if len(q.reqs) != 3 {
		t.Fatalf("wakes: %d", len(q.reqs))
	}
}

// TestPostMessageBoundsItsContent: the service holds post_message's bound itself, for the
// dashboard's posts that no tool schema checks: past the column's bound such a post
// failed as an internal error.
func TestPostMessageBoundsItsContent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sc := e.scope("architect", e.one)
	if _, err := e.svc.PostMessage(context.Background(), sc, strings.Repeat("é", rooms.MaxPost)); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	for _, n := range []int{rooms.MaxPost + 1, 20_001} {
		_, err := e.svc.PostMessage(context.Background(), sc, strings.Repeat("é", n))
		if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || !strings.Contains(e.Message, "at most 10000 characters") {
			t.Fatalf("%d characters: %v", n, err)
		}
	}
}
