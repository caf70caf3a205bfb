package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// Event types with a meaning of their own; any other type is recorded as activity.
const (
	EventComposing = "composing"
	EventLimited   = "limited"
	EventError     = "error"
)

// MaxDetailBytes bounds an event's detail object.
const MaxDetailBytes = 8 << 10

// Bounds of one usage report, far above any real call. usage_daily adds reports up per
// part, model and day in bigint and numeric(18,6) columns (the latter holds less than
// 10^12 dollars): a report beyond these is refused rather than overflowing the column,
// and UsageAdd caps a day's totals at what the columns hold.
const (
	MaxUsageTokens  int64 = 1_000_000_000_000
	MaxUsageCostUSD int64 = 1_000_000
)

// A part's day of usage holds at most MaxUsageModelsPerDay models; reports naming others
// that day are added up under OtherUsageModel. Agents name their model freely, and each
// model is a row the usage page and its export read.
const (
	MaxUsageModelsPerDay = 20
	OtherUsageModel      = "(other models)"
)

// Usage is an event's usage report.
type Usage struct {
	InputTokens  *int64   `json:"input_tokens,omitempty"`
	OutputTokens *int64   `json:"output_tokens,omitempty"`
	CacheTokens  *int64   `json:"cache_tokens,omitempty"`
	CostUSD      *float64 `json:"cost_usd,omitempty"`
	Model        string   `json:"model"`
}

// EventInput is event's arguments.
type EventInput struct {
	Type   string          `json:"type"`
	Detail json.RawMessage `json:"detail,omitempty"`
	Usage  *Usage          `json:"usage,omitempty"`
}

// EventResult is event's answer.
type EventResult struct {
	EventID string `json:"eventId"`
	Type    string `json:"type"`
	// limited: the park state after the event.
	Parked       *bool `json:"parked,omitempty"`
	ParkedUntil  *Time `json:"parkedUntil,omitempty"`
	Clamped      bool  `json:"clamped,omitempty"`
	ComposingFor *int  `json:"composingSeconds,omitempty"`
	// error with detail.contradicts: what happened to the entry.
	Contradiction *knowledge.Contradiction `json:"contradiction,omitempty"`
	// Redacted names the kinds of secret masked in the stored detail, as send's answer
	// does. Absent when nothing was masked.
	Redacted []string `json:"redacted,omitempty"`
}

func invalid(format string, args ...any) error {
	return apperr.New(apperr.Invalid, format, args...).WithReason(apperr.ReasonInvalidArgument)
}

// Event records a work event: activity (every type but composing), usage per project,
// part, model and day, the composing indicator, parking on a provider rate limit, and
// contradictions of knowledge. Each type with a meaning of its own has its method.
func (s *Service) Event(ctx context.Context, sc tenancy.Scope, in EventInput) (EventResult, error) {
	detail, err := checkEvent(sc, in)
	if err != nil {
		return EventResult{}, err
	}
	ev := &event{in: in, detail: detail, now: s.now(), res: EventResult{EventID: newID().String(), Type: in.Type}}
	switch in.Type {
	case EventComposing:
		err = s.composingEvent(ctx, sc, ev)
	case EventLimited:
		err = s.limitedEvent(ctx, sc, ev)
	case EventError:
		err = s.errorEvent(ctx, sc, ev)
	default:
		err = s.recordEvent(ctx, sc, ev, nil)
	}
	if err != nil {
		return EventResult{}, err
	}
	return ev.res, nil
}

// event is one Event call on its way: its input, decoded detail, clock and answer.
type event struct {
	in     EventInput
	detail eventDetail
	now    time.Time
	res    EventResult
}

// eventDetail is an event's detail object, its members still raw.
type eventDetail map[string]json.RawMessage

// str reads a string member: ok is false when it is absent or null.
func (d eventDetail) str(k string) (v string, ok bool, err error) {
	raw, ok := d[k]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", true, invalid("detail.%s must be a string", k)
	}
	return v, true, nil
}

// checkEvent checks what every event type shares: the detail is a bounded object, the
// usage report is within bounds, and a part named in the detail is the caller's own.
func checkEvent(sc tenancy.Scope, in EventInput) (eventDetail, error) {
	if strings.HasPrefix(in.Type, ServiceEventPrefix) {
		// The feed shows these as what people did (a thread canceled by a person): an
		// agent's event must not pass for one.
		return nil, invalid("type %q is reserved: types starting %q are recorded by the service itself", in.Type, ServiceEventPrefix)
	}
	detail := eventDetail{}
	if len(in.Detail) > 0 && string(in.Detail) != "null" {
		if len(in.Detail) > MaxDetailBytes {
			return nil, invalid("detail is larger than %d bytes", MaxDetailBytes)
		}
		if err := json.Unmarshal(in.Detail, &detail); err != nil {
			return nil, invalid("detail must be an object")
		}
	}
	if u := in.Usage; u != nil {
		if strings.TrimSpace(u.Model) == "" {
			return nil, apperr.New(apperr.Invalid, "usage needs model (the model id) so usage can be grouped by model").WithReason(ReasonUsageModelRequired)
		}
		for name, v := range map[string]*int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cache_tokens": u.CacheTokens} {
			if v != nil && (*v < 0 || *v > MaxUsageTokens) {
				return nil, invalid("usage.%s must be between 0 and %d", name, MaxUsageTokens)
			}
		}
		if c := u.CostUSD; c != nil && !(*c >= 0 && *c <= float64(MaxUsageCostUSD)) {
			return nil, invalid("usage.cost_usd must be between 0 and %d", MaxUsageCostUSD)
		}
	}
	if p, ok, err := detail.str("part"); err != nil {
		return nil, err
	} else if ok && p != sc.Part {
		return nil, apperr.New(apperr.Forbidden, "you can only report events for your own part %q", sc.Part).WithReason(ReasonOwnPartOnly)
	}
	return detail, nil
}

// composingEvent shows that the caller is writing in a thread, for ComposingFor; it is
// an indicator, not activity.
func (s *Service) composingEvent(ctx context.Context, sc tenancy.Scope, ev *event) error {
	v, ok, err := ev.detail.str("threadId")
	if err != nil {
		return err
	}
	if !ok {
		return apperr.New(apperr.Invalid, "composing needs detail.threadId, the thread you are writing in").WithReason(ReasonThreadRequired)
	}
	thread, err := parseID("detail.threadId", v)
	if err != nil {
		return err
	}
	return s.recordEvent(ctx, sc, ev, func(tx *pg.Tx) error {
		if _, err := s.Q.ThreadGet(ctx, tx, db.ThreadGetParams{ProjectID: sc.ProjectID, ID: thread}); pg.IsNoRows(err) {
			return threadNotFound(thread.String())
		} else if err != nil {
			return err
		}
		if err := s.Q.ComposingUpsert(ctx, tx, db.ComposingUpsertParams{ProjectID: sc.ProjectID, ThreadID: thread, MemberID: sc.MemberID, ExpiresAt: ev.now.Add(ComposingFor)}); err != nil {
			return err
		}
		secs := int(ComposingFor / time.Second)
		ev.res.ComposingFor = &secs
		return nil
	})
}

// limitedEvent parks the caller until its provider's rate limit resets (at most
// MaxParkWindow ahead), or unparks it when the reset is absent or past.
func (s *Service) limitedEvent(ctx context.Context, sc tenancy.Scope, ev *event) error {
	v, ok, err := ev.detail.str("resetAt")
	if err != nil {
		return apperr.New(apperr.Invalid, "detail.resetAt must be an RFC 3339 timestamp string").WithReason(ReasonInvalidResetAt)
	}
	var parkUntil *time.Time
	if ok {
		t, err := parseResetAt(v)
		if err != nil {
			return err
		}
		if t.After(ev.now) {
			if t.Sub(ev.now) > MaxParkWindow {
				t, ev.res.Clamped = ev.now.Add(MaxParkWindow), true
			}
			t = t.UTC()
			parkUntil = &t
		}
	}
	return s.recordEvent(ctx, sc, ev, func(tx *pg.Tx) error {
		got, err := s.Q.MembershipSetParkedUntil(ctx, tx, db.MembershipSetParkedUntilParams{ParkedUntil: parkUntil, Now: ev.now, ProjectID: sc.ProjectID, ID: sc.MemberID})
		if err != nil {
			return err
		}
		parked := got != nil
		ev.res.Parked = &parked
		if got != nil {
			t := Time(*got)
			ev.res.ParkedUntil = &t
		}
		return nil
	})
}

// errorEvent records an error; with detail.contradicts it reports that a knowledge entry
// was wrong, which needs write access.
func (s *Service) errorEvent(ctx context.Context, sc tenancy.Scope, ev *event) error {
	contradicts, given, err := ev.detail.str("contradicts")
	if err != nil {
		return err
	}
	if given && strings.TrimSpace(contradicts) == "" {
		// Recorded as a plain error, it demoted nothing and said nothing of it.
		return invalid("detail.contradicts must be the knowledgeId your work proved wrong, not an empty string")
	}
	if contradicts == "" {
		return s.recordEvent(ctx, sc, ev, nil)
	}
	if !sc.CanWrite() {
		return apperr.New(apperr.Forbidden, "reporting a contradiction needs write access to the project; your part has %s access", sc.Access).WithReason(knowledge.ReasonWriteAccessRequired)
	}
	return s.recordEvent(ctx, sc, ev, func(tx *pg.Tx) error {
		if s.Knowledge == nil {
			return apperr.New(apperr.Unavailable, "the knowledge base is not configured")
		}
		c, err := s.Knowledge.Contradict(ctx, tx, sc, contradicts)
		if err != nil {
			return err
		}
		ev.res.Contradiction = &c
		return nil
	})
}

// recordEvent runs the type's own statements (work, may be nil), then adds the usage
// report and, for every type but composing, the activity row: one transaction.
func (s *Service) recordEvent(ctx context.Context, sc tenancy.Scope, ev *event, work func(tx *pg.Tx) error) error {
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		s.changed(tx, sc.ProjectID) // the activity feed, composing and usage are live on the dashboard
		if work != nil {
			if err := work(tx); err != nil {
				return err
			}
		}
		if ev.in.Usage != nil {
			if err := s.addUsage(ctx, tx, usageParams(sc, ev.in.Usage, ev.now)); err != nil {
				return err
			}
		}
		if ev.in.Type == EventComposing {
			return nil
		}
		d := ev.in.Detail
		if len(d) == 0 || string(d) == "null" {
			d = json.RawMessage(`{}`)
		}
		// The detail is stored and shown on the activity feed: secrets in any of its
		// strings are masked like a message's, without an error (docs/secrets.md).
		if s.Secrets != nil {
			masked, kinds, err := s.Secrets.MaskJSON(d)
			if err != nil {
				return err
			}
			d, ev.res.Redacted = masked, kinds
		}
		var usage []byte
		if ev.in.Usage != nil {
			var err error
			if usage, err = json.Marshal(ev.in.Usage); err != nil {
				return fmt.Errorf("event usage: %w", err)
			}
		}
		member := sc.MemberID
		return s.Q.ActivityEventInsert(ctx, tx, db.ActivityEventInsertParams{ProjectID: sc.ProjectID, ID: uuid.MustParse(ev.res.EventID), MemberID: &member,
			Type: ev.in.Type, Detail: d, Usage: usage, Now: ev.now})
	})
	if err != nil {
		return pg.Classify("event", err)
	}
	return nil
}

// addUsage adds a report to its part's day, under OtherUsageModel when the day holds
// MaxUsageModelsPerDay models already and not this one. Two first reports of new models
// at once may both pass the count, by one row each.
func (s *Service) addUsage(ctx context.Context, tx *pg.Tx, p db.UsageAddParams) error {
	day, err := s.Q.UsageDayModels(ctx, tx, db.UsageDayModelsParams{ProjectID: p.ProjectID, MemberID: p.MemberID, Day: p.Day, Model: p.Model})
	if err != nil {
		return err
	}
	if !day.Known && day.Models >= MaxUsageModelsPerDay {
		p.Model = OtherUsageModel
	}
	return s.Q.UsageAdd(ctx, tx, p)
}

func usageParams(sc tenancy.Scope, u *Usage, now time.Time) db.UsageAddParams {
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	var cost pgtype.Numeric
	c := 0.0
	if u.CostUSD != nil {
		c = *u.CostUSD
	}
	_ = cost.Scan(strconv.FormatFloat(c, 'f', 6, 64))
	y, m, d := now.UTC().Date()
	return db.UsageAddParams{ProjectID: sc.ProjectID, MemberID: sc.MemberID, Model: u.Model,
		Day:         pgtype.Date{Time: time.Date(y, m, d, 0, 0, 0, 0, time.UTC), Valid: true},
		InputTokens: v(u.InputTokens), OutputTokens: v(u.OutputTokens), CacheTokens: v(u.CacheTokens), CostUsd: cost}
}

// CloseIdle closes every open thread, across projects, without a message for idle (the
// periodic auto-close; DefaultIdle is the product's 30 minutes). It returns how many it
// closed. Threads locked by a concurrent reply or close are skipped until the next run.
func (s *Service) CloseIdle(ctx context.Context, idle time.Duration) (int, error) {
	total := 0
	for {
		n := 0
		err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
			now := s.now()
			cutoff := now.Add(-idle)
			rows, err := s.Q.ThreadListIdle(ctx, tx, db.ThreadListIdleParams{Cutoff: cutoff, Lim: idleCloseBatch})
			if err != nil {
				return err
			}
			n = 0
			// The candidates were read without locks (from every shard on Citus); each
			// project's are locked by one router statement, skipping those a reply or a
			// close holds, and closed.
			var order []uuid.UUID
			byProject := map[uuid.UUID][]uuid.UUID{}
			for _, r := range rows {
				if byProject[r.ProjectID] == nil {
					order = append(order, r.ProjectID)
				}
				byProject[r.ProjectID] = append(byProject[r.ProjectID], r.ID)
			}
			by := "idle"
			for _, p := range order {
				ids, err := s.Q.ThreadLockIdle(ctx, tx, db.ThreadLockIdleParams{ProjectID: p, Ids: byProject[p], Cutoff: cutoff})
				if err != nil {
					return err
				}
				n += len(ids)
				// The writes return nothing anyone reads: pipelined, they travel with the
				// next project's lock or the COMMIT.
				if err := tx.Pipeline(func() error {
					for _, id := range ids {
						if err := s.Q.ThreadEnd(ctx, tx, db.ThreadEndParams{Status: StatusClosed, Now: &now, ClosedBy: &by, ProjectID: p, ID: id}); err != nil {
							return err
						}
						if err := s.endThread(ctx, tx, p, id, now); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, pg.Classify("close idle threads", err)
		}
		total += n
		if n < idleCloseBatch {
			return total, nil
		}
	}
}

// CancelResult is what a person's cancel did.
type CancelResult struct {
	ProjectID string `json:"projectId"`
	ThreadID  string `json:"threadId"`
	Status    string `json:"status"`
	// Canceled is whether this call canceled it (false: it was canceled already, and a
	// script's repeat changed nothing).
	Canceled bool `json:"canceled"`
}

// Cancel ends a thread on a person's behalf (`relayroom admin thread cancel`): an open
// thread becomes canceled, leaves every inbox and its wakes are canceled; close then
// reports canceled to the agents. Canceling a canceled thread changes nothing; a thread
// that already closed stays closed.
func (s *Service) Cancel(ctx context.Context, project string, threadID uuid.UUID) (CancelResult, error) {
	host, slug, ok := strings.Cut(project, "/")
	if !ok {
		return CancelResult{}, apperr.New(apperr.Invalid, "a project is named \"host/slug\", got %q", text.Cut(project, text.MaxEcho))
	}
	var res CancelResult
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		// The project first, then its thread locked: on Citus FOR UPDATE needs the
		// project's id as a value.
		p, err := s.Q.ProjectGetBySlug(ctx, tx, db.ProjectGetBySlugParams{HostSlug: host, ProjectSlug: slug})
		if pg.IsNoRows(err) {
			// Said as the other admin commands say it, so that a typo in the project is
			// not taken for a missing thread.
			return apperr.New(apperr.NotFound, "unknown project %q", text.Cut(project, text.MaxEcho))
		}
		if err != nil {
			return err
		}
		t, err := s.Q.ThreadGetForCancel(ctx, tx, db.ThreadGetForCancelParams{ProjectID: p.ID, ThreadID: threadID})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no thread %s in project %s", threadID, project)
		}
		if err != nil {
			return err
		}
		res = CancelResult{ProjectID: t.ProjectID.String(), ThreadID: t.ID.String(), Status: t.Status}
		if t.Status != StatusOpen {
			if t.Status == StatusClosed {
				return apperr.New(apperr.Conflict, "thread %s is already closed", threadID)
			}
			return nil
		}
		now, by := s.now(), "person"
		if err := s.Q.ThreadEnd(ctx, tx, db.ThreadEndParams{Status: StatusCanceled, Now: &now, ClosedBy: &by, ProjectID: t.ProjectID, ID: t.ID}); err != nil {
			return err
		}
		res.Status, res.Canceled = StatusCanceled, true
		if err := s.endThread(ctx, tx, t.ProjectID, t.ID, now); err != nil {
			return err
		}
		// In the host's history, as a person's cancel on the dashboard is.
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: p.HostOrgID, ProjectID: t.ProjectID, Kind: audit.KindThread,
			ObjectID: t.ID.String(), Action: StatusCanceled})
	})
	if err != nil {
		return CancelResult{}, pg.Classify("cancel thread", err)
	}
	return res, nil
}

// localTimestamp is an ISO 8601 date-time without a UTC offset: valid ISO, but it names no
// instant, so it is refused with a message that says what is missing.
const localTimestamp = "2006-01-02T15:04:05.999999999"

// parseResetAt reads a limited event's resetAt: RFC 3339, with Z or a ±hh:mm offset.
// RFC 3339 allows a lower-case t and z, which Go's layout does not: the value is read
// upper-cased (no other letter is valid in it, so nothing else is let through).
func parseResetAt(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(v))
	if err == nil {
		return t, nil
	}
	if _, lerr := time.Parse(localTimestamp, v); lerr == nil {
		return time.Time{}, apperr.New(apperr.Invalid, "detail.resetAt %q has no UTC offset, so it names no instant: write RFC 3339 with Z or an offset, e.g. %sZ or %s+02:00", v, v, v).WithReason(ReasonInvalidResetAt)
	}
	return time.Time{}, apperr.New(apperr.Invalid, "detail.resetAt %q is not an RFC 3339 timestamp (e.g. 2026-06-11T08:00:00Z)", v).WithReason(ReasonInvalidResetAt)
}
