// Package loadtest drives a running relayroom server with many concurrent clients and
// measures it beside raw pgx loops on the same database, in the same run: calls/s and
// latency percentiles per tool, ratios to the raw loops, and the targets of the
// performance issues marked pass or fail. It is an operator tool (cmd/relayroom-load,
// `make loadtest`) and the library the chaos harness (internal/chaos) drives load with.
//
// Everything it starts is a child process or a database it names: a `relayroom serve` on
// a free loopback port, and a scratch database in the Postgres cluster it is given.
package loadtest

import (
	"math"
	"slices"
	"time"
)

// Summary is what one measured row produced.
type Summary struct {
	OK      int           // calls answered successfully
	Errors  int           // calls that failed (transport, HTTP status, JSON-RPC or tool error)
	Elapsed time.Duration // wall time of the measurement window
	P50     time.Duration // of successful calls
	P99     time.Duration
	Max     time.Duration
	// FirstErrors keeps a few distinct failure messages, so a failing row says why.
	FirstErrors []string
}

// Rate is successful calls per second over the window.
func (s Summary) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.OK) / s.Elapsed.Seconds()
}

// Percentile returns the nearest-rank percentile p (0 < p ≤ 1) of sorted samples: the
// smallest sample such that at least p of all samples are at or below it. Nearest rank
// never invents a latency that was not observed, which matters for a p99 taken from a few
// hundred calls. It returns 0 for no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize sorts the samples (in place) and fills the percentiles.
func Summarize(samples []time.Duration, errors int, elapsed time.Duration, firstErrors []string) Summary {
	slices.Sort(samples)
	s := Summary{OK: len(samples), Errors: errors, Elapsed: elapsed, FirstErrors: firstErrors}
	if len(samples) > 0 {
		s.P50 = Percentile(samples, 0.50)
		s.P99 = Percentile(samples, 0.99)
		s.Max = samples[len(samples)-1]
	}
	return s
}
