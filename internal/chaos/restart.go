package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayroom/relayroom/internal/loadtest"
	"github.com/relayroom/relayroom/internal/localpg"
)

// postgresRestart runs whoami and post_message from RestartConns connections, restarts
// Postgres (pg_ctl restart -m fast) after a third of RestartLoad, keeps the load on for
// the other two thirds once the restart is done, and reports the failed calls and how long
// until calls succeeded again.
func postgresRestart(ctx context.Context, b *bench, srv *loadtest.Server) (Finding, error) {
	o := b.o
	env, err := b.env(srv, o.RestartConns, 30*time.Second)
	if err != nil {
		return Finding{}, err
	}
	defer env.Client.Close()
	calls := []loadtest.Call{
		env.Threads(loadtest.CallerPart, "whoami", nil),
		env.Room(loadtest.CallerPart, "post_message", map[string]any{"content": "written while Postgres restarts"}),
	}
	type result struct {
		start, end time.Time
		what       string
	}
	var mu sync.Mutex
	var results []result
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range o.RestartConns {
		wg.Go(func() {
			for seq := 0; !stop.Load() && ctx.Err() == nil; seq++ {
				t0 := time.Now()
				_, err := env.Client.Do(ctx, calls[(w+seq)%len(calls)])
				r := result{t0, time.Now(), describe(err)}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if err != nil {
					// A failing client backs off a little, as a real one would.
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(o.RestartLoad / 3)
	restartAt := time.Now()
	_, rerr := localpg.Run(ctx, o.Progress, o.PGScript, "restart", o.PGDir)
	restartTook := time.Since(restartAt)
	if rerr == nil {
		time.Sleep(o.RestartLoad * 2 / 3)
	}
	stop.Store(true)
	wg.Wait()
	if rerr != nil {
		return Finding{}, rerr
	}
	ready := readyzState(ctx, srv.Base)

	var failed int
	var lastFailEnd, firstFail time.Time
	kinds := map[string]int{}
	var slowestFail time.Duration
	for _, r := range results {
		if r.what == "ok" {
			continue
		}
		failed++
		kinds[r.what]++
		if firstFail.IsZero() || r.start.Before(firstFail) {
			firstFail = r.start
		}
		if r.end.After(lastFailEnd) {
			lastFailEnd = r.end
		}
		slowestFail = max(slowestFail, r.end.Sub(r.start))
	}
	// Recovered: a call that started after the last failure ended, and succeeded; the
	// recovery time runs from the restart's start to that call's answer.
	recovered := failed == 0
	var recovery time.Duration
	for _, r := range results {
		if r.what == "ok" && !r.start.Before(lastFailEnd) {
			if d := r.end.Sub(restartAt); !recovered || d < recovery {
				recovery = d
			}
			recovered = true
		}
	}
	window := "none"
	if failed > 0 {
		window = fmt.Sprintf("from %+.1fs to %+.1fs of the restart's start", firstFail.Sub(restartAt).Seconds(), lastFailEnd.Sub(restartAt).Seconds())
	}
	pct := 0.0
	if len(results) > 0 {
		pct = 100 * float64(failed) / float64(len(results))
	}
	measured := fmt.Sprintf("%d calls, %d failed (%.1f %%): %s; failures %s; pg_ctl restart took %v; calls succeed again %v after the restart began; slowest failure %v; /readyz after: %s",
		len(results), failed, pct, counts(kinds), window, restartTook.Round(10*time.Millisecond), recovery.Round(10*time.Millisecond), slowestFail.Round(10*time.Millisecond), ready)
	if !recovered {
		measured += "; no call succeeded after the last failure"
	}
	return Finding{
		Did: fmt.Sprintf("%d connections calling whoami and post_message; `pg_ctl restart -m fast` after %v; the load goes on %v after the restart returns",
			o.RestartConns, (o.RestartLoad / 3).Round(time.Second), (o.RestartLoad * 2 / 3).Round(time.Second)),
		Measured: measured,
		Target:   fmt.Sprintf("the server recovers by itself, /readyz is 200 after, and every failed call is answered within %v", o.Deadline),
		Held:     recovered && slowestFail <= o.Deadline && len(ready) >= 3 && ready[:3] == "200",
	}, nil
}
