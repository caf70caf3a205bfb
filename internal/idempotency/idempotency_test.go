package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/idempotency"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// seedAgent writes an organisation and its agent, as the operator.
func seedAgent(t *testing.T, d *pg.DB) tenancy.Scope {
	t.Helper()
	sc := tenancy.Scope{OrgID: uuid.New(), AgentID: uuid.New()}
	err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		if _, err := tx.Exec(context.Background(), "INSERT INTO organisation (id, slug, name) VALUES ($1, $2, $2)", sc.OrgID, "o"+sc.OrgID.String()[:8]); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), "INSERT INTO agent (id, org_id, slug, name) VALUES ($1, $2, 'a1', 'a1')", sc.AgentID, sc.OrgID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestStore(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	sc := seedAgent(t, d)
	s := &idempotency.Store{DB: d, Q: db.New()}

	t.Run("the answer is stored even when the request was canceled", func(t *testing.T) {
		run := committedRun(t, d, s, sc, "k-cancel")
		gone, cancel := context.WithCancel(context.Background())
		cancel() // the client hung up after the COMMIT
		if err := run.Save(gone, json.RawMessage(`{"content":[],"isError":false}`)); err != nil {
			t.Fatalf("save: %v", err)
		}
		if n := testfix.Scalar[int](t, d, "SELECT count(*) FROM idempotency_key WHERE key = 'k-cancel' AND response IS NOT NULL"); n != 1 {
			t.Fatal("the answer of a canceled request was not stored: its retry could not replay it")
		}
	})

	t.Run("the clean-up deletes expired keys in batches and keeps live ones", func(t *testing.T) {
		err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			_, err := tx.Exec(context.Background(), `INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool, created_at)
				SELECT $1::uuid, $2::uuid, 'cleanup', 'old-' || i, sha256(''::bytea), 't', now() - interval '25 hours' FROM generate_series(1, $3::int) i
				UNION ALL SELECT $1::uuid, $2::uuid, 'cleanup', 'live', sha256(''::bytea), 't', now() - interval '23 hours'`,
				sc.OrgID, sc.AgentID, idempotency.CleanupBatch+1)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.DeleteExpired(context.Background())
		if err != nil || n < idempotency.CleanupBatch+1 {
			t.Fatalf("deleted %d, %v", n, err)
		}
		if left := testfix.Scalar[int](t, d, "SELECT count(*) FROM idempotency_key WHERE principal = 'cleanup'"); left != 1 {
			t.Fatalf("%d keys left, want the live one", left)
		}
		// With the clock a day later, the live key expires too.
		later := &idempotency.Store{DB: d, Q: db.New(), Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
		if _, err := later.DeleteExpired(context.Background()); err != nil {
			t.Fatal(err)
		}
		if left := testfix.Scalar[int](t, d, "SELECT count(*) FROM idempotency_key WHERE principal = 'cleanup'"); left != 0 {
			t.Fatalf("%d keys left after they expired", left)
		}
	})

	t.Run("a scope that is not a verified agent is refused", func(t *testing.T) {
		if _, _, err := s.Begin(context.Background(), mcp.IdempotentCall{Endpoint: "threads", Tool: "send", Key: "k", Scope: tenancy.Scope{}}); err == nil {
			t.Fatal("a key without an agent was accepted")
		}
	})
}

func TestPrincipalSeparatesAddressesAndParts(t *testing.T) {
	t.Parallel()
	p1, p2 := uuid.New(), uuid.New()
	seen := map[string]bool{}
	for _, p := range []string{
		idempotency.Principal("all_rooms", tenancy.Scope{}),
		idempotency.Principal("rooms", tenancy.Scope{ProjectID: p1, Part: "backend"}),
		idempotency.Principal("threads", tenancy.Scope{ProjectID: p1, Part: "backend"}),
		idempotency.Principal("threads", tenancy.Scope{ProjectID: p1, Part: "reviewer"}),
		idempotency.Principal("threads", tenancy.Scope{ProjectID: p2, Part: "backend"}),
	} {
		if seen[p] {
			t.Fatalf("principal %q names two addresses", p)
		}
		seen[p] = true
	}
}

// committedRun begins a keyed call for key and commits its claim with a write of its own,
// as a tool's transaction does.
func committedRun(t *testing.T, d *pg.DB, s *idempotency.Store, sc tenancy.Scope, key string) mcp.IdempotentRun {
	t.Helper()
	ctx, run, err := s.Begin(context.Background(), mcp.IdempotentCall{Endpoint: "all_rooms", Tool: "post_message", Key: key, Scope: sc})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.InTenant(ctx, pg.Tenant{OrgID: sc.OrgID, AgentID: sc.AgentID}, func(tx *pg.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool) VALUES ($1, $2, 'write', $3, sha256(''::bytea), 't')", sc.OrgID, sc.AgentID, key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !run.Committed() {
		t.Fatal("the writing transaction did not commit the claim")
	}
	return run
}

// waitFor polls cond until it holds (the test's deadline bounds it).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < time.Second {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdKeyRow locks the row of key until release is closed, so that the answers saved
// meanwhile queue behind the one waiting on it; unlocked answers when the lock is gone.
func holdKeyRow(t *testing.T, d *pg.DB, key string) (release chan struct{}, unlocked chan error) {
	t.Helper()
	locked := make(chan struct{})
	release, unlocked = make(chan struct{}), make(chan error, 1)
	go func() {
		unlocked <- d.Operator(context.Background(), func(tx *pg.Tx) error {
			if _, err := tx.Exec(context.Background(), "SELECT 1 FROM idempotency_key WHERE key = $1 FOR UPDATE", key); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	select {
	case <-locked:
	case err := <-unlocked:
		t.Fatalf("hold the row of %s: %v", key, err)
	}
	return release, unlocked
}

func TestConcurrentAnswersShareTransactions(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	agents := []tenancy.Scope{seedAgent(t, d), seedAgent(t, d)}
	s := &idempotency.Store{DB: d, Q: db.New()}

	// The first answer's UPDATE waits on a row lock held here, so the answers saved
	// meanwhile queue behind its batch.
	first := committedRun(t, d, s, agents[0], "first")
	const later = 31
	runs := make([]mcp.IdempotentRun, later)
	for i := range runs {
		runs[i] = committedRun(t, d, s, agents[i%2], fmt.Sprintf("later-%d", i))
	}
	release, unlocked := holdKeyRow(t, d, "first")
	before := d.RoundTrips()
	saved := make(chan error, later+1)
	save := func(run mcp.IdempotentRun, i int) {
		saved <- run.Save(context.Background(), json.RawMessage(fmt.Sprintf(`{"answer":%d}`, i)))
	}
	go save(first, -1)
	waitFor(t, "the first answer's batch is being stored", func() bool { w, n := s.AnswersQueued(); return w && n == 0 })
	for i, run := range runs {
		go save(run, i)
	}
	waitFor(t, "the later answers wait", func() bool { _, n := s.AnswersQueued(); return n == later })
	close(release)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	for range later + 1 {
		if err := <-saved; err != nil {
			t.Fatalf("save: %v", err)
		}
	}

	t.Run("the answers that waited are stored together, one transaction per agent", func(t *testing.T) {
		// The first batch (1), the lock's COMMIT (1), then one transaction for each of
		// the two agents: one round trip each. One transaction per answer made 32.
		if n := d.RoundTrips() - before; n > 4 {
			t.Fatalf("storing 32 answers took %d round trips, want at most 4", n)
		}
	})
	t.Run("every answer is stored in its own key, under its own agent", func(t *testing.T) {
		for i := range later {
			sc := agents[i%2]
			if n := testfix.Scalar[int](t, d, "SELECT count(*) FROM idempotency_key WHERE org_id = $1 AND agent_id = $2 AND key = $3 AND response = $4::bytea",
				sc.OrgID, sc.AgentID, fmt.Sprintf("later-%d", i), []byte(fmt.Sprintf(`{"answer":%d}`, i))); n != 1 {
				t.Fatalf("the answer of later-%d is not stored in its key", i)
			}
		}
		if n := testfix.Scalar[int](t, d, "SELECT count(*) FROM idempotency_key WHERE key = 'first' AND response IS NOT NULL"); n != 1 {
			t.Fatal("the first answer is not stored")
		}
	})
}

// TestAnswersOutliveTheirRequestsDatabaseBudget: a keyed write whose request spent its
// database budget just as it committed still stores its answer, and so does every answer
// of other agents (other companies) that its caller happens to store in the same batch.
func TestAnswersOutliveTheirRequestsDatabaseBudget(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	a, b, c := seedAgent(t, d), seedAgent(t, d), seedAgent(t, d)
	s := &idempotency.Store{DB: d, Q: db.New()}
	first := committedRun(t, d, s, a, "first")
	spent := committedRun(t, d, s, b, "spent")
	other := committedRun(t, d, s, c, "other")
	// The first answer's row is held, so the next two queue and are stored as one batch
	// by the spent request's caller (the next in line).
	release, unlocked := holdKeyRow(t, d, "first")
	errs := map[string]chan error{"first": make(chan error, 1), "spent": make(chan error, 1), "other": make(chan error, 1)}
	go func() { errs["first"] <- first.Save(context.Background(), json.RawMessage(`{"a":1}`)) }()
	waitFor(t, "first is writing", func() bool { w, n := s.AnswersQueued(); return w && n == 0 })
	go func() {
		errs["spent"] <- spent.Save(pg.WithBudget(context.Background(), 0), json.RawMessage(`{"b":1}`))
	}()
	waitFor(t, "spent waits", func() bool { _, n := s.AnswersQueued(); return n == 1 })
	go func() { errs["other"] <- other.Save(context.Background(), json.RawMessage(`{"c":1}`)) }()
	waitFor(t, "other waits", func() bool { _, n := s.AnswersQueued(); return n == 2 })
	close(release)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"spent", "other"} {
		t.Run("the answer of "+key+" is stored", func(t *testing.T) {
			if err := <-errs[key]; err != nil {
				t.Fatalf("save: %v", err)
			}
			if n := testfix.Scalar[int](t, d, "SELECT count(*)::int FROM idempotency_key WHERE key = $1 AND response IS NOT NULL", key); n != 1 {
				t.Fatalf("%d stored answers, want 1: its retry would read in_progress, then answer_lost", n)
			}
		})
	}
	if err := <-errs["first"]; err != nil {
		t.Fatal(err)
	}
}
