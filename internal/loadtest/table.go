package loadtest

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Class says what a row is compared with and which target applies.
type Class int

const (
	ClassRawRead  Class = iota // baseline: BEGIN; one indexed read; COMMIT
	ClassRawWrite              // baseline: BEGIN; one INSERT; COMMIT
	ClassRead                  // a read tool: ≥ ReadTarget × the raw read loop
	ClassSearch                // recall, read_memory: ≥ SearchTarget × the raw read loop
	ClassWrite                 // a write tool: ≥ WriteTarget × the raw INSERT loop
	// ClassReference is a call that is no tool (the liveness route, a JSON-RPC ping): its
	// ratio to the raw read loop says how much of a tool row's gap the HTTP and JSON-RPC
	// layers take before any tool or database work. No target.
	ClassReference
)

// The targets of the performance issues, as ratios to the raw loop of the same run, and
// the bound on the tail (p99 at most TailTarget × p50).
const (
	ReadTarget   = 0.5
	SearchTarget = 0.25
	WriteTarget  = 0.3
	TailTarget   = 10.0
)

func (c Class) String() string {
	return [...]string{"raw read", "raw write", "read", "search", "write", "reference"}[c]
}

// target is the ratio a class must reach, and the class of its baseline; baselines and
// references have no target (a reference is compared with the read loop all the same).
func (c Class) target() (ratio float64, baseline Class, ok bool) {
	switch c {
	case ClassRead:
		return ReadTarget, ClassRawRead, true
	case ClassSearch:
		return SearchTarget, ClassRawRead, true
	case ClassWrite:
		return WriteTarget, ClassRawWrite, true
	case ClassReference:
		return 0, ClassRawRead, false
	}
	return 0, c, false
}

// Row is one measured line of the table.
type Row struct {
	Name  string
	Class Class
	Note  string // what exactly was called, when the name does not say it
	Summary
	CPU CPU // what the counted window cost the server and Postgres
}

// Verdict is a row judged against its target.
type Verdict struct {
	Ratio  float64 // calls/s over the baseline's; NaN when there is no baseline in the run
	Target float64 // 0 for a baseline
	RateOK bool
	TailOK bool
	ErrsOK bool
}

// Pass is every check together.
func (v Verdict) Pass() bool { return v.RateOK && v.TailOK && v.ErrsOK }

// Judge compares each row with its baseline in rows: the mean rate of the rows of the
// baseline's class. The raw loops run at the start and at the end of a run, so that a
// machine whose load drifts during the run (a shared one) shifts both ends alike.
func Judge(rows []Row) []Verdict {
	base := Baselines(rows)
	out := make([]Verdict, len(rows))
	for i, r := range rows {
		v := Verdict{Ratio: math.NaN(), RateOK: true, ErrsOK: r.Errors == 0 && r.OK > 0}
		v.TailOK = r.OK > 0 && float64(r.P99) <= TailTarget*float64(r.P50)
		if target, bc, ok := r.Class.target(); ok {
			v.Target = target
			if b, found := base[bc]; found && b > 0 {
				v.Ratio = r.Rate() / b
				v.RateOK = v.Ratio >= target
			} else {
				v.RateOK = false
			}
		} else if b := base[bc]; b > 0 {
			v.Ratio = r.Rate() / b
		}
		out[i] = v
	}
	return out
}

// Baselines is the mean rate of each raw loop's rows in rows (the raw read and the raw
// INSERT loops, each run at the start and at the end).
func Baselines(rows []Row) map[Class]float64 {
	sum, n := map[Class]float64{}, map[Class]int{}
	for _, r := range rows {
		if r.Class == ClassRawRead || r.Class == ClassRawWrite {
			sum[r.Class] += r.Rate()
			n[r.Class]++
		}
	}
	for c := range sum {
		sum[c] /= float64(n[c])
	}
	return sum
}

// WriteTable prints rows as a markdown table with their verdicts, then the first errors
// of every row that had any.
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| row | kind | calls/s | ratio | target | p50 | p99 | p99/p50 | errors | verdict | server CPU/call | Postgres CPU/call | client CPU/call |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for i, v := range Judge(rows) {
		r := rows[i]
		name := r.Name
		if r.Note != "" {
			name += " (" + r.Note + ")"
		}
		target := "baseline"
		if r.Class == ClassReference {
			target = "none"
		}
		if v.Target > 0 {
			target = fmt.Sprintf("≥ %.2f×", v.Target)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n",
			name, r.Class, r.Rate(), ratio(v.Ratio), target, ms(r.P50), ms(r.P99), tail(r.Summary), r.Errors, verdict(r.Class, v),
			cpuPerCall(r.CPU.Known, r.CPU.Server, r.OK), cpuPerCall(r.CPU.Known, r.CPU.Postgres, r.OK),
			cpuPerCall(r.CPU.Known, r.CPU.Client, r.OK))
	}
	for _, r := range rows {
		if len(r.FirstErrors) > 0 {
			fmt.Fprintf(&b, "\n%s: %d errors, e.g. %s", r.Name, r.Errors, strings.Join(r.FirstErrors, " | "))
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func ratio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}

// ms prints a latency in milliseconds with enough digits for sub-millisecond calls.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}

func tail(s Summary) string {
	if s.P50 <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", float64(s.P99)/float64(s.P50))
}

func verdict(c Class, v Verdict) string {
	if _, _, ok := c.target(); !ok {
		word := "baseline"
		if c == ClassReference {
			word = "reference"
		}
		if v.ErrsOK {
			return word
		}
		return word + " FAILED"
	}
	if v.Pass() {
		return "pass"
	}
	var why []string
	if !v.RateOK {
		why = append(why, "rate")
	}
	if !v.TailOK {
		why = append(why, "tail")
	}
	if !v.ErrsOK {
		why = append(why, "errors")
	}
	return "FAIL (" + strings.Join(why, ", ") + ")"
}

// cpuPerCall prints CPU time per successful call in microseconds ("n/a" when unknown).
func cpuPerCall(known bool, d time.Duration, calls int) string {
	if !known || calls <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f µs", float64(PerCall(d, calls))/float64(time.Microsecond))
}
