package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayroom/relayroom/internal/threads"
)

func TestUsageCharts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 11, 15, 0, 0, 0, time.UTC)
	day := func(d int) pgtype.Date {
		return pgtype.Date{Time: time.Date(2026, 6, d, 0, 0, 0, 0, time.UTC), Valid: true}
	}
	rows := []threads.UsageRow{
		{Day: day(10), Part: "backend", Model: "m1", InputTokens: 600, OutputTokens: 100, CacheTokens: 100, CostUsd: 0.5},
		{Day: day(11), Part: "backend", Model: "m1", InputTokens: 300, CostUsd: 0.25},
		{Day: day(11), Part: "qa", Model: "m2", InputTokens: 100, CostUsd: 0.25},
		{Day: day(1), Part: "qa", Model: "m2", InputTokens: 999_999, CostUsd: 99}, // before the period
	}
	charts := usageCharts(rows, 2, now)
	if len(charts) != 4 {
		t.Fatalf("%d charts", len(charts))
	}

	t.Run("the table has a row per day and a column per series, with totals", func(t *testing.T) {
		t.Parallel()
		c := charts[0] // tokens by model
		if len(c.Columns) != 3 || c.Columns[0] != "m1" || c.Columns[2] != "Total" || len(c.Rows) != 2 || c.Total != "1200" {
			t.Fatalf("%+v", c)
		}
		if r := c.Rows[0]; r.Head != "2026-06-10" || r.Cells[0] != "800" || r.Cells[1] != "0" || r.Cells[2] != "800" {
			t.Fatalf("first day: %+v", r)
		}
		if r := c.Rows[1]; r.Head != "2026-06-11" || r.Cells[0] != "300" || r.Cells[1] != "100" || r.Cells[2] != "400" {
			t.Fatalf("second day: %+v", r)
		}
		if p := charts[3]; len(p.Columns) != 3 || p.Columns[1] != "qa" || p.Rows[1].Cells[1] != "$0.2500" || p.Total != "$1.0000" {
			t.Fatalf("cost by part: %+v", p)
		}
	})

	t.Run("bars stack in proportion to the axis top, inside the plot", func(t *testing.T) {
		t.Parallel()
		c := charts[0]
		// The top is 1000 (800 rounded up): the 800 bar fills 80% of the plot's height.
		plotH := float64(chartH - chartBottom - chartTop)
		if len(c.Bars) != 3 || c.Bars[0].H != round1(0.8*plotH) || c.YTicks[4].Label != "1k" {
			t.Fatalf("bars %+v ticks %+v", c.Bars, c.YTicks)
		}
		for _, b := range c.Bars {
			if b.X < chartLeft || b.X+b.W > chartW || b.Y < chartTop || b.Y+b.H > chartH-chartBottom+0.1 {
				t.Fatalf("a bar outside the plot: %+v", b)
			}
		}
	})

	t.Run("past MaxChartSeries the smallest series are drawn as one", func(t *testing.T) {
		t.Parallel()
		// A guest's agent that names thousands of models made the page a column per model
		// and day: seconds and hundreds of megabytes a view.
		var many []threads.UsageRow
		for i := range MaxChartSeries + 5 {
			many = append(many, threads.UsageRow{Day: day(11), Part: "qa", Model: fmt.Sprintf("m%02d", i), InputTokens: int64(100 + i)})
		}
		c := usageCharts(many, 2, now)[0]
		if len(c.Columns) != MaxChartSeries+1 || c.Columns[MaxChartSeries-1] != "6 others" || c.Columns[0] != "m06" {
			t.Fatalf("columns %v: want the %d largest by name, then the others, then the total", c.Columns, MaxChartSeries-1)
		}
		// m00..m05 (100+101+…+105) are the six smallest.
		if r := c.Rows[1]; r.Cells[MaxChartSeries-1] != "615" || c.Total != fmt.Sprint((100+114)*15/2) {
			t.Fatalf("the others' cell %q, total %q", r.Cells[MaxChartSeries-1], c.Total)
		}
	})

	t.Run("the others' series never takes a series' own name", func(t *testing.T) {
		t.Parallel()
		var many []threads.UsageRow
		for i := range MaxChartSeries + 5 {
			many = append(many, threads.UsageRow{Day: day(11), Part: "qa", Model: fmt.Sprintf("m%02d", i), InputTokens: 1000})
		}
		many = append(many, threads.UsageRow{Day: day(11), Part: "qa", Model: "7 others", InputTokens: 5000})
		c := usageCharts(many, 2, now)[0]
		if c.Columns[0] != "7 others" || c.Columns[MaxChartSeries-1] != "(7 others)" || c.Rows[1].Cells[0] != "5000" || c.Rows[1].Cells[MaxChartSeries-1] != "7000" {
			t.Fatalf("columns %v, cells %v", c.Columns, c.Rows[1].Cells)
		}
	})

	t.Run("an empty period draws no bars and a zero axis", func(t *testing.T) {
		t.Parallel()
		c := usageCharts(nil, 7, now)[1]
		if len(c.Bars) != 0 || len(c.Rows) != 7 || c.Total != "$0.0000" {
			t.Fatalf("%+v", c)
		}
	})

	t.Run("axis tops are 1, 2 or 5 times a power of ten", func(t *testing.T) {
		t.Parallel()
		for in, want := range map[float64]float64{0: 0, 0.03: 0.05, 1: 1, 1.2: 2, 3: 5, 7: 10, 120: 200, 800: 1000} {
			if got := niceCeil(in); got != want {
				t.Fatalf("niceCeil(%v) = %v, want %v", in, got, want)
			}
		}
	})

	t.Run("a CSV cell that a spreadsheet would run as a formula is quoted", func(t *testing.T) {
		t.Parallel()
		for in, want := range map[string]string{"=cmd()": "'=cmd()", "+1": "'+1", "@x": "'@x", "-2": "'-2", "claude-opus-4": "claude-opus-4", "": ""} {
			if got := csvText(in); got != want {
				t.Fatalf("csvText(%q) = %q, want %q", in, got, want)
			}
		}
	})
}
