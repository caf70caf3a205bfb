package loadtest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/testfix"
)

func durations(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no samples", nil, 0.5, 0},
		{"one sample is every percentile", durations(7), 0.99, 7 * time.Millisecond},
		{"p50 of 1..100 is 50", hundred, 0.50, 50 * time.Millisecond},
		{"p99 of 1..100 is 99", hundred, 0.99, 99 * time.Millisecond},
		{"p100 is the maximum", hundred, 1, 100 * time.Millisecond},
		{"p50 of an even count is the lower middle", durations(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of ten samples is the largest (nearest rank rounds up)", durations(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{"p0 is clamped to the smallest", durations(3, 4), 0, 3 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(c.sorted, c.p); got != c.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	t.Run("sorts unsorted samples before taking percentiles", func(t *testing.T) {
		t.Parallel()
		s := Summarize(durations(9, 1, 5, 3, 7), 2, time.Second, nil)
		if s.P50 != 5*time.Millisecond || s.P99 != 9*time.Millisecond || s.Max != 9*time.Millisecond {
			t.Fatalf("p50 %v p99 %v max %v", s.P50, s.P99, s.Max)
		}
		if s.OK != 5 || s.Errors != 2 {
			t.Fatalf("ok %d errors %d", s.OK, s.Errors)
		}
	})
	t.Run("rate counts successful calls only", func(t *testing.T) {
		t.Parallel()
		s := Summarize(durations(1, 1, 1, 1), 100, 2*time.Second, nil)
		if s.Rate() != 2 {
			t.Fatalf("rate %v, want 2", s.Rate())
		}
	})
	t.Run("an empty window has rate 0", func(t *testing.T) {
		t.Parallel()
		if r := (Summary{}).Rate(); r != 0 {
			t.Fatalf("rate %v", r)
		}
	})
}

func row(name string, c Class, ok int, p50, p99 time.Duration, errs int) Row {
	return Row{Name: name, Class: c, Summary: Summary{OK: ok, Errors: errs, Elapsed: time.Second, P50: p50, P99: p99}}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	rows := []Row{
		row("raw read", ClassRawRead, 1000, ms, 2*ms, 0),
		row("raw insert", ClassRawWrite, 2000, ms, 2*ms, 0),
		row("whoami", ClassRead, 500, ms, 10*ms, 0),       // exactly 0.5×, p99 exactly 10× p50: pass
		row("inbox", ClassRead, 499, ms, 2*ms, 0),         // just under 0.5×
		row("recall", ClassSearch, 250, ms, 2*ms, 0),      // 0.25× of the read loop
		row("send", ClassWrite, 600, ms, 11*ms, 0),        // 0.3× of the insert loop, tail too long
		row("post_message", ClassWrite, 900, ms, 2*ms, 1), // one error fails it
		row("write_memory", ClassWrite, 0, 0, 0, 0),       // nothing answered
		row("ping", ClassReference, 300, ms, 20*ms, 0),    // no target, whatever its rate and tail
		row("http floor", ClassReference, 3000, ms, 2*ms, 2),
	}
	v := Judge(rows)
	check := func(i int, ratio float64, pass, rate, tailOK, errs bool) {
		t.Helper()
		// Written so that a NaN ratio (no baseline found) is a mismatch too.
		if !(math.Abs(v[i].Ratio-ratio) <= 1e-9) || v[i].Pass() != pass || v[i].RateOK != rate || v[i].TailOK != tailOK || v[i].ErrsOK != errs {
			t.Fatalf("%s: got %+v pass=%v, want ratio %v pass %v rate %v tail %v errs %v", rows[i].Name, v[i], v[i].Pass(), ratio, pass, rate, tailOK, errs)
		}
	}
	t.Run("baselines have ratio 1 and no target", func(t *testing.T) {
		check(0, 1, true, true, true, true)
		check(1, 1, true, true, true, true)
	})
	t.Run("a read at exactly its target and tail bound passes", func(t *testing.T) { check(2, 0.5, true, true, true, true) })
	t.Run("a read under its target fails on rate", func(t *testing.T) { check(3, 0.499, false, false, true, true) })
	t.Run("search is compared with the read loop at 0.25x", func(t *testing.T) { check(4, 0.25, true, true, true, true) })
	t.Run("a write is compared with the insert loop; a long tail fails it", func(t *testing.T) { check(5, 0.3, false, true, false, true) })
	t.Run("any error fails a row", func(t *testing.T) { check(6, 0.45, false, true, true, false) })
	t.Run("a row with no successful call fails everything", func(t *testing.T) { check(7, 0, false, false, false, false) })
	t.Run("a reference row is compared with the read loop and has no target", func(t *testing.T) {
		check(8, 0.3, false, true, false, true) // its tail is reported, not judged (verdict)
		if v[8].Target != 0 || verdict(ClassReference, v[8]) != "reference" {
			t.Fatalf("target %v verdict %q", v[8].Target, verdict(ClassReference, v[8]))
		}
	})
	t.Run("a reference row's errors are said", func(t *testing.T) {
		if v[9].Ratio != 3 || verdict(ClassReference, v[9]) != "reference FAILED" {
			t.Fatalf("ratio %v verdict %q", v[9].Ratio, verdict(ClassReference, v[9]))
		}
	})
	t.Run("the baseline is the mean of the raw rows at both ends of the run", func(t *testing.T) {
		two := Judge([]Row{
			row("raw read", ClassRawRead, 800, ms, 2*ms, 0),
			row("whoami", ClassRead, 500, ms, 2*ms, 0),
			row("raw read (end)", ClassRawRead, 1200, ms, 2*ms, 0),
		})
		if two[1].Ratio != 0.5 || !two[1].Pass() || two[0].Ratio != 0.8 || two[2].Ratio != 1.2 {
			t.Fatalf("got %+v", two)
		}
	})
	t.Run("without its baseline in the run a row cannot pass", func(t *testing.T) {
		only := Judge([]Row{row("whoami", ClassRead, 500, ms, 2*ms, 0)})
		if !math.IsNaN(only[0].Ratio) || only[0].Pass() {
			t.Fatalf("got %+v", only[0])
		}
	})
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	rows := []Row{
		row("raw read", ClassRawRead, 1000, ms, 2*ms, 0),
		row("whoami", ClassRead, 400, 2*ms, 30*ms, 3),
		row("ping", ClassReference, 500, ms, 2*ms, 0),
	}
	rows[1].FirstErrors = []string{"HTTP 503"}
	rows[1].CPU = CPU{Server: 200 * ms, Postgres: 800 * ms, Known: true}
	rows[1].Note = "threads"
	var b strings.Builder
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	testfix.CheckContains(t, "table", out,
		"| raw read | raw read | 1000 | 1.00× | baseline | 1.00 ms | 2.00 ms | 2.0 | 0 | baseline |",
		"| raw read | raw read | 1000 | 1.00× | baseline | 1.00 ms | 2.00 ms | 2.0 | 0 | baseline | n/a | n/a |",
		"| whoami (threads) | read | 400 | 0.40× | ≥ 0.50× | 2.00 ms | 30.00 ms | 15.0 | 3 | FAIL (rate, tail, errors) | 500 µs | 2000 µs |",
		"whoami: 3 errors, e.g. HTTP 503",
		"| ping | reference | 500 | 0.50× | none | 1.00 ms | 2.00 ms | 2.0 | 0 | reference |",
	)
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	t.Run("a worker out of work stops without counting an error", func(t *testing.T) {
		t.Parallel()
		var left atomic.Int64
		left.Store(10)
		s := Measure(context.Background(), Window{Conns: 4, Duration: 5 * time.Second}, func(context.Context, int, int) error {
			if left.Add(-1) < 0 {
				return ErrExhausted
			}
			return nil
		})
		if s.OK != 10 || s.Errors != 0 {
			t.Fatalf("ok %d errors %d, want 10 and 0", s.OK, s.Errors)
		}
	})
	t.Run("errors are counted and a few distinct messages kept", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int64
		s := Measure(context.Background(), Window{Conns: 2, Duration: time.Second}, func(_ context.Context, w, seq int) error {
			if n.Add(1) > 40 {
				return ErrExhausted
			}
			if seq%2 == 0 {
				return errors.New("boom")
			}
			return nil
		})
		if s.Errors == 0 || s.OK == 0 || len(s.FirstErrors) != 1 || s.FirstErrors[0] != "boom" {
			t.Fatalf("got %+v", s)
		}
	})
	t.Run("warm-up calls are not counted", func(t *testing.T) {
		t.Parallel()
		var counted atomic.Int64
		s := Measure(context.Background(), Window{Conns: 1, Duration: time.Second, Warmup: time.Second}, func(_ context.Context, _, seq int) error {
			if seq < countedSeqBase {
				return ErrExhausted // the warm-up pass ends at once
			}
			if counted.Add(1) > 3 {
				return ErrExhausted
			}
			return nil
		})
		if s.OK != 3 {
			t.Fatalf("ok %d, want 3", s.OK)
		}
	})
}
