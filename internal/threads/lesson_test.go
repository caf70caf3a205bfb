package threads_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/threads"
)

func lesson(title, body string) *knowledge.LessonInput {
	return &knowledge.LessonInput{Title: title, Body: body, Kind: "pitfall"}
}

// goodLesson is a lesson the knowledge service records when nothing stands in its way.
func goodLesson() *knowledge.LessonInput {
	return lesson("Check the rollback path first", "Before merging a migration, run the down migration on a copy of production data.")
}

// open starts a thread from architect to the given parts.
func (e *env) open(t *testing.T, to ...string) string {
	t.Helper()
	if len(to) == 0 {
		to = []string{"backend"}
	}
	return e.send(t, "architect", threads.SendInput{To: to, Subject: "s", Body: "b"}).ThreadID
}

func (e *env) closeWith(t *testing.T, part, thread string, l *knowledge.LessonInput) threads.CloseResult {
	t.Helper()
	r, err := e.svc.Close(context.Background(), e.sc(part), threads.CloseInput{ThreadID: thread, Lesson: l})
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	if r.Status == "open" {
		t.Fatalf("the close did not happen: %+v", r)
	}
	return r
}

func wantOutcome(t *testing.T, r threads.CloseResult, code string) {
	t.Helper()
	if r.Lesson == nil || r.Lesson.Recorded || r.Lesson.Code != code || r.Lesson.Reason == "" {
		t.Fatalf("want lesson outcome %s, got %+v", code, r.Lesson)
	}
}

func TestLessonOnCloseOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	pid := e.sc("architect").ProjectID
	good := goodLesson()

	t.Run("recorded", func(t *testing.T) {
		r := e.closeWith(t, "architect", e.open(t), good)
		if r.Status != "closed" || r.Lesson == nil || !r.Lesson.Recorded || r.Lesson.KnowledgeID == "" {
			t.Fatalf("%+v", r.Lesson)
		}
		list, _ := e.know.List(ctx, pid, "candidate", 100)
		found := false
		for _, k := range list {
			if k.ID.String() == r.Lesson.KnowledgeID && k.Source == "lesson" && k.SourceThreadID != nil && k.Status == "candidate" {
				found = true
			}
		}
		if !found {
			t.Fatal("the lesson is not stored as a candidate citing the thread")
		}
	})
	t.Run("once confirmed, recall says it is a lesson of that thread, by whom and when confirmed", func(t *testing.T) {
		thread := e.open(t)
		r := e.closeWith(t, "architect", thread, lesson("Rotate the signing key before the audit", "The auditors check the key's age; rotate it a week ahead."))
		if r.Lesson == nil || !r.Lesson.Recorded {
			t.Fatalf("%+v", r.Lesson)
		}
		if _, err := e.know.Approve(ctx, pid, uuid.MustParse(r.Lesson.KnowledgeID), "alice"); err != nil {
			t.Fatal(err)
		}
		got, err := e.know.Recall(ctx, e.sc("backend"), knowledge.RecallInput{Query: "signing key audit"})
		if err != nil || len(got.Entries) == 0 || got.Entries[0].ID != r.Lesson.KnowledgeID {
			t.Fatalf("%+v %v", got, err)
		}
		if en := got.Entries[0]; en.Source != "lesson" || en.ThreadID != thread || en.LearnedBy != "architect" || en.ConfirmedAt == nil {
			t.Fatalf("provenance: %+v", en)
		}
		l, err := e.know.Learn(ctx, e.sc("backend"), knowledge.LearnInput{Title: "Audit logs live for 400 days", Body: "Retention of audit logs is 400 days.", Kind: "fact"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.know.Approve(ctx, pid, uuid.MustParse(l.KnowledgeID), "alice"); err != nil {
			t.Fatal(err)
		}
		got, err = e.know.Recall(ctx, e.sc("architect"), knowledge.RecallInput{Query: "audit logs retention"})
		if err != nil || len(got.Entries) == 0 || got.Entries[0].ID != l.KnowledgeID {
			t.Fatalf("%+v %v", got, err)
		}
		if en := got.Entries[0]; en.Source != "learn" || en.ThreadID != "" || en.LearnedBy != "backend" || en.ConfirmedAt == nil {
			t.Fatalf("provenance: %+v", en)
		}
	})
	t.Run("title emptied by redaction", func(t *testing.T) {
		key, _, _ := auth.Generate(auth.AgentKeyPrefix)
		r := e.closeWith(t, "architect", e.open(t), lesson(key, "Rotate keys that were pasted into a chat, the same day, always."))
		if !r.Lesson.Recorded || r.Lesson.Title != "(redacted)" {
			t.Fatalf("%+v", r.Lesson)
		}
	})
	t.Run("a blank lesson is refused and settles nothing: the real one is recorded after", func(t *testing.T) {
		// Blank as sent, it answered empty_after_redaction "(…redacted ())" and was stored as
		// the thread's outcome, so the corrected lesson was already_decided for good.
		th := e.open(t)
		for _, blank := range []*knowledge.LessonInput{lesson("   ", "A durable thing to learn here, written out."), lesson("A fine title", " \n\t "), lesson("A fine title", "--- 👍 ---")} {
			r := e.closeWith(t, "architect", th, blank)
			wantOutcome(t, r, "empty_after_redaction")
			if !strings.Contains(r.Lesson.Reason, "must not be blank") {
				t.Fatalf("reason %q", r.Lesson.Reason)
			}
		}
		if r := e.closeWith(t, "architect", th, good); !r.Lesson.Recorded {
			t.Fatalf("the real lesson: %+v", r.Lesson)
		}
	})
	t.Run("a lesson past a bound or of an unknown kind is refused, the close happens, and it settles nothing", func(t *testing.T) {
		// close's schema bounded the lesson, so such a call was refused whole and the
		// thread stayed open: losing the lesson must never cost the close.
		th := e.open(t)
		for _, bad := range []*knowledge.LessonInput{
			lesson(strings.Repeat("t", knowledge.MaxTitle+1), "A durable thing to learn here, written out."),
			lesson("A fine title", strings.Repeat("b", knowledge.MaxBody+1)),
			{Title: "A fine title", Body: "A durable thing to learn here, written out.", Kind: "howto"},
		} {
			r := e.closeWith(t, "architect", th, bad)
			wantOutcome(t, r, "storage_failed")
			if r.Status != "closed" || !strings.Contains(r.Lesson.Reason, "close again with the lesson corrected") {
				t.Fatalf("%s: %+v", r.Status, r.Lesson)
			}
		}
		if r := e.closeWith(t, "architect", th, good); !r.Lesson.Recorded {
			t.Fatalf("the real lesson: %+v", r.Lesson)
		}
	})
	t.Run("already_decided", func(t *testing.T) {
		th := e.open(t)
		e.closeWith(t, "architect", th, lesson("First lesson of the thread", "Something durable and specific to learn here."))
		wantOutcome(t, e.closeWith(t, "architect", th, lesson("Second lesson", "Another durable thing entirely different.")), "already_decided")
	})
	t.Run("thread_canceled", func(t *testing.T) {
		th := e.open(t)
		if _, err := e.svc.Cancel(ctx, "acme/one", uuid.MustParse(th)); err != nil {
			t.Fatal(err)
		}
		r := e.closeWith(t, "architect", th, good)
		if r.Status != "canceled" {
			t.Fatalf("status %s", r.Status)
		}
		wantOutcome(t, r, "thread_canceled")
	})
	t.Run("unauthorized", func(t *testing.T) {
		wantOutcome(t, e.closeWith(t, "reader", e.open(t, "reader"), good), "unauthorized")
	})
	t.Run("empty_after_redaction", func(t *testing.T) {
		key, _, _ := auth.Generate(auth.AgentKeyPrefix)
		wantOutcome(t, e.closeWith(t, "architect", e.open(t), lesson("A key", key)), "empty_after_redaction")
	})
}

// Outcomes that change project settings run on their own database.
func TestLessonOutcomesFromProjectSettings(t *testing.T) {
	t.Parallel()
	good := goodLesson()

	t.Run("distill_disabled", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// Exactly the SQL the spec documents.
		e.exec(t, `update project
   set knowledge_config = knowledge_config || '{"distillOnClose":false}'::jsonb
 where id = '`+e.sc("architect").ProjectID.String()+`'`)
		wantOutcome(t, e.closeWith(t, "architect", e.open(t), good), "distill_disabled")
		// Read on every decision: turning it back on works without a restart.
		e.exec(t, `update project set knowledge_config = knowledge_config || '{"distillOnClose":true}'::jsonb`)
		if r := e.closeWith(t, "architect", e.open(t), good); !r.Lesson.Recorded {
			t.Fatalf("%+v", r.Lesson)
		}
	})
	t.Run("rate_limited holds for closes at once", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		sc := e.sc("architect")
		e.pastLessons(t, "architect", 59, 10)
		const closes = 6
		ths := make([]string, closes)
		for i := range ths {
			ths[i] = e.open(t)
		}
		// The closes meet at the count: a transaction holding the lessons' table makes each
		// wait there (or, with the agent's lock, wait for it), then all go at once.
		ctx := context.Background()
		tx := e.Holder(t)
		if _, err := tx.Exec(ctx, "LOCK TABLE agent_lesson IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			recorded int
			errs     []error
		)
		for i, th := range ths {
			wg.Go(func() {
				r, err := e.svc.Close(ctx, sc, threads.CloseInput{ThreadID: th,
					Lesson: lesson(fmt.Sprintf("Concurrent lesson %d", i), fmt.Sprintf("Lesson number %d closed at the same moment as the others.", i))})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else if r.Lesson.Recorded {
					recorded++
				}
			})
		}
		e.AwaitLockWaiters(t, closes, nil)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		if recorded != 1 {
			t.Fatalf("%d of %d concurrent lessons recorded with 59 of 60 used, want 1", recorded, closes)
		}
	})
	t.Run("redaction_unresolvable", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.exec(t, `update project set settings = settings || '{"redactionRules":[{"name":"broken","pattern":"([a-z"}]}'::jsonb`)
		wantOutcome(t, e.closeWith(t, "architect", e.open(t), good), "redaction_unresolvable")
	})
	t.Run("rate_limited", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		sc := e.sc("architect")
		// 60 lessons of this agent within the hour, wherever they were recorded (the count
		// is the agent's, across projects); the 61st is refused. Older ones do not count.
		e.pastLessons(t, "architect", 59, 50)
		e.pastLessons(t, "architect", 30, 61)
		sixtieth := e.open(t)
		if r := e.closeWith(t, "architect", sixtieth, good); !r.Lesson.Recorded {
			t.Fatalf("the 60th lesson was refused: %+v", r.Lesson)
		}
		wantOutcome(t, e.closeWith(t, "architect", e.open(t), lesson("Sixty-first", "One lesson too many within the hour.")), "rate_limited")
		// A thread whose lesson is decided says so, not "try again later", which could
		// never succeed.
		wantOutcome(t, e.closeWith(t, "architect", sixtieth, lesson("Another go", "A second lesson for a decided thread.")), "already_decided")
		// Recording the 60th forgot the agent's lessons older than the hour.
		if n := e.count(t, `SELECT count(*) FROM agent_lesson WHERE agent_id = $1`, sc.AgentID); n != 60 {
			t.Fatalf("agent_lesson rows: %d, want the 60 within the hour", n)
		}
		// A refusal for the moment does not decide the thread's lesson: once the hour has
		// passed, closing the ended thread again with the lesson records it.
		limited := e.open(t)
		wantOutcome(t, e.closeWith(t, "architect", limited, lesson("Later lesson", "Worth keeping once the hour allows it.")), "rate_limited")
		e.exec(t, `UPDATE agent_lesson SET created_at = $2 WHERE agent_id = $1`, sc.AgentID, time.Now().Add(-2*time.Hour))
		if r := e.closeWith(t, "architect", limited, lesson("Later lesson", "Worth keeping once the hour allows it.")); !r.Lesson.Recorded {
			t.Fatalf("the lesson refused for the hour was not recorded later: %+v", r.Lesson)
		}
		// Another agent is not limited by it.
		th := e.open(t, "backend")
		if r := e.closeWith(t, "backend", th, lesson("Backend's own lesson", "Backend has its own hourly allowance.")); !r.Lesson.Recorded {
			t.Fatalf("%+v", r.Lesson)
		}
	})
	t.Run("storage_failed", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		// A rule whose replacement makes the title break its length limit: a constraint
		// error, not infrastructure. The close still happens.
		e.exec(t, `update project set settings = settings || jsonb_build_object('redactionRules',
			jsonb_build_array(jsonb_build_object('name', 'codename', 'pattern', 'Falcon', 'replacement', repeat('x', 250))))`)
		th := e.open(t)
		r := e.closeWith(t, "architect", th, lesson("Project Falcon", "Falcon deploys need two approvals, always."))
		wantOutcome(t, r, "storage_failed")
		if n := e.count(t, "SELECT count(*) FROM knowledge"); n != 0 {
			t.Fatalf("%d rows stored", n)
		}
		if n := e.count(t, "SELECT count(*) FROM thread WHERE status = 'closed' AND lesson_outcome = 'storage_failed'"); n != 1 {
			t.Fatal("the close or its outcome was not committed")
		}
	})
}

// holdKnowledgeWrites takes a SHARE lock on the knowledge table from another connection:
// the lesson's insert (ROW EXCLUSIVE) then waits on it, and nothing else of the close does.
// A table lock rather than a row lock on the project (which the insert's foreign key
// would wait on) because on Citus a FOR UPDATE on a reference table locks the
// coordinator's copy only, while the foreign key is checked against the worker's; the
// LOCK is propagated to every shard.
func holdKnowledgeWrites(t *testing.T, e *env) (pgx.Tx, func()) {
	t.Helper()
	ctx := context.Background()
	tx := e.Holder(t)
	if _, err := tx.Exec(ctx, "LOCK TABLE knowledge IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	// Rolling back ends the lock; called again (deferred), it is a no-op.
	return tx, func() { _ = tx.Rollback(ctx) }
}

// pastLessons records n lessons of part's agent, each minutes ago: what the agent's hourly
// limit on lessons counts, or, past the hour, forgets.
func (e *env) pastLessons(t *testing.T, part string, n, minutes int) {
	t.Helper()
	sc := e.sc(part)
	e.exec(t, `INSERT INTO agent_lesson (org_id, agent_id, id, created_at)
		SELECT $1, $2, gen_random_uuid(), now() - make_interval(mins => $3) FROM generate_series(1, $4)`,
		sc.OrgID, sc.AgentID, minutes, n)
}

// connect opens a connection of the test's own to its database, as the owner, closed when
// the test ends.
func (e *env) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// closeAsync closes thread as architect with the lesson l in the background; the channel
// receives the close's error.
func (e *env) closeAsync(thread string, l *knowledge.LessonInput) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := e.svc.Close(context.Background(), e.sc("architect"), threads.CloseInput{ThreadID: thread, Lesson: l})
		errc <- err
	}()
	return errc
}

// lessonWrite finds the backends of a close blocked inside the lesson's write: on Citus the
// write waits on a worker (its shard), where citus_stat_activity sees it under the global
// pid of the coordinator's backend that sent it (terminating that one is the connection
// the service loses); the worker's statement names the shard (public.knowledge_102008).
func lessonWrite(e *env) (activity, pid string) {
	if e.d.Citus() {
		return `citus_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
			AND query LIKE '%INSERT INTO %knowledge%'`, "global_pid"
	}
	return `pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
		AND query LIKE '%INSERT INTO knowledge%'`, "pid"
}

func assertCloseFailedWhole(t *testing.T, e *env, thread string, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("an infrastructure failure during the lesson did not fail the close")
	}
	if apperr.CodeOf(err) != apperr.Unavailable {
		t.Fatalf("want unavailable, got %v", err)
	}
	if n := e.count(t, "SELECT count(*) FROM thread WHERE id = $1 AND status = 'open' AND lesson_outcome IS NULL", uuid.MustParse(thread)); n != 1 {
		t.Fatal("the close was committed despite the failure")
	}
	if n := e.count(t, "SELECT count(*) FROM delivery WHERE thread_id = $1 AND open AND read_at IS NULL", uuid.MustParse(thread)); n != 1 {
		t.Fatal("the inbox changed despite the failure")
	}
	if n := e.count(t, "SELECT count(*) FROM knowledge"); n != 0 {
		t.Fatal("a lesson was stored despite the failure")
	}
}

func TestInfrastructureFailureFailsTheClose(t *testing.T) {
	t.Parallel()
	good := goodLesson()
	// Each case closes th with a lesson while other holds the knowledge table (see
	// holdKnowledgeWrites), makes the close fail in its own way, and returns the close's
	// error; the close must then have failed whole.
	for _, c := range []struct {
		name, want string // want: what the error says, when that matters
		fail       func(t *testing.T, e *env, th string, other pgx.Tx) error
	}{
		{name: "statement timeout", fail: func(t *testing.T, e *env, th string, _ pgx.Tx) error {
			short, err := pg.Open(context.Background(), e.url, pg.Options{MaxConns: 2, OpsMaxConns: 1, StatementTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer short.Close()
			svc := *e.svc
			svc.DB = short
			k := *e.know
			k.DB = short
			svc.Knowledge = &k
			_, err = svc.Close(context.Background(), e.sc("architect"), threads.CloseInput{ThreadID: th, Lesson: good})
			return err
		}},
		{name: "connection lost", fail: func(t *testing.T, e *env, th string, _ pgx.Tx) error {
			errc := e.closeAsync(th, good)
			// Wait until the close is blocked inside the lesson's write, then kill its backend.
			killer := e.connect(t)
			deadline := time.Now().Add(4 * time.Second)
			killed := false
			blocked, pid := lessonWrite(e)
			for time.Now().Before(deadline) && !killed {
				var n int
				if err := killer.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(`+pid+`)) FROM `+blocked).Scan(&n); err != nil {
					t.Fatal(err)
				}
				killed = n > 0
				time.Sleep(20 * time.Millisecond)
			}
			if !killed {
				t.Fatal("the close never reached the lesson's write")
			}
			return <-errc
		}},
		{name: "deadlock", want: "deadlock", fail: func(t *testing.T, e *env, th string, other pgx.Tx) error {
			// The other transaction detects deadlocks late, so the close is the victim.
			if _, err := other.Exec(context.Background(), "SET LOCAL deadlock_timeout = '10s'"); err != nil {
				t.Fatal(err)
			}
			errc := e.closeAsync(th, good)
			watch := e.connect(t)
			blocked, _ := lessonWrite(e)
			for i := 0; i < 200; i++ {
				var n int
				_ = watch.QueryRow(context.Background(), `SELECT count(*) FROM `+blocked).Scan(&n)
				if n > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Now wait for the thread row the close holds: a cycle. The project is named, so
			// on Citus the lock goes to the thread's shard (a lock across shards is refused).
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = other.Exec(context.Background(), "SELECT 1 FROM thread WHERE project_id = $1 AND id = $2 FOR UPDATE",
					e.sc("architect").ProjectID, uuid.MustParse(th))
			}()
			err := <-errc
			<-done
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			th := e.open(t)
			other, release := holdKnowledgeWrites(t, e)
			defer release()
			err := c.fail(t, e, th, other)
			release()
			assertCloseFailedWhole(t, e, th, err)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("not a %s: %v", c.want, err)
			}
		})
	}
}

var _ = db.New
