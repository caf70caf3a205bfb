package jobs_test

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// The replica that TestPeriodicJobRunsAgainAfterItsReplicaIsKilled kills: run as a child
// process of the test binary, it runs the periodic job "sweep", which blocks until its
// timeout, after writing a file that says it began.
const (
	childDBEnv   = "RELAYROOM_JOBS_CHILD_DB"
	childFlagEnv = "RELAYROOM_JOBS_CHILD_FLAG"
)

// rescueTestTimeout is the periodic job's timeout (and the runners' JobTimeout) in the
// test, so that River takes a dead run for stuck after seconds, not minutes.
const rescueTestTimeout = 2 * time.Second

func TestKilledReplica(t *testing.T) {
	u := os.Getenv(childDBEnv)
	if u == "" {
		t.Skip("the child replica of TestPeriodicJobRunsAgainAfterItsReplicaIsKilled")
	}
	d, err := pg.Open(context.Background(), u, pg.Options{MaxConns: 2, OpsMaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	r := jobs.New(d.Ops, jobs.Options{FetchPollInterval: 100 * time.Millisecond, JobTimeout: rescueTestTimeout})
	err = r.AddPeriodic(jobs.Periodic{Name: "sweep", Every: 500 * time.Millisecond, RunOnStart: true, Timeout: rescueTestTimeout,
		Run: func(ctx context.Context) error {
			if err := os.WriteFile(os.Getenv(childFlagEnv), []byte("running"), 0o600); err != nil {
				return err
			}
			<-ctx.Done() // still running when the parent kills the process
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {} // until killed
}

// TestPeriodicJobRunsAgainAfterItsReplicaIsKilled: a replica killed while it runs a
// periodic job (SIGKILL, as an out-of-memory kill or a stop past its grace period) leaves
// the run "running" in River's table, holding the job's unique slot. The surviving
// replica takes it for stuck once it has run longer than any run may, and the job runs
// again there, instead of nowhere for River's default hour.
func TestPeriodicJobRunsAgainAfterItsReplicaIsKilled(t *testing.T) {
	t.Parallel()
	u := pgtest.New(t)
	flag := t.TempDir() + "/began"
	child := exec.Command(os.Args[0], "-test.run=^TestKilledReplica$")
	child.Env = append(os.Environ(), childDBEnv+"="+u, childFlagEnv+"="+flag)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(flag); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			t.Fatal("the child replica never began its periodic job")
		}
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // killed: its exit status is the signal's

	d, err := pg.Open(context.Background(), u, pg.Options{MaxConns: 2, OpsMaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	var runs atomic.Int32
	r := jobs.New(d.Ops, jobs.Options{FetchPollInterval: 100 * time.Millisecond, JobTimeout: rescueTestTimeout})
	err = r.AddPeriodic(jobs.Periodic{Name: "sweep", Every: 500 * time.Millisecond, RunOnStart: true, Timeout: rescueTestTimeout,
		Run: func(context.Context) error { runs.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	start(t, r)
	// The dead replica's leadership lapses, the survivor is elected, its rescuer (which
	// runs on election, then every 30 s) finds the dead run, and the next tick runs.
	for deadline := time.Now().Add(90 * time.Second); runs.Load() == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			var state string
			if err := d.Ops.QueryRow(context.Background(),
				`SELECT state FROM river.river_job WHERE kind = 'periodic' ORDER BY id LIMIT 1`).Scan(&state); err != nil {
				t.Fatal(err)
			}
			t.Fatalf("the periodic job never ran on the surviving replica; the dead replica's run is %q", state)
		}
	}
}
