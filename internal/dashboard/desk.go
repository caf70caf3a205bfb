package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// The desk pages under /app/desk/ (docs/dashboard.md, "Desk"): so far the reports, as
// server-rendered SVG bar charts with a table under each, read through the same
// desk.Service.GetReport as relaydesk_get_report (owners and admins, desk.MsgReportsRole).

// Report windows the page offers, in days (at most desk.MaxReportDays).
var deskWindows = []int{7, 14, desk.MaxReportDays}

// deskView is the desk pages' part of the view.
type deskView struct {
	Days    int
	Windows []deskWindow
	Charts  []deskChart
	Message string // the desk's refusal (a plan without desk access)
}

// deskWindow is a link to the reports over another number of days.
type deskWindow struct {
	Days int
	URL  string
}

// deskChart is one metric's report, drawn, with what the page says under it.
type deskChart struct {
	Metric, Unit, Timezone string
	Max                    string // the largest day's value
	Chart                  chart
}

var metricTitles = map[string]string{
	desk.MetricConversationVolume: "Conversations created",
	desk.MetricFirstResponseTime:  "Mean first response time",
	desk.MetricResolutionTime:     "Mean resolution time",
}

func (h *Handler) serveDesk(w http.ResponseWriter, r *http.Request, sess web.Session, rest []string) {
	if len(rest) != 1 || rest[0] != "reports" || r.Method != http.MethodGet {
		h.notFound(w, &sess)
		return
	}
	c, ok := h.adminActor(w, r, sess) // reports are the owners' and admins' (desk.MsgReportsRole)
	if !ok {
		return
	}
	if _, ok := h.deskWorkspace(w, r, sess, c); !ok {
		return
	}
	h.deskReports(c)
}

func (h *Handler) deskReports(c adminCtx) {
	days := desk.MaxReportDays
	if d, err := strconv.Atoi(c.r.URL.Query().Get("days")); err == nil && slices.Contains(deskWindows, d) {
		days = d
	}
	h.show(c, http.StatusOK, view{}, "Desk reports", "desk", func(ctx context.Context, v *view) error {
		org := v.Admin.Org
		// The person as the desk sees a member of the workspace (role, plan, timezone),
		// allowed to read reports: the same checks as a token with reports:read.
		sc := tenancy.Scope{OrgID: org.ID, OrgName: org.Name, Person: &tenancy.Person{UserID: c.a.UserID, Name: c.a.Name, Role: c.a.Role,
			Plan: org.Plan, Timezone: org.Timezone, Scopes: []string{desk.ScopeReportsRead}}}
		end := inZone(time.Now(), org.Timezone)
		start := end.AddDate(0, 0, -(days - 1))
		v.Desk = &deskView{Days: days}
		for _, d := range deskWindows {
			u := Prefix + "desk/reports?days=" + strconv.Itoa(d)
			if c.orgQ != "" {
				u += "&org=" + c.a.OrgID.String()
			}
			v.Desk.Windows = append(v.Desk.Windows, deskWindow{Days: d, URL: u})
		}
		for _, m := range desk.Metrics {
			rep, err := h.deps.Desk.GetReport(ctx, sc, desk.ReportInput{Metric: m, StartDate: start.Format("2006-01-02"), EndDate: end.Format("2006-01-02")})
			if e, ok := apperr.As(err); ok && (e.Code == apperr.Forbidden || e.Code == apperr.Invalid) {
				v.Desk.Message = e.Message
				return nil
			}
			if err != nil {
				return err
			}
			v.Desk.Charts = append(v.Desk.Charts, drawReport(rep))
		}
		return nil
	})
}

// drawReport charts a report, one bar a day; a day when nothing qualified has no bar and
// an empty cell.
func drawReport(rep desk.Report) deskChart {
	title := metricTitles[rep.Metric]
	format := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	in := chartInput{ID: "r-" + rep.Metric, Title: title, RowHead: "Day", Series: []string{rep.Unit}, Format: format,
		Axis: shortNumber, Columns: []string{rep.Unit}}
	largest := 0.0
	for _, p := range rep.Points {
		b := chartBucket{Key: p.Date, Label: p.Date[min(5, len(p.Date)):], Cells: []string{""}}
		if p.Value != nil {
			b.Values, b.Cells[0] = []float64{*p.Value}, format(*p.Value)
			largest = max(largest, *p.Value)
		}
		in.Buckets = append(in.Buckets, b)
	}
	c := layoutChart(in)
	c.Caption = title + " per day (" + rep.Unit + "; empty: nothing qualified)"
	return deskChart{Metric: rep.Metric, Unit: rep.Unit, Timezone: rep.Timezone, Max: format(largest), Chart: c}
}
