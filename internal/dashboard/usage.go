package dashboard

import (
	"cmp"
	"encoding/csv"
	"fmt"
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

type usageView struct {
	Days    int
	Choices []int
	Charts  []chart
	CSV     string
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
	v := h.projectPage(r, sess, sc, "usage", "Usage")
	days, ok := h.usageDaysParam(r)
	v.Project.Usage = &usageView{Days: days, Choices: usageDays, CSV: inOrg(projectURL(sc.ProjectID, "usage.csv")+"?days="+strconv.Itoa(days), v.Room.OrgQ)}
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

// MaxChartSeries bounds a usage chart's series: the largest by the period's total, the
// rest drawn as one. A part reports as many models a day as the event tool bounds, and a
// project may have many parts; each series is a colour and a table column per day.
const MaxChartSeries = 10

// foldSeries sorts the series by name, keeping at most MaxChartSeries: past it, the
// MaxChartSeries-1 largest by total and one series that adds up the others.
func foldSeries(series []string, sums map[string][]float64, days int) []string {
	if len(series) <= MaxChartSeries {
		slices.Sort(series)
		return series
	}
	total := make(map[string]float64, len(series))
	for _, k := range series {
		for _, v := range sums[k] {
			total[k] += v
		}
	}
	slices.SortFunc(series, func(a, b string) int {
		if c := cmp.Compare(total[b], total[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	kept, rest := series[:MaxChartSeries-1], series[MaxChartSeries-1:]
	others := fmt.Sprintf("%d others", len(rest))
	for sums[others] != nil { // a model or part may bear that name
		others = "(" + others + ")"
	}
	sums[others] = make([]float64, days)
	for _, k := range rest {
		for i, v := range sums[k] {
			sums[others][i] += v
		}
	}
	kept = slices.Clone(kept)
	slices.Sort(kept)
	return append(kept, others)
}

// stacked lays out one chart: a bar per day from first, stacked by series (key), with the
// table of the same numbers and their totals.
func stacked(id, title string, rows []threads.UsageRow, first time.Time, days int, key func(threads.UsageRow) string,
	value func(threads.UsageRow) float64, format, axis func(float64) string) chart {
	in := chartInput{ID: id, Title: title, RowHead: "Day", Format: format, Axis: axis, Total: true}
	sums := map[string][]float64{}
	for _, u := range rows {
		i := int(u.Day.Time.Sub(first).Hours() / 24)
		if i < 0 || i >= days {
			continue
		}
		k := key(u)
		if sums[k] == nil {
			sums[k] = make([]float64, days)
			in.Series = append(in.Series, k)
		}
		sums[k][i] += value(u)
	}
	in.Series = foldSeries(in.Series, sums, days)
	for i := range days {
		day := first.AddDate(0, 0, i).Format(time.DateOnly)
		b := chartBucket{Key: day, Label: day[5:], Values: make([]float64, len(in.Series))}
		for s, k := range in.Series {
			b.Values[s] = sums[k][i]
		}
		in.Buckets = append(in.Buckets, b)
	}
	c := layoutChart(in)
	c.Summary = title + ", total " + c.Total + ": the table below has the numbers"
	c.Caption = title + " (total " + c.Total + ")"
	c.NoData, c.Fold = "No usage reported in this period.", true
	return c
}
