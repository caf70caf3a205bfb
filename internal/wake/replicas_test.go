package wake_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/wake"
)

// TestWakeReachesAPagerOnAnotherReplica: two services on one database stand for two
// replicas behind a load balancer. A pager long-polls the second; the wake is queued
// through the first. The second's poll interval is longer than the pager's wait, so the
// pager gets its wake only through the first replica's NOTIFY reaching the second's
// listener.
func TestWakeReachesAPagerOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithCancel(f.ctx)
	other := wake.New(wake.Deps{DB: f.d, Now: f.clock.Now, PollInterval: time.Hour})
	done := make(chan struct{}, 2)
	go func() { f.svc.Run(ctx); done <- struct{}{} }()
	go func() { other.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })

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
	f.queue(f.msg("a"))
	select {
	case w := <-got:
		if w == nil {
			t.Fatal("the pager on the other replica waited its whole long poll: the NOTIFY did not reach it")
		}
	case err := <-errs:
		t.Fatal(err)
	}
}

// BenchmarkWakeAcrossReplicas measures how long a wake queued through one replica takes
// to reach a pager long-polling another (two services on one database, as in
// TestWakeReachesAPagerOnAnotherReplica): from the queueing transaction's start to the
// pager's Next returning the wake, which is then acknowledged. It reports the median and
// the slowest delivery; docs/scale.md records a run (the target is within a second).
func BenchmarkWakeAcrossReplicas(b *testing.B) {
	f := setup(b)
	f.budget(100_000) // the highest budget a project may set: every iteration is a delivery
	ctx, cancel := context.WithCancel(f.ctx)
	other := wake.New(wake.Deps{DB: f.d, Now: f.clock.Now, PollInterval: time.Hour})
	done := make(chan struct{}, 2)
	go func() { f.svc.Run(ctx); done <- struct{}{} }()
	go func() { other.Run(ctx); done <- struct{}{} }()
	b.Cleanup(func() { cancel(); <-done; <-done })

	took := make([]time.Duration, 0, b.N)
	for b.Loop() {
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
			took = append(took, time.Since(t0))
			if w == nil {
				b.Fatal("the pager on the other replica waited its whole long poll: the NOTIFY did not reach it")
			}
			if _, err := other.Ack(ctx, f.agent["a"], w.ID); err != nil {
				b.Fatal(err)
			}
		case err := <-errs:
			b.Fatal(err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "ms-max")
}
