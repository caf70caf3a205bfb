package jobs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

func openDB(t *testing.T) *pg.DB {
	t.Helper()
	d, err := pg.Open(context.Background(), pgtest.New(t), pg.Options{MaxConns: 4, OpsMaxConns: 12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// insertOnPgx inserts the job note in a plain pgx transaction of the owner's pool, which
// end then commits or rolls back.
func insertOnPgx(t *testing.T, d *pg.DB, r *jobs.Runner, note string, end func(pgx.Tx, context.Context) error) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Ops.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.InsertTx(ctx, tx, noteArgs{Note: note}, nil); err != nil {
		t.Fatal(err)
	}
	if err := end(tx, ctx); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, r *jobs.Runner) {
	t.Helper()
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// TestPeriodicRunsOnceAcrossReplicas starts two runners on one database, as two replicas
// would: only the elected leader schedules periodic jobs, so a run-on-start job runs once
// (not once per replica) and a frequent one is not doubled.
func TestPeriodicRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	var hourly atomic.Int32
	var mu sync.Mutex
	var ticks []time.Time
	for i := 0; i < 2; i++ {
		r := jobs.New(d.Ops, jobs.Options{FetchPollInterval: 100 * time.Millisecond})
		if err := r.AddPeriodic(jobs.Periodic{Name: "hourly", Every: time.Hour, RunOnStart: true, Run: func(context.Context) error {
			hourly.Add(1)
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		if err := r.AddPeriodic(jobs.Periodic{Name: "tick", Every: 300 * time.Millisecond, Run: func(context.Context) error {
			mu.Lock()
			ticks = append(ticks, time.Now())
			mu.Unlock()
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		start(t, r)
		// The second replica starts after the first's run-on-start job has finished, so a
		// second scheduler would insert it again rather than be stopped by uniqueness.
		time.Sleep(time.Second)
	}
	// Leader election can take a few seconds; measure from the first tick.
	deadline := time.Now().Add(20 * time.Second)
	var first time.Time
	for {
		mu.Lock()
		if len(ticks) > 0 {
			first = ticks[0]
		}
		mu.Unlock()
		if !first.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no periodic run within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(4 * time.Second)
	if n := hourly.Load(); n != 1 {
		t.Fatalf("a run-on-start job ran %d times across two replicas, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	// Counted over 3 s that start 1 s after the first tick: a leader that has just been
	// elected, or a scheduler that was starved of CPU, catches up on the runs it is behind
	// (15 ticks in the first 3 s once in CI), and that is one scheduler, not two. 3 s at one
	// tick per 300 ms is ~10 ticks; two schedulers make ~20 (out of phase: this count), or
	// pairs of ticks at once (in phase: the gaps below).
	from, to := first.Add(time.Second), first.Add(4*time.Second)
	n := 0
	for _, tk := range ticks {
		if !tk.Before(from) && tk.Before(to) {
			n++
		}
	}
	if n < 2 || n > 16 {
		t.Fatalf("%d ticks in 3 s at one per 300 ms: the schedule ran on both replicas or stalled", n)
	}
	// In phase, two schedulers insert each tick twice at once. The times a tick was
	// inserted tell that, not the times it ran: a tick fetched late under load runs right
	// before the next one (96 ms apart once under -race), from one schedule.
	rows, err := d.Ops.Query(context.Background(), `SELECT created_at FROM `+jobs.Schema+`.river_job
		WHERE kind = 'periodic' AND args->>'name' = 'tick' ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	if len(inserted) < len(ticks) {
		t.Fatalf("%d ticks ran but %d were found inserted", len(ticks), len(inserted))
	}
	for i := 1; i < len(inserted); i++ {
		if gap := inserted[i].Sub(inserted[i-1]); gap < 100*time.Millisecond {
			t.Fatalf("two ticks inserted %v apart: scheduled twice", gap)
		}
	}
}

type noteArgs struct {
	Note string `json:"note"`
}

func (noteArgs) Kind() string { return "test_note" }

// TestEnqueueIsTransactional: a job enqueued in a transaction that rolls back never runs;
// one enqueued in a committed transaction always does, whichever way the transaction
// was opened.
func TestEnqueueIsTransactional(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDB(t)
	r := jobs.New(d.Ops, jobs.Options{FetchPollInterval: 100 * time.Millisecond})
	var mu sync.Mutex
	ran := map[string]int{}
	if err := jobs.AddWorker(r, river.WorkFunc(func(ctx context.Context, j *river.Job[noteArgs]) error {
		mu.Lock()
		ran[j.Args.Note]++
		mu.Unlock()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	errRollback := errors.New("roll back")
	// Enqueued before the runner starts, in a transaction that rolls back.
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		if err := r.InsertTx(ctx, jobs.PgxTx(tx), noteArgs{Note: "rolled-back"}, nil); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if err := d.Operator(ctx, func(tx *pg.Tx) error {
		return r.InsertTx(ctx, jobs.PgxTx(tx), noteArgs{Note: "committed"}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	start(t, r)
	// And on a plain pgx transaction of the owner's pool, while running.
	insertOnPgx(t, d, r, "pgx-committed", pgx.Tx.Commit)
	insertOnPgx(t, d, r, "pgx-rolled-back", pgx.Tx.Rollback)
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		done := ran["committed"] == 1 && ran["pgx-committed"] == 1
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed jobs did not run: %v", ran)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	var rows int
	if err := d.Ops.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE kind = 'test_note'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["rolled-back"] != 0 || ran["pgx-rolled-back"] != 0 || rows != 2 {
		t.Fatalf("runs %v, %d job rows: a rolled-back enqueue survived", ran, rows)
	}
}

// TestRiverMigrationsRoundTrip: River's schema comes and goes completely, and comes back.
func TestRiverMigrationsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.NewEmpty(t)
	for i, step := range []func(context.Context, string) error{jobs.MigrateUp, jobs.MigrateUp, jobs.MigrateDown, jobs.MigrateUp, jobs.MigrateDown} {
		if err := step(ctx, u); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = 'river'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema river left behind (%d, %v)", n, err)
	}
}

type stallArgs struct{}

func (stallArgs) Kind() string { return "test_stall" }

// stallWorker holds its worker until release closes, as a delivery to a receiver that
// never answers holds it for its whole timeout.
type stallWorker struct {
	river.WorkerDefaults[stallArgs]
	release chan struct{}
	started atomic.Int32
}

func (w *stallWorker) Work(ctx context.Context, _ *river.Job[stallArgs]) error {
	w.started.Add(1)
	select {
	case <-w.release:
	case <-ctx.Done():
	}
	return nil
}

// TestPeriodicJobsRunWhileDeliveriesStall: deliveries and periodic jobs shared one queue,
// so deliveries to receivers that stall, filling every worker, held back the sweep and
// the other periodic jobs. Deliveries have a queue of their own.
func TestPeriodicJobsRunWhileDeliveriesStall(t *testing.T) {
	t.Parallel()
	d := openDB(t)
	w := &stallWorker{release: make(chan struct{})}
	defer close(w.release)
	r := jobs.New(d.Ops, jobs.Options{FetchPollInterval: 100 * time.Millisecond, MaxWorkers: 2})
	if err := jobs.AddWorker(r, w); err != nil {
		t.Fatal(err)
	}
	var ticks atomic.Int32
	if err := r.AddPeriodic(jobs.Periodic{Name: "tick", Every: 200 * time.Millisecond, Run: func(context.Context) error {
		ticks.Add(1)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	start(t, r)
	tx, err := d.Ops.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range 6 { // three times the workers
		if err := r.InsertTx(context.Background(), tx, stallArgs{}, &river.InsertOpts{Queue: jobs.QueueDeliveries}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.started.Load() < 2 { // every delivery worker is held
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries started", w.started.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	from := ticks.Load()
	for ticks.Load() < from+3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks while the deliveries stalled", ticks.Load()-from)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
