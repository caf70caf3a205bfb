package dashboard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Every chart of the dashboard (the Learning panel, usage, desk reports) is laid out here
// and drawn by the "chart" partial (templates/chart.html): static SVG, no script, nothing
// the Content-Security-Policy would block, and a table under it carrying the same numbers
// for screen readers and copying, so the image only needs a title.

// The charts' geometry, in SVG user units (the stylesheet scales them to the column).
const (
	chartW, chartH         = 640, 220
	chartLeft, chartBottom = 56, 24 // room for the y labels and for the x labels
	chartTop               = 10     // room above the tallest bar
	chartYTicks            = 4      // intervals on the y axis
	chartLabelW            = 48     // the width one x label needs, so labels never overlap
)

// palette colours a chart's series in order (distinguishable, and each series is named in
// the legend and the table, so colour never carries meaning alone).
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// chartInput is what a page charts: buckets (a day, a week) of values stacked by series.
type chartInput struct {
	ID, Title string
	RowHead   string   // the table's first column ("Day")
	Series    []string // one name for a single series; a legend is drawn for more than one
	Buckets   []chartBucket
	// Top is the y axis's top; 0 rounds the largest bucket up (niceCeil).
	Top float64
	// Format writes a value for the table and a bar's title; Axis a y label.
	Format, Axis func(float64) string
	Total        bool     // a Total column (and the grand total in c.Total)
	Columns      []string // the table's columns after RowHead; nil: the series (and Total)
}

// chartBucket is one bar and its table row.
type chartBucket struct {
	Key    string    // the table's row head and the bars' titles (a date)
	Label  string    // under the bar (a short date)
	Values []float64 // one per series; nil: no data, drawn as no bar rather than 0
	Note   string    // a single series' bar title; "": Key and the value
	Cells  []string  // the table's cells when Columns are given
}

// chart is one chart, laid out for the partial.
type chart struct {
	ID, Title string
	Summary   string // the image's title
	Caption   string // the table's caption
	W, H      int
	Left      int // where the plot starts (the y labels are left of it)
	Bars      []chartBar
	Keyed     bool // a legend is drawn (more or fewer than one series)
	Legend    []chartSeries
	NoData    string // the legend's line when there is no series
	YTicks    []chartTick
	XTicks    []chartTick
	RowHead   string
	Columns   []string
	Rows      []chartRow
	Total     string
	Fold      bool // the table is folded (<details>) under the chart
}

type chartBar struct {
	X, Y, W, H float64
	Fill       string
	Label      string
}

type chartSeries struct{ Name, Fill string }

type chartTick struct {
	X, Y  float64
	Label string
}

type chartRow struct {
	Head  string
	Cells []string
}

// layoutChart lays in out: a bar per bucket, stacked by series, on a y axis from 0 to
// in.Top (or the largest bucket rounded up), with y ticks, x labels and the table.
func layoutChart(in chartInput) chart {
	c := chart{ID: in.ID, Title: in.Title, Summary: in.Title, Caption: in.Title, W: chartW, H: chartH, Left: chartLeft,
		RowHead: in.RowHead, Columns: in.Columns}
	if c.Columns == nil {
		c.Columns = append(c.Columns, in.Series...)
		if in.Total {
			c.Columns = append(c.Columns, "Total")
		}
	}
	if c.Keyed = len(in.Series) != 1; c.Keyed {
		for s, k := range in.Series {
			c.Legend = append(c.Legend, chartSeries{Name: k, Fill: palette[s%len(palette)]})
		}
	}
	top, grand := in.Top, 0.0
	totals := make([]float64, len(in.Buckets))
	for i, b := range in.Buckets {
		for _, v := range b.Values {
			totals[i] += v
		}
		grand += totals[i]
	}
	if top <= 0 && len(totals) > 0 {
		top = niceCeil(slices.Max(totals))
	}
	plotW, plotH := float64(chartW-chartLeft), float64(chartH-chartBottom-chartTop)
	slot := plotW / float64(max(1, len(in.Buckets)))
	every := max(1, int(math.Ceil(chartLabelW/slot)))
	for i, b := range in.Buckets {
		row := chartRow{Head: b.Key, Cells: b.Cells}
		if in.Columns == nil {
			for _, v := range b.Values {
				row.Cells = append(row.Cells, in.Format(v))
			}
			if b.Values == nil {
				row.Cells = make([]string, len(in.Series))
			}
			if in.Total {
				row.Cells = append(row.Cells, in.Format(totals[i]))
			}
		}
		c.Rows = append(c.Rows, row)
		base := float64(chartTop) + plotH
		for s, v := range b.Values {
			if v <= 0 || top <= 0 {
				continue
			}
			hgt := min(v/top, 1) * plotH
			base -= hgt
			label := fmt.Sprintf("%s · %s: %s", b.Key, in.Series[s], in.Format(v))
			if len(in.Series) == 1 {
				label = b.Key + ": " + in.Format(v)
				if b.Note != "" {
					label = b.Note
				}
			}
			c.Bars = append(c.Bars, chartBar{X: round1(chartLeft + float64(i)*slot + slot*0.15), Y: round1(base), W: round1(slot * 0.7), H: round1(hgt),
				Fill: palette[s%len(palette)], Label: label})
		}
		if i%every == 0 {
			c.XTicks = append(c.XTicks, chartTick{X: round1(chartLeft + float64(i)*slot + slot/2), Y: chartH - 8, Label: b.Label})
		}
	}
	for t := range chartYTicks + 1 {
		c.YTicks = append(c.YTicks, chartTick{X: chartLeft - 6, Y: round1(float64(chartTop) + plotH - plotH*float64(t)/chartYTicks),
			Label: in.Axis(top * float64(t) / chartYTicks)})
	}
	c.Total = in.Format(grand)
	return c
}

// shortNumber writes 12500 as 12.5k and 3000000 as 3M.
func shortNumber(f float64) string {
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if f >= u.div {
			return strconv.FormatFloat(f/u.div, 'g', 3, 64) + u.unit
		}
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}

// niceCeil rounds a chart's top up to 1, 2 or 5 times a power of ten (0 stays 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 2, 5, 10} {
		if v <= f*p {
			return f * p
		}
	}
	return 10 * p
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
