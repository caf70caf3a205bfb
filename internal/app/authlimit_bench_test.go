package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/throttle"
)

// Load of BenchmarkWrongKeyFlood: rounds of two phases (legitimate calls alone, then with
// the flood), alternated so that the machine's drift falls on both alike.
const (
	floodRounds     = 5
	floodPhase      = 2 * time.Second
	legitClients    = 8
	floodClients    = 4
	floodKeys       = 4096 // distinct wrong keys, made before the clock starts
	reviewFloodRate = 300  // the review's flood: 3,000 wrong keys in 10 s
	legitAddress    = "127.0.0.41"
	attackerAddress = "127.0.0.42"
)

// BenchmarkWrongKeyFlood measures legitimate calls per second (threads whoami through the
// whole stack, from one address) alone, then while another address floods the same
// endpoint with wrong keys whose checksums are valid (each a database transaction when
// nothing limits them): as fast as floodClients clients go, or at the review's rate.
// "limits=off" is the same flood with no limits, for comparison. Client and server share
// this process and its cores, so the flood's own client work is charged to the server too.
func BenchmarkWrongKeyFlood(b *testing.B) {
	defaults := throttle.Limits{Window: throttle.DefaultWindow, PerAddress: throttle.DefaultPerAddress, PerKey: throttle.DefaultPerKey, BlockedDelay: throttle.DefaultBlockedDelay}
	immediate := defaults
	immediate.BlockedDelay = 0
	for _, c := range []struct {
		name   string
		limits throttle.Limits
		perSec int
	}{
		{"limits=default/flood=unpaced", defaults, 0},
		{"limits=default/flood=300per_s", defaults, reviewFloodRate},
		{"limits=default,no-delay/flood=unpaced", immediate, 0},
		{"limits=off/flood=unpaced", throttle.Limits{Window: throttle.DefaultWindow}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := startServerOpts(b, serverOptions{tune: func(cfg *config.Config) { cfg.AuthFailures = c.limits }})
			url, key := s.threadsURL("escalations", "architect"), s.key("acme/architect")
			keys := make([]string, floodKeys)
			for i := range keys {
				keys[i] = wrongKey(b, "")
			}
			legit, attacker := clientFrom(legitAddress), clientFrom(attackerAddress)
			for i := 0; i < b.N; i++ {
				var alone, under, flood float64
				var checked int64
				for r := 0; r < floodRounds; r++ {
					a, _, _ := floodPhaseRun(b, legit, attacker, url, key, nil, 0)
					u, f, n := floodPhaseRun(b, legit, attacker, url, key, keys, c.perSec)
					alone, under, flood = alone+a/floodRounds, under+u/floodRounds, flood+f/floodRounds
					checked += n
				}
				b.ReportMetric(alone, "legit-calls/s-alone")
				b.ReportMetric(under, "legit-calls/s-flood")
				b.ReportMetric(flood, "flood-req/s")
				b.ReportMetric(float64(checked), "flood-401s")
				b.ReportMetric(100*under/alone, "%-kept")
			}
		})
	}
}

// floodPhaseRun runs legitimate calls for floodPhase, with the flood alongside when keys is
// not nil (at most perSec requests a second; 0: as fast as its clients go), and returns
// both rates and how many flood requests got a 401, which is to say were checked against
// the database (a blocked one gets 429 from memory).
func floodPhaseRun(b *testing.B, legit, attacker *http.Client, url, key string, keys []string, perSec int) (legitRate, floodRate float64, checked int64) {
	ctx, cancel := context.WithTimeout(context.Background(), floodPhase)
	defer cancel()
	var ok, flooded, unauthorized atomic.Int64
	var wg sync.WaitGroup
	do := func(c *http.Client, k string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(whoamiCall))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Key", k)
		resp, err := c.Do(req)
		if err != nil {
			return 0 // the phase ended mid-call
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if keys != nil {
		var next atomic.Int64
		var tick <-chan time.Time
		if perSec > 0 {
			t := time.NewTicker(time.Second / time.Duration(perSec))
			defer t.Stop()
			tick = t.C
		}
		for w := 0; w < floodClients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if tick != nil {
						select {
						case <-tick:
						case <-ctx.Done():
							return
						}
					}
					switch do(attacker, keys[next.Add(1)%int64(len(keys))]) {
					case http.StatusUnauthorized:
						unauthorized.Add(1)
						flooded.Add(1)
					case http.StatusTooManyRequests:
						flooded.Add(1)
					}
				}
			}()
		}
	}
	start := time.Now()
	for w := 0; w < legitClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				switch st := do(legit, key); st {
				case http.StatusOK:
					ok.Add(1)
				case 0:
				default:
					b.Errorf("legitimate call: status %d", st)
					return
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	return float64(ok.Load()) / secs, float64(flooded.Load()) / secs, unauthorized.Load()
}

// BenchmarkBlockedRequestOverHTTP is the cost of one wrong key from an address that is
// already blocked: HTTP, JSON-RPC parsing, the in-memory check and the 429, and no
// database work. The blocked caller's delay is off, so that the work is what is measured. Compare with BenchmarkWhoAmIOverHTTP (same client, same server); allocs/op
// count both sides and do not depend on the machine's load.
func BenchmarkBlockedRequestOverHTTP(b *testing.B) {
	limits := throttle.Limits{Window: time.Hour, PerAddress: throttle.DefaultPerAddress, PerKey: throttle.DefaultPerKey}
	s := startServerOpts(b, serverOptions{tune: func(cfg *config.Config) { cfg.AuthFailures = limits }})
	url, attacker := s.threadsURL("escalations", "architect"), clientFrom(attackerAddress)
	keys := make([]string, floodKeys)
	for i := range keys {
		keys[i] = wrongKey(b, "")
	}
	for i := 0; i < limits.PerAddress; i++ {
		callWith(b, attacker, url, http.Header{"X-Agent-Key": {keys[i]}})
	}
	header := http.Header{"X-Agent-Key": {keys[0]}}
	if st, _, _ := callWith(b, attacker, url, header); st != http.StatusTooManyRequests {
		b.Fatalf("status %d, want 429", st)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		header["X-Agent-Key"][0] = keys[i%len(keys)]
		if st, _, _ := callWith(b, attacker, url, header); st != http.StatusTooManyRequests {
			b.Fatalf("status %d, want 429", st)
		}
	}
}
