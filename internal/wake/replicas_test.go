package wake_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/wake"
)

// otherReplica starts f's service and a second one on the same database, standing for two
// replicas behind a load balancer, and returns the second. Its poll interval is longer
// than any pager's wait, so a pager on it gets a wake queued through the first only by
// the first replica's NOTIFY reaching the second's listener.
func otherReplica(tb testing.TB, f *fixture) (context.Context, *wake.Service) {
	ctx, cancel := context.WithCancel(f.ctx)
	other := wake.New(wake.Deps{DB: f.d, Now: f.clock.Now, PollInterval: time.Hour})
	done := make(chan struct{}, 2)
	go func() { f.svc.Run(ctx); done <- struct{}{} }()
	go func() { other.Run(ctx); done <- struct{}{} }()
	tb.Cleanup(func() { cancel(); <-done; <-done })
	return ctx, other
}

// queueAndWait starts a pager's long poll for part a on other, queues a message for a
// through f's service, and returns the wake the pager got and when it got it.
func queueAndWait(ctx context.Context, tb testing.TB, f *fixture, other *wake.Service) (*wake.Wake, time.Duration) {
	tb.Helper()
	got := make(chan *wake.Wake, 1)
	errs := make(chan error, 1)
	go func() {
		w, err := other.Next(ctx, f.agent["a"], 30*time.Second)
		if err != nil {
			errs <- err
			return
		}
		got <- w
	}()
	t0 := time.Now()
	f.queue(f.msg("a"))
	select {
	case w := <-got:
		if w == nil {
			tb.Fatal("the pager on the other replica waited its whole long poll: the NOTIFY did not reach it")
		}
		return w, time.Since(t0)
	case err := <-errs:
		tb.Fatal(err)
	}
	return nil, 0
}

// TestWakeReachesAPagerOnAnotherReplica: a pager long-polls the second replica; the wake
// is queued through the first.
func TestWakeReachesAPagerOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, other := otherReplica(t, f)
	queueAndWait(ctx, t, f, other)
}

// TestADrainingReplicaEndsItsPollsAndStillNotifies: a replica shutting down ends its
// pagers' long polls at once (EndPolls), so they do not hold its drain, and keeps sending
// the NOTIFYs of the writes the drain finishes. The shutdown used to stop both together:
// a send acknowledged during the drain reached a pager on another replica 31 s later, at
// that replica's poll interval.
func TestADrainingReplicaEndsItsPollsAndStillNotifies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, other := otherReplica(t, f)
	t.Run("a long poll on the draining replica ends at once", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			w, err := f.svc.Next(ctx, f.agent["a"], 30*time.Second)
			if err == nil && w != nil {
				t.Errorf("a wake out of nothing: %+v", w)
			}
			done <- err
		}()
		f.svc.EndPolls()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the long poll held on past EndPolls")
		}
	})
	t.Run("a write it finishes still reaches a pager on another replica", func(t *testing.T) {
		queueAndWait(ctx, t, f, other)
	})
}

// BenchmarkWakeAcrossReplicas measures how long a wake queued through one replica takes
// to reach a pager long-polling another (as in TestWakeReachesAPagerOnAnotherReplica):
// from the queueing transaction's start to the pager's Next returning the wake, which is
// then acknowledged. It reports the median and the slowest delivery; docs/scale.md
// records a run (the target is within a second).
func BenchmarkWakeAcrossReplicas(b *testing.B) {
	f := setup(b)
	f.budget(100_000) // the highest budget a project may set: every iteration is a delivery
	ctx, other := otherReplica(b, f)
	took := make([]time.Duration, 0, b.N)
	for b.Loop() {
		w, d := queueAndWait(ctx, b, f, other)
		took = append(took, d)
		if _, err := other.Ack(ctx, f.agent["a"], w.ID); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "ms-max")
}
