package desk

import (
	"context"
	"math"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Report metrics.
const (
	MetricConversationVolume = "conversation_volume"
	MetricFirstResponseTime  = "first_response_time"
	MetricResolutionTime     = "resolution_time"
)

// Metrics lists the metrics in the schema's order.
var Metrics = []string{MetricConversationVolume, MetricFirstResponseTime, MetricResolutionTime}

const dateLayout = "2006-01-02"

// ReportInput is relaydesk_get_report's arguments.
type ReportInput struct {
	Metric    string  `json:"metric"`
	StartDate string  `json:"start_date"`
	EndDate   string  `json:"end_date"`
	InboxID   *string `json:"inbox_id,omitempty"` // a pointer, as SearchInput's: "" is a missing inbox

}

// Point is one day of a report; Value is null when nothing qualified that day.
type Point struct {
	Date  string   `json:"date"`
	Value *float64 `json:"value"`
}

// Report is relaydesk_get_report's structuredContent.
type Report struct {
	Metric      string  `json:"metric"`
	Unit        string  `json:"unit"`
	Timezone    string  `json:"timezone"`
	Aggregation string  `json:"aggregation"`
	Points      []Point `json:"points"`
}

// MsgReportsRole refuses a member who is neither owner nor admin.
const MsgReportsRole = "Reports are available to workspace owners and admins only."

// GetReport returns one point per day of an inclusive range of the workspace's calendar.
// Volume counts the conversations created that day; the time metrics are the mean, in
// elapsed seconds, over the conversations whose first public reply by a member (first
// response) or resolution (resolution time) happened that day, null when there is none.
func (s *Service) GetReport(ctx context.Context, sc tenancy.Scope, in ReportInput) (Report, error) {
	c, err := s.admit(ctx, sc, ScopeReportsRead, false)
	if err != nil {
		return Report{}, err
	}
	if !c.seesAll() {
		return Report{}, apperr.New(apperr.Forbidden, MsgReportsRole)
	}
	unit, aggregation := "seconds", "mean"
	switch in.Metric {
	case MetricConversationVolume:
		unit, aggregation = "conversations", "count"
	case MetricFirstResponseTime, MetricResolutionTime:
	default:
		return Report{}, invalid("argument \"metric\" must be one of conversation_volume, first_response_time, resolution_time")
	}
	start, err1 := time.Parse(dateLayout, in.StartDate)
	end, err2 := time.Parse(dateLayout, in.EndDate)
	switch {
	case err1 != nil:
		return Report{}, invalid("argument \"start_date\" must be a date (YYYY-MM-DD), got %q", in.StartDate)
	case err2 != nil:
		return Report{}, invalid("argument \"end_date\" must be a date (YYYY-MM-DD), got %q", in.EndDate)
	case end.Before(start):
		return Report{}, invalid("end_date (%s) is before start_date (%s)", in.EndDate, in.StartDate)
	}
	if days := int(end.Sub(start).Hours()/24) + 1; days > MaxReportDays {
		return Report{}, invalid("the range holds %d days; at most %d days, both ends included", days, MaxReportDays)
	}
	y, m, d := s.clock().In(c.location()).Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	oldest := today.AddDate(0, -ReportHistoryMonths, 0)
	switch {
	case start.Before(oldest):
		return Report{}, invalid("start_date must be within the %d months of report history (on or after %s)", ReportHistoryMonths, oldest.Format(dateLayout))
	case end.After(today):
		return Report{}, invalid("end_date is in the future (today is %s in the workspace's timezone, %s)", today.Format(dateLayout), c.tzName())
	}
	p := db.DeskReportParams{StartDate: in.StartDate, EndDate: in.EndDate, Tz: c.tzName(), Metric: in.Metric, OrgID: c.org}
	var rows []db.DeskReportRow
	err = s.db.InTenant(ctx, c.tenant(), func(tx *pg.Tx) (err error) {
		if in.InboxID != nil {
			id, err := s.visibleInbox(ctx, tx, c, *in.InboxID)
			if err != nil {
				return err
			}
			p.InboxID = &id
		}
		tx.CommitWithNext(ctx) // a read: its last statement carries the COMMIT
		rows, err = s.q.DeskReport(ctx, tx, p)
		return err
	})
	if err != nil {
		return Report{}, pg.Classify("desk: report", err)
	}
	out := Report{Metric: in.Metric, Unit: unit, Timezone: c.tzName(), Aggregation: aggregation, Points: make([]Point, 0, len(rows))}
	for _, r := range rows {
		pt := Point{Date: r.Day}
		switch {
		case in.Metric == MetricConversationVolume:
			pt.Value = new(float64(r.Observations))
		case r.Observations > 0:
			// Whole seconds: the unit the contract states, to the nearest second.
			pt.Value = new(math.Round(r.MeanSeconds))
		}
		out.Points = append(out.Points, pt)
	}
	return out, nil
}
