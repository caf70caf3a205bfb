package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// rpcID numbers the JSON-RPC requests of these tests: a replay must not depend on the id.
var rpcID atomic.Int64

// keyedCall is one tools/call over plain HTTP with an optional Idempotency-Key.
type keyedCall struct {
	url, agentKey, idemKey, tool string
	args                         map[string]any
}

// toolAnswer is what a client reads back: the raw result and its decoded parts.
type toolAnswer struct {
	raw     json.RawMessage // the JSON-RPC result, as sent
	isError bool
	text    string
}

// errorCode is the threads format's error code (or "" for the rooms format).
func (a toolAnswer) errorCode() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.text), &e)
	return e.Error.Code
}

func (a toolAnswer) field(t *testing.T, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(a.text), &m); err != nil {
		t.Fatalf("answer is not a JSON object: %s", a.text)
	}
	s, _ := m[name].(string)
	return s
}

func (c keyedCall) do(t *testing.T) toolAnswer {
	t.Helper()
	result, err := callKeyed(http.DefaultClient, c.url, c.agentKey, c.idemKey, c.tool, c.args)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(result, &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("%s: unexpected result %s", c.tool, result)
	}
	return toolAnswer{raw: result, isError: res.IsError, text: res.Content[0].Text}
}

// ok calls and fails the test on a tool error.
func (c keyedCall) ok(t *testing.T) toolAnswer {
	t.Helper()
	a := c.do(t)
	if a.isError {
		t.Fatalf("%s failed: %s", c.tool, a.text)
	}
	return a
}

// refused calls and fails the test unless the tool refuses with the threads format's
// error code given.
func (c keyedCall) refused(t *testing.T, code string) {
	t.Helper()
	if a := c.do(t); !a.isError || a.errorCode() != code {
		t.Fatalf("want %s, got %s", code, a.text)
	}
}

// idemFixture is a started server and the addresses of its demo agents.
type idemFixture struct {
	s  *server
	db *pg.DB
}

// newIdemFixture starts one server for every idempotency test (each server costs the
// shared machine seconds). Before it starts, two keys are written for the clean-up check:
// one older than 24 h, one younger.
func newIdemFixture(t *testing.T) *idemFixture {
	s := startServerWith(t, func(ctx context.Context, d *pg.DB, res admin.Result) {
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool, created_at)
				SELECT a.org_id, a.id, 'threads', k.key, sha256(''::bytea), 'send', k.at
				FROM agent a, (VALUES ('stale', now() - interval '25 hours'), ('fresh', now() - interval '23 hours')) AS k (key, at)
				WHERE a.id = $1`, res.Agents["acme/architect"].ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	return &idemFixture{s: s, db: openSeeded(t, s)}
}

func (f *idemFixture) threads(part, agent string) keyedCall {
	return keyedCall{url: f.s.threadsURL("escalations", part), agentKey: f.s.key(agent)}
}

func (f *idemFixture) room(agent string) keyedCall {
	return keyedCall{url: fmt.Sprintf("%s/api/mcp/p/%s", f.s.base, f.s.res.Projects["escalations"].ID), agentKey: f.s.key(agent)}
}

func (f *idemFixture) allRooms(agent string) keyedCall {
	return keyedCall{url: f.s.base + "/api/mcp", agentKey: f.s.key(agent)}
}

func (f *idemFixture) roomID() string { return f.s.res.Projects["escalations"].ID.String() }

func (c keyedCall) with(key, tool string, args map[string]any) keyedCall {
	c.idemKey, c.tool, c.args = key, tool, args
	return c
}

// count runs a count(*) as the owner (behind RLS).
func (f *idemFixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return testfix.Scalar[int](t, f.db, sql, args...)
}

// wantCount fails t with the message (its %d the count) unless the count(*) is want.
func (f *idemFixture) wantCount(t *testing.T, want int, msg, sql string, args ...any) {
	t.Helper()
	if n := f.count(t, sql, args...); n != want {
		t.Fatalf(msg, n)
	}
}

func (f *idemFixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	testfix.Exec(t, f.db, sql, args...)
}

func newKey() string { return uuid.NewString() }

// TestIdempotencyKey covers the Idempotency-Key header over HTTP on a running server: its
// rules on the threads, room and all-rooms endpoints, every write tool, and the clean-up.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newIdemFixture(t)
	t.Run("rules", func(t *testing.T) { idempotencyRules(t, f) })
	t.Run("every write tool", func(t *testing.T) { idempotencyEveryWriteTool(t, f) })
	t.Run("the periodic clean-up deletes expired keys and keeps live ones", func(t *testing.T) { idempotencyCleanup(t, f) })
}

// idempotencyRules: replay, reuse, concurrency, expiry, read tools, principals, and the
// crash cases.
func idempotencyRules(t *testing.T, f *idemFixture) {
	arch := f.threads("architect", "acme/architect")
	send := map[string]any{"to": []string{"backend"}, "subject": "Deploy", "body": "Rollback reviewed?"}
	// sentThenChanged sends once with a new key, then changes that key's record (set: the
	// UPDATE's SET list) as time passing or a crash would; the caller sends args again. The
	// thread's subject is the key's own: the parallel subtests send threads too, and one
	// of theirs must never be counted as this retry's write. Times are set from now(), not
	// from created_at: a Citus coordinator refuses a STABLE expression over a column in an
	// UPDATE (timestamptz minus an interval), and the suite runs there too.
	sentThenChanged := func(t *testing.T, set string) (key string, args map[string]any, first toolAnswer) {
		t.Helper()
		key = newKey()
		args = map[string]any{"to": []string{"backend"}, "subject": "Deploy " + key, "body": "Rollback reviewed?"}
		first = arch.with(key, "send", args).ok(t)
		f.exec(t, "UPDATE idempotency_key SET "+set+" WHERE key = $1", key)
		return key, args, first
	}

	t.Run("a replay answers the first answer and writes once (threads)", func(t *testing.T) {
		t.Parallel()
		key := newKey()
		// A subject of its own: the parallel subtests below send "Deploy" threads too, and
		// one committed after this one's first write would be counted as its replay's.
		subject := "Deploy " + key
		send := map[string]any{"to": []string{"backend"}, "subject": subject, "body": "Rollback reviewed?"}
		first := arch.with(key, "send", send).ok(t)
		again := arch.with(key, "send", send).ok(t)
		if string(first.raw) != string(again.raw) {
			t.Fatalf("replay differs:\n%s\n%s", first.raw, again.raw)
		}
		tid := first.field(t, "threadId")
		f.wantCount(t, 1, "%d threads", "SELECT count(*) FROM thread WHERE id = $1", uuid.MustParse(tid))
		f.wantCount(t, 1, "the replay wrote a second thread (%d)", "SELECT count(*) FROM thread WHERE subject = $1", subject)
		f.wantCount(t, 1, "%d key rows", "SELECT count(*) FROM idempotency_key WHERE key = $1 AND response IS NOT NULL", key)
	})

	t.Run("a replay answers the first answer and writes once (room, all rooms)", func(t *testing.T) {
		t.Parallel()
		for _, c := range []keyedCall{
			f.room("acme/backend").with(newKey(), "post_message", map[string]any{"content": "room replay " + newKey()}),
			f.allRooms("acme/backend").with(newKey(), "post_message", map[string]any{"room_id": f.roomID(), "content": "all rooms replay " + newKey()}),
		} {
			first, again := c.ok(t), c.ok(t)
			if string(first.raw) != string(again.raw) {
				t.Fatalf("replay differs:\n%s\n%s", first.raw, again.raw)
			}
			f.wantCount(t, 1, "%d messages for one keyed post", "SELECT count(*) FROM room_message WHERE content = $1", c.args["content"])
		}
	})

	t.Run("the same key with another request is refused and writes nothing", func(t *testing.T) {
		t.Parallel()
		key := newKey()
		arch.with(key, "send", send).ok(t)
		other := map[string]any{"to": []string{"backend"}, "subject": "Deploy", "body": "Another body"}
		arch.with(key, "send", other).refused(t, mcp.ReasonIdempotencyKeyReused)
		f.wantCount(t, 0, "the refused request wrote %d messages", "SELECT count(*) FROM message WHERE body = 'Another body'")
		room := f.room("acme/backend").with(key, "post_message", map[string]any{"content": "first " + key})
		room.ok(t)
		room.args = map[string]any{"content": "second " + key}
		if got := room.do(t); !got.isError || !strings.HasPrefix(got.text, "Error: this Idempotency-Key was already used") {
			t.Fatalf("rooms format: %s", got.text)
		}
	})

	t.Run("concurrent duplicates write once and all get the first answer", func(t *testing.T) {
		t.Parallel()
		key, content := newKey(), "concurrent "+newKey()
		c := f.room("acme/backend").with(key, "post_message", map[string]any{"content": content})
		answers := make([]toolAnswer, 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A client retries "in progress" with the same key, as the error says.
				for try := 0; try < 20; try++ {
					if answers[i] = c.do(t); !strings.Contains(answers[i].text, "still in progress") {
						return
					}
				}
			}()
		}
		wg.Wait()
		for i, a := range answers {
			if a.isError || string(a.raw) != string(answers[0].raw) {
				t.Fatalf("answer %d differs from answer 0:\n%s\n%s", i, a.raw, answers[0].raw)
			}
		}
		f.wantCount(t, 1, "8 concurrent duplicates wrote %d messages", "SELECT count(*) FROM room_message WHERE content = $1", content)
	})

	t.Run("a key older than 24 hours is a new key", func(t *testing.T) {
		t.Parallel()
		key, args, first := sentThenChanged(t, "created_at = now() - interval '24 hours 1 second'")
		again := arch.with(key, "send", args).ok(t)
		if first.field(t, "threadId") == again.field(t, "threadId") {
			t.Fatalf("an expired key replayed: %s", again.text)
		}
		f.wantCount(t, 1, "the expired record was not replaced (%d fresh rows)", "SELECT count(*) FROM idempotency_key WHERE key = $1 AND created_at > now() - interval '1 hour'", key)
	})

	t.Run("read tools ignore the header", func(t *testing.T) {
		t.Parallel()
		key := newKey()
		for _, c := range []keyedCall{
			arch.with(key, "roster", nil), arch.with(key, "inbox", nil),
			f.room("acme/backend").with(key, "read_memory", map[string]any{"query": "deploy"}),
			f.allRooms("acme/backend").with(key, "list_rooms", nil),
			arch.with(strings.Repeat("x", 300), "whoami", nil), // even a malformed key
		} {
			c.ok(t)
		}
		f.wantCount(t, 0, "a read tool recorded its key (%d rows)", "SELECT count(*) FROM idempotency_key WHERE key = $1", key)
	})

	t.Run("a malformed key is refused on a write and nothing is written", func(t *testing.T) {
		t.Parallel()
		body := "malformed " + newKey()
		arch.with(strings.Repeat("x", 256), "send", map[string]any{"to": []string{"backend"}, "subject": "x", "body": body}).refused(t, mcp.ReasonInvalidIdempotencyKey)
		f.wantCount(t, 0, "wrote %d messages", "SELECT count(*) FROM message WHERE body = $1", body)
	})

	t.Run("keys of two principals never collide", func(t *testing.T) {
		t.Parallel()
		key := newKey()
		to := map[string]any{"to": []string{"qa-lead"}, "subject": "Same key", "body": "Same body " + key}
		a := arch.with(key, "send", to).ok(t)
		b := f.threads("backend", "acme/backend").with(key, "send", to).ok(t)
		if a.field(t, "threadId") == b.field(t, "threadId") {
			t.Fatal("two agents' requests with one key were taken for one")
		}
		// Another tenant (initech, its own project) with the same key and content.
		peter := keyedCall{url: f.s.threadsURL("other", "peter"), agentKey: f.s.key("initech/peter")}
		peter.with(key, "event", map[string]any{"type": "usage", "usage": map[string]any{"model": "m", "input_tokens": 1}}).ok(t)
		// The same agent through another address: a separate principal too.
		f.room("acme/architect").with(key, "post_message", map[string]any{"content": "same key, room"}).ok(t)
		f.wantCount(t, 4, "want 4 key records (one per principal), got %d", "SELECT count(*) FROM idempotency_key WHERE key = $1", key)
	})

	t.Run("a write whose answer was lost is not applied again", func(t *testing.T) {
		t.Parallel()
		// As after a kill -9 between the COMMIT and storing the answer.
		key, args, first := sentThenChanged(t, "response = NULL, answered_at = NULL, created_at = now() - interval '2 minutes'")
		arch.with(key, "send", args).refused(t, mcp.ReasonIdempotencyAnswerLost)
		f.wantCount(t, 1, "%d messages", "SELECT count(*) FROM message WHERE thread_id = $1", uuid.MustParse(first.field(t, "threadId")))
		f.wantCount(t, 1, "the lost-answer retry wrote again (%d threads)", "SELECT count(*) FROM thread WHERE subject = $1", args["subject"])
	})

	t.Run("a key whose write just committed is in progress", func(t *testing.T) {
		t.Parallel()
		key, args, _ := sentThenChanged(t, "response = NULL, answered_at = NULL")
		arch.with(key, "send", args).refused(t, mcp.ReasonIdempotencyInProgress)
	})
}

// idempotencyEveryWriteTool is generated from tools/list: every tool of every endpoint
// whose readOnlyHint is false must replay a keyed call. A new write tool fails here until
// it has a case (and so a proof that it writes in one transaction).
func idempotencyEveryWriteTool(t *testing.T, f *idemFixture) {
	arch, back := f.threads("architect", "acme/architect"), f.threads("backend", "acme/backend")
	sendTo := func(c keyedCall, part string) toolAnswer {
		return c.with("", "send", map[string]any{"to": []string{part}, "subject": "Setup", "body": "Setup " + newKey()}).ok(t)
	}
	// A case returns who calls and the arguments, preparing what the call needs first
	// (without a key). all is true on the all-rooms address (room_id is added).
	type tcase func(t *testing.T, ep string) (keyedCall, map[string]any)
	roomCaller := func(ep, agent string) keyedCall {
		if ep == "all_rooms" {
			return f.allRooms(agent)
		}
		return f.room(agent)
	}
	roomArgs := func(ep string, args map[string]any) map[string]any {
		if ep == "all_rooms" {
			args["room_id"] = f.roomID()
		}
		return args
	}
	taskFor := func(t *testing.T, ep string) string {
		a := roomCaller(ep, "acme/architect").with("", "send_task", roomArgs(ep, map[string]any{"to_agent_slug": "backend", "goal": "Setup " + newKey()})).ok(t)
		return a.field(t, "task_id")
	}
	threadCases := map[string]tcase{
		"send": func(*testing.T, string) (keyedCall, map[string]any) {
			return arch, map[string]any{"to": []string{"backend"}, "subject": "s", "body": "b"}
		},
		"reply": func(t *testing.T, _ string) (keyedCall, map[string]any) {
			return back, map[string]any{"threadId": sendTo(arch, "backend").field(t, "threadId"), "body": "r"}
		},
		"ack": func(t *testing.T, _ string) (keyedCall, map[string]any) {
			return back, map[string]any{"messageId": sendTo(arch, "backend").field(t, "messageId")}
		},
		"event": func(*testing.T, string) (keyedCall, map[string]any) {
			return arch, map[string]any{"type": "usage", "usage": map[string]any{"model": "m", "input_tokens": 3}}
		},
		"close": func(t *testing.T, _ string) (keyedCall, map[string]any) {
			return arch, map[string]any{"threadId": sendTo(arch, "backend").field(t, "threadId")}
		},
		"learn": func(*testing.T, string) (keyedCall, map[string]any) {
			return back, map[string]any{"title": "Keyed lesson " + newKey(), "body": "Review rollbacks before deploys.", "kind": "fact"}
		},
		"recall_used": func(t *testing.T, _ string) (keyedCall, map[string]any) {
			title := "Recallable " + newKey()
			l := back.with("", "learn", map[string]any{"title": title, "body": "Always rehearse the rollback of a migration.", "kind": "procedure"}).ok(t)
			know, err := knowledge.New(knowledge.Deps{DB: f.db, Q: db.New()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := know.Approve(context.Background(), f.s.res.Projects["escalations"].ID, uuid.MustParse(l.field(t, "knowledgeId")), "ana"); err != nil {
				t.Fatal(err)
			}
			rec := back.with("", "recall", map[string]any{"query": "rehearse the rollback of a migration"}).ok(t)
			return back, map[string]any{"queryId": rec.field(t, "queryId"), "knowledgeId": l.field(t, "knowledgeId")}
		},
	}
	roomCases := map[string]tcase{
		"write_memory": func(_ *testing.T, ep string) (keyedCall, map[string]any) {
			return roomCaller(ep, "acme/backend"), roomArgs(ep, map[string]any{"content": "Keyed memory " + newKey()})
		},
		"get_inbox": func(t *testing.T, ep string) (keyedCall, map[string]any) {
			taskFor(t, ep)
			return roomCaller(ep, "acme/backend"), roomArgs(ep, map[string]any{})
		},
		"send_task": func(_ *testing.T, ep string) (keyedCall, map[string]any) {
			return roomCaller(ep, "acme/architect"), roomArgs(ep, map[string]any{"to_agent_slug": "backend", "goal": "Keyed " + newKey()})
		},
		"respond_to_task": func(t *testing.T, ep string) (keyedCall, map[string]any) {
			return roomCaller(ep, "acme/backend"), roomArgs(ep, map[string]any{"task_id": taskFor(t, ep), "result": "Done.", "status": "done"})
		},
		"post_message": func(_ *testing.T, ep string) (keyedCall, map[string]any) {
			return roomCaller(ep, "acme/backend"), roomArgs(ep, map[string]any{"content": "Keyed " + newKey()})
		},
	}
	lists := map[string]keyedCall{"threads": arch, "rooms": f.room("acme/backend"), "all_rooms": f.allRooms("acme/backend")}
	for ep, lister := range lists {
		cases := roomCases
		if ep == "threads" {
			cases = threadCases
		}
		for _, tool := range writeTools(t, lister) {
			// One endpoint at a time (get_inbox hands out every task of the part).
			t.Run(ep+"/"+tool, func(t *testing.T) {
				c, ok := cases[tool]
				if !ok {
					t.Fatalf("write tool %s of %s has no idempotency case", tool, ep)
				}
				caller, args := c(t, ep)
				key := newKey()
				call := caller.with(key, tool, args)
				first := call.ok(t)
				again := call.ok(t)
				if string(first.raw) != string(again.raw) {
					t.Fatalf("the keyed retry did not replay the first answer:\n%s\n%s", first.raw, again.raw)
				}
				f.wantCount(t, 1, "%d answered key records", "SELECT count(*) FROM idempotency_key WHERE key = $1 AND tool = $2 AND response IS NOT NULL", key, tool)
			})
		}
	}
}

// writeTools lists the tools of an endpoint whose annotations say they write.
func writeTools(t *testing.T, c keyedCall) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Agent-Key", c.agentKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Result struct {
			Tools []struct {
				Name        string
				Annotations struct{ ReadOnlyHint bool }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range list.Result.Tools {
		if !tl.Annotations.ReadOnlyHint {
			out = append(out, tl.Name)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no write tool", c.url)
	}
	return out
}

// idempotencyCleanup proves the clean-up job is wired: of the keys newIdemFixture wrote
// before the server started, the one older than 24 h is deleted, the other kept.
func idempotencyCleanup(t *testing.T, f *idemFixture) {
	deadline := time.Now().Add(30 * time.Second)
	for f.count(t, "SELECT count(*) FROM idempotency_key WHERE key = 'stale'") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the expired key is still there 30 s after start: the periodic clean-up did not run")
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.wantCount(t, 1, "the clean-up deleted a live key (%d left)", "SELECT count(*) FROM idempotency_key WHERE key = 'fresh'")
}

// BenchmarkPostMessageIdempotencyKey measures what a key costs a write (post_message on the
// room endpoint, client and server in this process): without a key, with a new key each
// time (the claim rides with the COMMIT; storing the answer is one more round trip), and a
// replay (the tool runs, its write is rolled back on the key, the stored answer is read).
func BenchmarkPostMessageIdempotencyKey(b *testing.B) {
	s := startServer(b)
	url := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	key := s.key("acme/backend")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	replayKey := uuid.NewString()
	for _, c := range []struct {
		name    string
		idemKey func() string
		content func(i int) string
	}{
		{"no key", func() string { return "" }, func(i int) string { return fmt.Sprintf("bench %d %s", i, uuid.NewString()) }},
		{"new key", uuid.NewString, func(i int) string { return fmt.Sprintf("bench %d %s", i, uuid.NewString()) }},
		{"replay", func() string { return replayKey }, func(int) string { return "bench replay" }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := postKeyed(client, url, key, c.idemKey(), c.content(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAKeyedRetryOfARefusedCallerIsRefused: a keyed write replayed its stored first answer
// whatever the retry found, a refusal of who the caller is now included: a guest whose
// agreement was revoked went on "succeeding" with the same key for 24 hours.
func TestAKeyedRetryOfARefusedCallerIsRefused(t *testing.T) {
	t.Parallel()
	f := newIdemFixture(t)
	post := f.room("globex/qa-lead").with(newKey(), "post_message", map[string]any{"content": "before the revocation"})
	post.ok(t)
	f.exec(t, `UPDATE agreement SET status = 'revoked' WHERE project_id = $1`, f.s.res.Projects["escalations"].ID)
	if a := post.do(t); !a.isError || !strings.Contains(a.text, "No active agreement") {
		t.Fatalf("the keyed retry after the revocation: %s", a.text)
	}
}
