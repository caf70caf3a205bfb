package dashboard

import (
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/knowledge"
)

func TestHitRateChart(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 6, d, 0, 0, 0, 0, time.UTC) }
	c := hitRateChart("rate-day", "Recall hit rate per day", "Day", "caption", []knowledge.Bucket{
		{Start: day(1), HitRate: knowledge.HitRate{Returned: 4, Used: 1, Rate: 0.25}},
		{Start: day(2)}, // no recalls
		{Start: day(3), HitRate: knowledge.HitRate{Returned: 2, Used: 0, Rate: 0}},
	})

	t.Run("a bucket without recalls has no bar and a dash for its rate, not 0 %", func(t *testing.T) {
		t.Parallel()
		if len(c.Bars) != 1 || c.Bars[0].Label != "2026-06-01: 1 of 4 used (25%)" {
			t.Fatalf("bars %+v", c.Bars)
		}
		if r := c.Rows[1]; r.Head != "2026-06-02" || r.Cells[0] != "0" || r.Cells[2] != "–" {
			t.Fatalf("no-data row %+v", r)
		}
		if r := c.Rows[2]; r.Cells[2] != "0%" {
			t.Fatalf("zero-rate row %+v", r)
		}
	})

	t.Run("the axis runs from 0 to 100 % and a single series has no legend", func(t *testing.T) {
		t.Parallel()
		if c.Keyed || c.YTicks[0].Label != "0%" || c.YTicks[len(c.YTicks)-1].Label != "100%" || len(c.XTicks) != 3 || c.XTicks[0].Label != "06-01" {
			t.Fatalf("%+v", c)
		}
		plotH := float64(chartH - chartBottom - chartTop)
		if c.Bars[0].H != round1(0.25*plotH) {
			t.Fatalf("bar height %v", c.Bars[0].H)
		}
	})
}

func TestDrawReport(t *testing.T) {
	t.Parallel()
	v := func(f float64) *float64 { return &f }
	d := drawReport(desk.Report{Metric: desk.MetricFirstResponseTime, Unit: "minutes", Timezone: "Europe/Paris", Points: []desk.Point{
		{Date: "2026-06-01", Value: v(12.5)}, {Date: "2026-06-02"}, {Date: "2026-06-03", Value: v(30)},
	}})

	t.Run("a day when nothing qualified has no bar and an empty cell", func(t *testing.T) {
		t.Parallel()
		c := d.Chart
		if len(c.Bars) != 2 || c.Bars[0].Label != "2026-06-01: 12.5" || c.Bars[1].Label != "2026-06-03: 30" {
			t.Fatalf("bars %+v", c.Bars)
		}
		if len(c.Rows) != 3 || c.Rows[1].Head != "2026-06-02" || c.Rows[1].Cells[0] != "" || c.Rows[2].Cells[0] != "30" {
			t.Fatalf("rows %+v", c.Rows)
		}
	})

	t.Run("the title, unit and largest value are kept, and the axis tops at 50", func(t *testing.T) {
		t.Parallel()
		c := d.Chart
		if c.Title != "Mean first response time" || c.Columns[0] != "minutes" || d.Max != "30" || c.YTicks[len(c.YTicks)-1].Label != "50" || c.Keyed {
			t.Fatalf("%+v", d)
		}
	})
}
