package loadtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrExhausted is returned by a call that has no more work to do (every task already
// answered, say): its worker stops and the call is counted neither as success nor failure.
var ErrExhausted = errors.New("loadtest: no more work")

// CallFunc does one call. worker is 0..conns-1 and seq counts that worker's calls, so a
// call can build a unique argument without shared state.
type CallFunc func(ctx context.Context, worker, seq int) error

// Window is how a row is measured: conns workers calling back to back, first for Warmup
// (not counted: connections, prepared statements and caches warm up), then for Duration.
type Window struct {
	Conns    int
	Duration time.Duration
	Warmup   time.Duration
}

// maxKeptErrors bounds the distinct failure messages a Summary keeps.
const maxKeptErrors = 4

// Measure runs call from w.Conns workers and summarises the counted window. A call
// started before the window ends is waited for and counted, so Elapsed covers the tail.
func Measure(ctx context.Context, w Window, call CallFunc) Summary {
	sum, _ := measure(ctx, w, call, nil)
	return sum
}

// measure is Measure, and the CPU the counted window took when probe is not nil.
func measure(ctx context.Context, w Window, call CallFunc, probe *cpuProbe) (Summary, CPU) {
	if w.Warmup > 0 {
		run(ctx, w.Conns, w.Warmup, call, 0)
	}
	if probe == nil {
		return run(ctx, w.Conns, w.Duration, call, countedSeqBase), CPU{}
	}
	before := probe.sample(ctx)
	sum := run(ctx, w.Conns, w.Duration, call, countedSeqBase)
	return sum, between(before, probe.sample(ctx))
}

// countedSeqBase starts the counted pass's seq numbers, so that they never repeat the
// warm-up's (a call may build a unique marker from worker and seq).
const countedSeqBase = 1 << 20

// run is one pass; seqBase keeps the counted pass's seq numbers distinct from the warm-up's.
func run(ctx context.Context, conns int, d time.Duration, call CallFunc, seqBase int) Summary {
	type result struct {
		samples []time.Duration
		errs    int
		msgs    []string
	}
	results := make([]result, conns)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			r := &results[w]
			for seq := seqBase; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
				t0 := time.Now()
				err := call(ctx, w, seq)
				took := time.Since(t0)
				switch {
				case errors.Is(err, ErrExhausted):
					return
				case err != nil:
					r.errs++
					if len(r.msgs) < maxKeptErrors && !slices.Contains(r.msgs, err.Error()) {
						r.msgs = append(r.msgs, err.Error())
					}
				default:
					r.samples = append(r.samples, took)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	var errs int
	var msgs []string
	for _, r := range results {
		all = append(all, r.samples...)
		errs += r.errs
		for _, m := range r.msgs {
			if len(msgs) < maxKeptErrors && !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
	}
	return Summarize(all, errs, elapsed, msgs)
}
