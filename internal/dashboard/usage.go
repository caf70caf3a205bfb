package dashboard

import (
	"encoding/csv"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/web"
)

// The usage page: tokens and cost per UTC day by model and by part, from the usage the
// parts report with their events (usage_daily), as SVG bar charts drawn here (no script,
// no chart library), each with the same numbers as a table for screen readers, and the
// rows as CSV.

// usageDays are the periods offered; DefaultUsageDays is shown first.
var usageDays = []int{7, 30, threads.MaxUsageDays}

// DefaultUsageDays is the usage page's period without ?days=.
const DefaultUsageDays = 30

// Geometry of a chart, in SVG user units (the image scales to its column).
const (
	chartW, chartH         = 640, 240
	chartLeft, chartBottom = 64, 28
	chartTop               = 8
)

// palette colours a chart's series in order (distinguishable, and each series is named in
// the legend and the table, so colour never carries meaning alone).
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

type usageView struct {
	Days    int
	Choices []int
	Charts  []chart
	CSV     string
}

// chart is one stacked bar chart, laid out, with its table.
type chart struct {
	ID, Title string
	W, H      int
	Left      int // where the plot starts (the y labels are left of it)
	Bars      []chartBar
	Legend    []chartSeries
	YTicks    []chartTick
	XTicks    []chartTick
	Series    []string
	Rows      []chartRow
	Total     string
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
	Day   string
	Cells []string
	Total string
}

func (h *Handler) usageDaysParam(r *http.Request) (int, bool) {
	v := r.URL.Query().Get("days")
	if v == "" {
		return DefaultUsageDays, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > threads.MaxUsageDays {
		return DefaultUsageDays, false
	}
	return n, true
}

// usagePage draws the charts of the last ?days= UTC days (one statement).
func (h *Handler) usagePage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	v := h.projectPage(sess, sc, "usage", "Usage")
	days, ok := h.usageDaysParam(r)
	v.Project.Usage = &usageView{Days: days, Choices: usageDays, CSV: projectURL(sc.ProjectID, "usage.csv") + "?days=" + strconv.Itoa(days)}
	if !ok {
		v.Error = fmt.Sprintf("The period is a number of days from 1 to %d.", threads.MaxUsageDays)
		h.render(w, http.StatusBadRequest, "usage", v)
		return
	}
	rows, err := h.deps.Threads.UsageForPeople(r.Context(), sc, days)
	if err != nil {
		h.serviceError(w, r, sess, "usage", err, "usage", v)
		return
	}
	v.Project.Usage.Charts = usageCharts(rows, days, time.Now().UTC())
	h.render(w, http.StatusOK, "usage", v)
}

// usageCSV exports the rows the charts are drawn from: one line per UTC day, part and model.
func (h *Handler) usageCSV(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	days, ok := h.usageDaysParam(r)
	if !ok {
		h.message(w, http.StatusBadRequest, &sess, "Bad request", fmt.Sprintf("The period is a number of days from 1 to %d.", threads.MaxUsageDays))
		return
	}
	rows, err := h.deps.Threads.UsageForPeople(r.Context(), sc, days)
	if err != nil {
		h.unavailable(w, r, &sess, "usage csv", err)
		return
	}
	SecurityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"usage-%s-%dd.csv\"", sc.ProjectID, days))
	cw := csv.NewWriter(w)
	records := [][]string{{"day", "part", "model", "events", "input_tokens", "output_tokens", "cache_tokens", "cost_usd"}}
	for _, u := range rows {
		records = append(records, []string{u.Day.Time.Format(time.DateOnly), csvText(u.Part), csvText(u.Model), strconv.FormatInt(u.Events, 10),
			strconv.FormatInt(u.InputTokens, 10), strconv.FormatInt(u.OutputTokens, 10), strconv.FormatInt(u.CacheTokens, 10),
			strconv.FormatFloat(u.CostUsd, 'f', 6, 64)})
	}
	if err := cw.WriteAll(records); err != nil {
		h.deps.Log.WarnContext(r.Context(), "usage csv", "error", err.Error()) // the client went away mid-file
	}
}

// csvText keeps a spreadsheet from reading a model or part name as a formula.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// usageCharts draws tokens and cost by model and by part, one bar per day.
func usageCharts(rows []threads.UsageRow, days int, now time.Time) []chart {
	y, m, d := now.Date()
	first := time.Date(y, m, d-days+1, 0, 0, 0, 0, time.UTC)
	tokens := func(u threads.UsageRow) float64 { return float64(u.InputTokens + u.OutputTokens + u.CacheTokens) }
	cost := func(u threads.UsageRow) float64 { return u.CostUsd }
	model := func(u threads.UsageRow) string { return u.Model }
	part := func(u threads.UsageRow) string { return u.Part }
	count := func(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }
	usd := func(f float64) string { return "$" + strconv.FormatFloat(f, 'f', 4, 64) }
	// The axes' labels are short: they only locate the bars; the tables carry the numbers.
	countAxis := func(f float64) string { return shortNumber(f) }
	usdAxis := func(f float64) string { return "$" + strconv.FormatFloat(f, 'g', 3, 64) }
	return []chart{
		stacked("tokens-model", "Tokens per day by model", rows, first, days, model, tokens, count, countAxis),
		stacked("cost-model", "Cost (USD) per day by model", rows, first, days, model, cost, usd, usdAxis),
		stacked("tokens-part", "Tokens per day by part", rows, first, days, part, tokens, count, countAxis),
		stacked("cost-part", "Cost (USD) per day by part", rows, first, days, part, cost, usd, usdAxis),
	}
}

// stacked lays out one chart: a bar per day from first, stacked by series (key), with the
// y axis from 0 to the largest day's total, and the table of the same numbers.
func stacked(id, title string, rows []threads.UsageRow, first time.Time, days int, key func(threads.UsageRow) string,
	value func(threads.UsageRow) float64, format, axis func(float64) string) chart {
	c := chart{ID: id, Title: title, W: chartW, H: chartH, Left: chartLeft}
	sums := map[string][]float64{}
	for _, u := range rows {
		i := int(u.Day.Time.Sub(first).Hours() / 24)
		if i < 0 || i >= days {
			continue
		}
		k := key(u)
		if sums[k] == nil {
			sums[k] = make([]float64, days)
			c.Series = append(c.Series, k)
		}
		sums[k][i] += value(u)
	}
	slices.Sort(c.Series)
	totals := make([]float64, days)
	grand := 0.0
	for _, k := range c.Series {
		for i, v := range sums[k] {
			totals[i] += v
			grand += v
		}
	}
	top := niceCeil(slices.Max(totals))
	plotW, plotH := float64(chartW-chartLeft), float64(chartH-chartBottom-chartTop)
	slot := plotW / float64(days)
	for s, k := range c.Series {
		c.Legend = append(c.Legend, chartSeries{Name: k, Fill: palette[s%len(palette)]})
	}
	for i := range days {
		day := first.AddDate(0, 0, i).Format(time.DateOnly)
		row := chartRow{Day: day, Total: format(totals[i])}
		base := float64(chartTop) + plotH
		for s, k := range c.Series {
			v := sums[k][i]
			row.Cells = append(row.Cells, format(v))
			if v <= 0 || top <= 0 {
				continue
			}
			hgt := v / top * plotH
			base -= hgt
			c.Bars = append(c.Bars, chartBar{X: round1(chartLeft + float64(i)*slot + slot*0.15), Y: round1(base), W: round1(slot * 0.7), H: round1(hgt),
				Fill: palette[s%len(palette)], Label: fmt.Sprintf("%s · %s: %s", day, k, format(v))})
		}
		c.Rows = append(c.Rows, row)
		// A date under the first bar and then about every seventh, so labels never overlap.
		if i%max(1, days/6) == 0 {
			c.XTicks = append(c.XTicks, chartTick{X: round1(chartLeft + float64(i)*slot + slot/2), Y: chartH - 8, Label: day[5:]})
		}
	}
	for t := range 5 {
		v := top * float64(t) / 4
		c.YTicks = append(c.YTicks, chartTick{X: chartLeft - 6, Y: round1(float64(chartTop) + plotH - plotH*float64(t)/4), Label: axis(v)})
	}
	c.Total = format(grand)
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
