package dashboard

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/relayroom/relayroom/internal/knowledge"
)

// The hit-rate chart's geometry, in SVG user units (the stylesheet scales it to the
// page's width).
const (
	rateChartW       = 640
	rateChartH       = 200
	rateChartLeft    = 40 // room for the percentage axis
	rateChartBottom  = 24 // room for the bucket labels
	rateChartTop     = 10
	rateChartBarFill = 0.7 // of a bucket's width
)

// hitRateChart draws the hit rate of each bucket as a bar (0–100 %), server-side, as
// static SVG: no script, nothing the Content-Security-Policy would block. A bucket without
// recalls has no bar, only its label, so "no data" never reads as 0 %. The table under
// it carries the same numbers for screen readers and copying, so the chart is an image
// with a title.
func hitRateChart(title string, buckets []knowledge.Bucket, labelFormat string) template.HTML {
	var b strings.Builder
	plotH := float64(rateChartH - rateChartBottom - rateChartTop)
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		rateChartW, rateChartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(title))
	for _, pct := range []int{0, 50, 100} {
		y := float64(rateChartTop) + plotH*(1-float64(pct)/100)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/><text class="axis" x="%d" y="%.1f" text-anchor="end">%d%%</text>`,
			rateChartLeft, y, rateChartW, y, rateChartLeft-6, y+4, pct)
	}
	if n := len(buckets); n > 0 {
		slot := float64(rateChartW-rateChartLeft) / float64(n)
		for i, bk := range buckets {
			x := float64(rateChartLeft) + slot*float64(i)
			if bk.Returned > 0 {
				h := plotH * bk.Rate
				fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d of %d used (%.0f%%)</title></rect>`,
					x+slot*(1-rateChartBarFill)/2, float64(rateChartTop)+plotH-h, slot*rateChartBarFill, h,
					bk.Start.Format("2006-01-02"), bk.Used, bk.Returned, bk.Rate*100)
			}
			fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`,
				x+slot/2, rateChartH-6, bk.Start.Format(labelFormat))
		}
	}
	b.WriteString(`</svg>`)
	// Built here from numbers, dates and escaped text only.
	return template.HTML(b.String())
}
