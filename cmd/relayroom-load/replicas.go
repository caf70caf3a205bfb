package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/relayroom/relayroom/internal/loadtest"
)

// maxReplicas bounds -replicas: every replica is a process on this machine.
const maxReplicas = 9

// replicaCounts parses -replicas: one count, or a comma-separated list of them.
func replicaCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > maxReplicas {
			return nil, fmt.Errorf("-replicas: %q is not a count from 0 to %d", f, maxReplicas)
		}
		out = append(out, n)
	}
	return out, nil
}

// servedBy says what the calls of a run went to.
func servedBy(n int) string {
	switch n {
	case 0:
		return "one server called directly"
	case 1:
		return "1 replica behind HAProxy"
	}
	return fmt.Sprintf("%d replicas behind HAProxy", n)
}

// writeComparison prints, for every tool row the runs share, its calls/s with each replica
// count and the ratio to the first count: raw, and normalised by each run's raw loop of
// the row's class (the raw loops measure what the shared machine left to the database in
// that run, so the normalised ratio discounts the load that drifted between runs).
func writeComparison(w io.Writer, counts []int, runs [][]loadtest.Row) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe same rows with %s, as ratios to the first (normalised: each rate over its run's raw loop first)\n\n| row |", joinCounts(counts))
	for _, n := range counts {
		fmt.Fprintf(&b, " %s |", servedBy(n))
	}
	b.WriteString(" ratios | normalised ratios | errors |\n|---|")
	b.WriteString(strings.Repeat("---:|", len(counts)+3) + "\n")
	for _, r := range runs[0] {
		if strings.HasSuffix(r.Name, "(end)") {
			continue
		}
		rates := make([]float64, len(runs))
		norm := make([]float64, len(runs))
		errs := make([]string, len(runs))
		for i, rows := range runs {
			rates[i], norm[i], errs[i] = math.NaN(), math.NaN(), "n/a"
			base := loadtest.Baselines(rows)
			for _, x := range rows {
				if x.Name == r.Name {
					rates[i] = x.Rate()
					norm[i] = x.Rate() / base[baselineOf(x.Class)]
					errs[i] = strconv.Itoa(x.Errors)
				}
			}
		}
		fmt.Fprintf(&b, "| %s |", r.Name)
		for _, v := range rates {
			fmt.Fprintf(&b, " %.0f |", v)
		}
		normalised := ratios(norm)
		if r.Class == loadtest.ClassRawRead || r.Class == loadtest.ClassRawWrite {
			normalised = "—" // a raw loop over its own run's mean says nothing
		}
		fmt.Fprintf(&b, " %s | %s | %s |\n", ratios(rates), normalised, strings.Join(errs, " / "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// baselineOf is the raw loop a class is measured against.
func baselineOf(c loadtest.Class) loadtest.Class {
	if c == loadtest.ClassWrite || c == loadtest.ClassRawWrite {
		return loadtest.ClassRawWrite
	}
	return loadtest.ClassRawRead
}

// ratios prints each value over the first, "1.00 : 1.43 : 1.80".
func ratios(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x/v[0])
	}
	return strings.Join(parts, " : ")
}

func joinCounts(counts []int) string {
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ") + " replicas"
}
