package wake_test

import (
	"context"
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
