// Package jobs is the background work of the service: a Postgres job queue (River, in its
// own schema "river") with retries, transactional enqueue, and periodic jobs that run once
// across any number of replicas because only the elected leader schedules them.
//
// River runs on the owner's session pool (pg.DB.Session: the owner's pool itself, or its
// own pool on the direct URL behind a transaction pooler, since River holds a LISTEN):
// sweeps span tenants and the request role has no grant on schema river. A job enqueued with InsertTx in the transaction of the write
// that caused it commits or rolls back with that write.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// Schema holds River's tables, apart from the service's own in public.
const Schema = "river"

// Periodic is a job run every Every, once across all replicas (the leader schedules it).
// A run that is still going when the next is due is not doubled: the next one waits.
type Periodic struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) error
	// Timeout bounds one run (default: Every, at least 30 s and at most
	// DefaultPeriodicTimeout). A run cut short leaves the rest to the next tick, so periodic
	// work is written in steps that each commit.
	Timeout time.Duration
	// RunOnStart also runs it as soon as a leader is elected.
	RunOnStart bool
}

// DefaultPeriodicTimeout caps the default timeout of a periodic run. Runs are bounded
// short because the longest one sets how long a replica's death keeps its jobs stuck
// (rescueAfter): a ten-minute clean-up would hold the embedding backlog for eleven.
const DefaultPeriodicTimeout = 2 * time.Minute

// Options tune the runner; zero values are production defaults.
type Options struct {
	Log *slog.Logger
	// ID names this runner in River's tables (default: random).
	ID string
	// RetryBase and RetryCap shape the retry backoff of failing jobs: RetryBase·2^(n-1)
	// after the n-th failure, ±10 %, at most RetryCap (defaults 10 s and 1 h).
	RetryBase, RetryCap time.Duration
	// FetchPollInterval is how often idle workers look for due jobs besides being
	// notified (default 1 s).
	FetchPollInterval time.Duration
	// MaxWorkers is the number of jobs run at once by this replica (default 10).
	MaxWorkers int
	// JobTimeout bounds a run of a job whose worker sets no Timeout of its own (default
	// 1 min). A worker's own Timeout must not exceed it nor any periodic job's Timeout:
	// RescueAfter is derived from them.
	JobTimeout time.Duration
}

// Runner owns the River client. Register workers and periodic jobs, then Start.
type Runner struct {
	pool     *pgxpool.Pool
	opts     Options
	workers  *river.Workers
	periodic map[string]Periodic
	order    []string

	mu     sync.Mutex
	client *river.Client[pgx.Tx]
}

// New prepares a runner on the owner's pool.
func New(pool *pgxpool.Pool, opts Options) *Runner {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = 10 * time.Second
	}
	if opts.RetryCap <= 0 {
		opts.RetryCap = time.Hour
	}
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = time.Minute
	}
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = 10
	}
	r := &Runner{pool: pool, opts: opts, workers: river.NewWorkers(), periodic: map[string]Periodic{}}
	river.AddWorker(r.workers, &periodicWorker{r: r})
	return r
}

// QueueDeliveries is the queue of outbound deliveries (wake webhooks), apart from the
// default queue's periodic jobs: deliveries to receivers that stall hold their workers
// for their whole timeout, and the sweep (unparking, replays), the idle close and the
// other periodic jobs queued behind them on one queue.
const QueueDeliveries = "deliveries"

// AddWorker registers a job kind. It must be called before Start or the first insert.
func AddWorker[T river.JobArgs](r *Runner, w river.Worker[T]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return errors.New("jobs: AddWorker after the runner was started")
	}
	return river.AddWorkerSafely(r.workers, w)
}

// AddPeriodic registers a periodic job. It must be called before Start.
func (r *Runner) AddPeriodic(p Periodic) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.client != nil:
		return errors.New("jobs: AddPeriodic after the runner was started")
	case p.Name == "" || p.Every <= 0 || p.Run == nil:
		return fmt.Errorf("jobs: periodic job %q needs a name, a positive interval and a function", p.Name)
	case r.periodic[p.Name].Run != nil:
		return fmt.Errorf("jobs: periodic job %q registered twice", p.Name)
	}
	if p.Timeout <= 0 {
		p.Timeout = min(max(p.Every, 30*time.Second), DefaultPeriodicTimeout)
	}
	r.periodic[p.Name] = p
	r.order = append(r.order, p.Name)
	return nil
}

// Client returns the River client, creating it on first use (registrations end then).
func (r *Runner) Client() (*river.Client[pgx.Tx], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	var periodic []*river.PeriodicJob
	for _, name := range r.order {
		p := r.periodic[name]
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(p.Every),
			func() (river.JobArgs, *river.InsertOpts) {
				return PeriodicArgs{Name: name}, &river.InsertOpts{
					MaxAttempts: 1, // a failed tick is not retried: the next tick does the work
					UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
						rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
						rivertype.JobStateRetryable, rivertype.JobStateScheduled,
					}},
				}
			}, &river.PeriodicJobOpts{ID: name, RunOnStart: p.RunOnStart}))
	}
	c, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		ID:           r.opts.ID,
		Schema:       Schema,
		Logger:       slog.New(newQuietRepeats(r.opts.Log.Handler(), slog.LevelWarn, time.Now)).With("component", "jobs"),
		Workers:      r.workers,
		PeriodicJobs: periodic,
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: r.opts.MaxWorkers},
			QueueDeliveries:    {MaxWorkers: r.opts.MaxWorkers},
		},
		RetryPolicy:                 &backoff{base: r.opts.RetryBase, cap: r.opts.RetryCap},
		FetchPollInterval:           r.opts.FetchPollInterval,
		CompletedJobRetentionPeriod: time.Hour,
		JobTimeout:                  r.opts.JobTimeout,
		RescueStuckJobsAfter:        r.rescueAfter(),
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: client: %w", err)
	}
	r.client = c
	return c, nil
}

// rescueAfter is how long a job may stay running before River takes it for stuck (its
// replica died mid-run: killed, out of memory, stopped past its grace period) and retries
// it, or discards it when it has no attempt left. River's default is an hour, during
// which a dead replica's periodic tick, still "running", holds the job's unique slot: the
// job would run nowhere (the embedding backlog, the wake sweep) and a webhook delivery
// would wait. It must exceed every run's timeout, or a slow live run would be taken for
// stuck and run twice; the margin covers the gap between the timeout and the cancel.
// Called with r.mu held.
func (r *Runner) rescueAfter() time.Duration {
	longest := r.opts.JobTimeout
	for _, p := range r.periodic {
		longest = max(longest, p.Timeout)
	}
	return longest + min(longest, time.Minute)
}

// Start runs workers (and, when elected leader, the periodic schedule) until Stop.
func (r *Runner) Start(ctx context.Context) error {
	c, err := r.Client()
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("jobs: start: %w", err)
	}
	return nil
}

// Stop lets running jobs finish until ctx ends, then cancels them.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	c := r.client
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	if err := c.Stop(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return c.StopAndCancel(context.WithoutCancel(ctx))
		}
		return fmt.Errorf("jobs: stop: %w", err)
	}
	return nil
}

// InsertTx enqueues a job in tx: it runs only if tx commits. tx must belong to the owner's
// role (pg.DB.Operator via PgxTx, or a transaction begun on pg.DB.Ops).
func (r *Runner) InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) error {
	c, err := r.Client()
	if err != nil {
		return err
	}
	if _, err := c.InsertTx(ctx, tx, args, opts); err != nil {
		return fmt.Errorf("jobs: insert %s: %w", args.Kind(), err)
	}
	return nil
}

// InsertManyTx enqueues several jobs in tx.
func (r *Runner) InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	c, err := r.Client()
	if err != nil {
		return err
	}
	if _, err := c.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("jobs: insert %d jobs: %w", len(params), err)
	}
	return nil
}

// PeriodicArgs is the job the leader enqueues for a periodic job's tick.
type PeriodicArgs struct {
	Name string `json:"name"`
}

// Kind implements river.JobArgs.
func (PeriodicArgs) Kind() string { return "periodic" }

type periodicWorker struct {
	river.WorkerDefaults[PeriodicArgs]
	r *Runner
}

func (w *periodicWorker) lookup(name string) (Periodic, bool) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	p, ok := w.r.periodic[name]
	return p, ok
}

func (w *periodicWorker) Timeout(j *river.Job[PeriodicArgs]) time.Duration {
	if p, ok := w.lookup(j.Args.Name); ok {
		return p.Timeout
	}
	return time.Minute
}

func (w *periodicWorker) Work(ctx context.Context, j *river.Job[PeriodicArgs]) error {
	p, ok := w.lookup(j.Args.Name)
	if !ok {
		// Another version of the service scheduled it; this one does not know it.
		return river.JobCancel(fmt.Errorf("unknown periodic job %q", j.Args.Name))
	}
	start := time.Now()
	err := p.Run(ctx)
	if err != nil {
		w.r.opts.Log.ErrorContext(ctx, "periodic job failed", "job", p.Name, "error", err.Error(),
			"duration_ms", time.Since(start).Milliseconds())
		return err
	}
	w.r.opts.Log.DebugContext(ctx, "periodic job done", "job", p.Name, "duration_ms", time.Since(start).Milliseconds())
	return nil
}

// backoff retries after base·2^(n-1) ±10 %, capped.
type backoff struct{ base, cap time.Duration }

func (b *backoff) NextRetry(job *rivertype.JobRow) time.Time {
	n := max(job.Attempt, 1)
	d := b.base
	for i := 1; i < n && d < b.cap; i++ {
		d *= 2
	}
	d = min(d, b.cap)
	jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(d))
	return time.Now().Add(d + jitter)
}
