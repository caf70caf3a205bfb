package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// What the host's owners and admins do with a project's knowledge on the dashboard beyond
// approving and rejecting (people.go): edit a title before approving, demote or expire a
// trusted entry, read the thread a lesson cites, the Learning panel's series and the
// project's knowledge settings. Every change is refused to anyone else, as Decide is.

// Fields of the knowledge forms, named so that a refusal can be shown beside its field.
const (
	FieldTitle          = "title"
	FieldExpiresAt      = "expires_at"
	FieldRedactionRules = "redaction_rules"
)

// MaxRedactionRules bounds a project's redaction rules: every knowledge write applies
// each of them to its title and body.
const MaxRedactionRules = 50

// FieldError is a refusal of one field of a form: nothing was saved.
func FieldError(field, format string, args ...any) *apperr.Error {
	e := apperr.New(apperr.Invalid, format, args...).WithReason(apperr.ReasonInvalidArgument)
	e.Details = map[string]any{"field": field}
	return e
}

// ErrorField names the field a refusal is about ("" when it is about none).
func ErrorField(err error) string {
	e, ok := apperr.As(err)
	if !ok {
		return ""
	}
	f, _ := e.Details["field"].(string)
	return f
}

// requireReviewer admits an owner or admin of the host company, as Decide does.
func requireReviewer(sc tenancy.Scope) error {
	if err := sc.Admitted(); err != nil {
		return err
	}
	if !sc.IsPerson() || !sc.IsHost() || !sc.IsOrgAdmin() {
		return apperr.New(apperr.Forbidden, MsgReviewerRole)
	}
	return nil
}

// ApproveAs approves an entry as a person, first replacing its title with title when that
// is not blank and differs: the new title goes through the project's redaction rules and
// the secret detectors like every knowledge write, and both changes are one transaction
// (a refused approval keeps the old title).
func (s *Service) ApproveAs(ctx context.Context, sc tenancy.Scope, id uuid.UUID, title string) (Decision, error) {
	if err := requireReviewer(sc); err != nil {
		return Decision{}, err
	}
	title = strings.TrimSpace(title)
	if n := utf8.RuneCountInString(title); n > MaxTitle {
		return Decision{}, FieldError(FieldTitle, "the title is %d characters; at most %d", n, MaxTitle)
	}
	var d Decision
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		if title != "" {
			st, err := s.load(ctx, tx, sc.ProjectID)
			if err != nil {
				return err
			}
			red, err := s.redact(st, title, "-")
			if err != nil {
				return FieldError(FieldTitle, "a redaction rule of this project cannot be applied (%v); fix the rules in the knowledge settings", err)
			}
			if red.emptied(red.Title) {
				return FieldError(FieldTitle, "the title is empty once secrets are redacted")
			}
			if utf8.RuneCountInString(red.Title) > MaxTitle {
				return FieldError(FieldTitle, "the title is longer than %d characters once secrets are redacted", MaxTitle)
			}
			now := s.now()
			// An entry that is not a candidate or demoted keeps its title and is refused
			// by decide below, with its state.
			if err := s.Q.KnowledgeRetitle(ctx, tx, db.KnowledgeRetitleParams{Title: red.Title, Now: now, ProjectID: sc.ProjectID, ID: id}); err != nil {
				return err
			}
		}
		var err error
		d, err = s.decide(ctx, tx, sc.ProjectID, id, StatusTrusted, "person:"+sc.Person.Name, func(c Config) float64 { return c.ApprovedConfidence })
		return err
	})
	return d, pg.Classify("approve knowledge", err)
}

// Demote takes a trusted entry out of recall as a person; it can be approved again.
func (s *Service) Demote(ctx context.Context, sc tenancy.Scope, id uuid.UUID) (Decision, error) {
	if err := requireReviewer(sc); err != nil {
		return Decision{}, err
	}
	return s.changeTrusted(ctx, sc, id, StatusDemoted, "demote knowledge", func(tx *pg.Tx, by string) (db.KnowledgeDecideRow, error) {
		now := s.now()
		r, err := s.Q.KnowledgeDemoteTrusted(ctx, tx, db.KnowledgeDemoteTrustedParams{DecidedBy: &by, Now: &now, ProjectID: sc.ProjectID, ID: id})
		return db.KnowledgeDecideRow(r), err
	})
}

// Expire sets when a trusted entry stops being recalled; at (or before) now retires it at
// once. A zero at means now.
func (s *Service) Expire(ctx context.Context, sc tenancy.Scope, id uuid.UUID, at time.Time) (Decision, error) {
	if err := requireReviewer(sc); err != nil {
		return Decision{}, err
	}
	now := s.now()
	if at.IsZero() {
		at = now
	}
	if at.Before(now.Add(-time.Minute)) {
		return Decision{}, FieldError(FieldExpiresAt, "the expiry %s is in the past; leave it blank to expire the entry now", at.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if at.Before(now) {
		at = now
	}
	return s.changeTrusted(ctx, sc, id, StatusExpired, "expire knowledge", func(tx *pg.Tx, by string) (db.KnowledgeDecideRow, error) {
		r, err := s.Q.KnowledgeSetExpiry(ctx, tx, db.KnowledgeSetExpiryParams{ExpiresAt: &at, Now: now, DecidedBy: by, ProjectID: sc.ProjectID, ID: id})
		return db.KnowledgeDecideRow(r), err
	})
}

// changeTrusted runs a person's change of a trusted entry (demote, expire) and records its
// audit event; no row from change means the entry is missing or not trusted, which
// notTrusted tells apart. op names the change in a classified error.
func (s *Service) changeTrusted(ctx context.Context, sc tenancy.Scope, id uuid.UUID, to, op string,
	change func(tx *pg.Tx, by string) (db.KnowledgeDecideRow, error)) (Decision, error) {
	var d Decision
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		r, err := change(tx, "person:"+sc.Person.Name)
		if pg.IsNoRows(err) {
			return s.notTrusted(ctx, tx, sc, id, to)
		}
		if err != nil {
			return err
		}
		d = decision(r)
		return audit.RecordIntended(ctx, tx)
	})
	return d, pg.Classify(op, err)
}

// decision is a decided entry's row as the caller sees it.
func decision(r db.KnowledgeDecideRow) Decision {
	return Decision{KnowledgeID: r.ID, Status: r.Status, Confidence: round(float64(r.Confidence))}
}

// notTrusted explains why an entry could not be demoted or expired: missing (or another
// project's) or not trusted.
func (s *Service) notTrusted(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, id uuid.UUID, to string) error {
	cur, err := s.Q.KnowledgeGetStatus(ctx, tx, db.KnowledgeGetStatusParams{ProjectID: sc.ProjectID, ID: id})
	if pg.IsNoRows(err) {
		return apperr.New(apperr.NotFound, "no knowledge entry %s in this project", id).WithReason(ReasonKnowledgeNotFound)
	}
	if err != nil {
		return err
	}
	return apperr.New(apperr.Conflict, "knowledge entry %s is %s and cannot become %s; only a trusted entry can", id, cur.Status, to).WithReason(ReasonAlreadyDecided)
}

// Citation is the thread a lesson cites, with its messages, as the review queue shows it.
type Citation struct {
	KnowledgeID uuid.UUID
	Title       string
	Status      string // the entry's
	Thread      CitedThread
}

// CitedThread is a thread and its messages in order.
type CitedThread struct {
	ID        uuid.UUID
	Subject   string
	Status    string
	CreatedAt time.Time
	Messages  []CitedMessage // the newest, in order: as many as citedMaxMessages and citedMaxBytes allow
	// EarlierOmitted says the thread has older messages than those shown.
	EarlierOmitted bool
}

// A cited thread shows its newest messages, as many as a page of the threads toolset's
// show holds: a thread has no bound of its own, and read whole, one of 400 long replies
// made a page of a hundred megabytes.
const (
	citedMaxMessages = 200
	citedMaxBytes    = 1 << 20
)

// CitedMessage is one message of a cited thread.
type CitedMessage struct {
	ID        uuid.UUID
	FromPart  string
	Body      string
	CreatedAt time.Time
}

// Cited reads the thread an entry cites, for the people who review it: the host's
// people (a guest company's people do not read the host's threads here). An entry that is
// not in the project, or cites no thread, is not found.
func (s *Service) Cited(ctx context.Context, sc tenancy.Scope, id uuid.UUID) (Citation, error) {
	if err := sc.Admitted(); err != nil {
		return Citation{}, err
	}
	if !sc.IsPerson() || !sc.IsHost() {
		return Citation{}, apperr.New(apperr.NotFound, "no knowledge entry %s citing a thread in this project", id).WithReason(ReasonKnowledgeNotFound)
	}
	var c Citation
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		r, err := s.Q.KnowledgeGetCitation(ctx, tx, db.KnowledgeGetCitationParams{ProjectID: sc.ProjectID, ID: id})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no knowledge entry %s citing a thread in this project", id).WithReason(ReasonKnowledgeNotFound)
		}
		if err != nil {
			return err
		}
		c = Citation{KnowledgeID: r.KnowledgeID, Title: r.Title, Status: r.KnowledgeStatus,
			Thread: CitedThread{ID: r.ThreadID, Subject: r.Subject, Status: r.Status, CreatedAt: r.CreatedAt}}
		tx.CommitWithNext(ctx) // the last read: no round trip for the COMMIT
		msgs, err := s.Q.MessageListByThread(ctx, tx, db.MessageListByThreadParams{ProjectID: sc.ProjectID, ThreadID: r.ThreadID})
		size := 0
		for _, m := range msgs { // newest first
			size += text.JSONSize(m.Body)
			if len(c.Thread.Messages) == citedMaxMessages || (len(c.Thread.Messages) > 0 && size > citedMaxBytes) {
				c.Thread.EarlierOmitted = true
				break
			}
			c.Thread.Messages = append(c.Thread.Messages, CitedMessage{ID: m.ID, FromPart: m.FromPart, Body: m.Body, CreatedAt: m.CreatedAt})
		}
		slices.Reverse(c.Thread.Messages)
		return err
	})
	return c, pg.Classify("cited thread", err)
}

// Learning panel windows: the daily series covers LearningDays days, the weekly one
// LearningWeeks weeks (Monday to Sunday, UTC), both ending today.
const (
	LearningDays  = 14
	LearningWeeks = 8
	// MaxEmptyQueries bounds the list of queries that returned nothing.
	MaxEmptyQueries = 20
)

// Bucket is the hit rate of one day or week.
type Bucket struct {
	Start time.Time
	HitRate
}

// Learning is the Learning panel: the hit rate (used / returned) per day and per week,
// and the recent queries that returned nothing.
type Learning struct {
	Days, Weeks []Bucket
	Empty       []EmptyQuery
}

// EmptyQuery is a recall query that returned nothing, with how often it was asked.
type EmptyQuery struct {
	Query  string
	Times  int64
	LastAt time.Time
}

// Learning reads the panel in one transaction: one statement for the series (per UTC
// day over the weekly window; the days' window is its tail) and one for the empty
// queries. Reading it takes the read_memory grant for a guest, as recall does.
func (s *Service) Learning(ctx context.Context, sc tenancy.Scope, now time.Time) (Learning, error) {
	if err := sc.RequireGrant(tenancy.GrantReadMemory, NeedRecall); err != nil {
		return Learning{}, err
	}
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	monday := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
	weeksFrom := monday.AddDate(0, 0, -7*(LearningWeeks-1))
	daysFrom := today.AddDate(0, 0, -(LearningDays - 1))
	since := weeksFrom
	if daysFrom.Before(since) {
		since = daysFrom
	}
	var l Learning
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		rows, err := s.Q.RecallQueryDailyHitRate(ctx, tx, db.RecallQueryDailyHitRateParams{ProjectID: sc.ProjectID, Since: since})
		if err != nil {
			return err
		}
		tx.CommitWithNext(ctx) // the last read: no round trip for the COMMIT
		empty, err := s.Q.RecallQueryListEmpty(ctx, tx, db.RecallQueryListEmptyParams{ProjectID: sc.ProjectID, Since: weeksFrom, Lim: MaxEmptyQueries})
		if err != nil {
			return err
		}
		l.Days, l.Weeks = series(rows, daysFrom, LearningDays, 1), series(rows, weeksFrom, LearningWeeks, 7)
		if !sc.IsHost() {
			// The queries' text is what the host's agents asked: a guest's people see
			// the rates only.
			return nil
		}
		for _, e := range empty {
			l.Empty = append(l.Empty, EmptyQuery{Query: e.Query, Times: e.Times, LastAt: e.LastAt})
		}
		return nil
	})
	return l, pg.Classify("learning panel", err)
}

// series sums daily rows into n buckets of span days from start (a bucket without
// queries is there, empty, so the chart's axis has no gaps).
func series(rows []db.RecallQueryDailyHitRateRow, start time.Time, n, span int) []Bucket {
	out := make([]Bucket, n)
	for i := range out {
		out[i].Start = start.AddDate(0, 0, i*span)
	}
	for _, r := range rows {
		d := r.Day.UTC()
		if d.Before(start) {
			continue
		}
		i := int(d.Sub(start).Hours()/24) / span
		if i >= n {
			continue
		}
		out[i].Returned += r.Returned
		out[i].Used += r.Used
	}
	for i := range out {
		if out[i].Returned > 0 {
			out[i].Rate = float64(out[i].Used) / float64(out[i].Returned)
		}
	}
	return out
}

// KnowledgeSettings are what the settings page shows and saves.
type KnowledgeSettings struct {
	// DistillOnClose is the effective value (absent means true).
	DistillOnClose bool
	// Rules are the project's redaction rules; RulesErr says why the stored value is not
	// a list of rules (every knowledge write is refused until they are saved again).
	Rules    []secrets.Rule
	RulesErr string
}

// Settings reads the project's knowledge settings for its reviewers.
func (s *Service) Settings(ctx context.Context, sc tenancy.Scope) (KnowledgeSettings, error) {
	if err := requireReviewer(sc); err != nil {
		return KnowledgeSettings{}, err
	}
	var out KnowledgeSettings
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		tx.CommitWithNext(ctx) // the only read: no round trip for the COMMIT
		st, err := s.load(ctx, tx, sc.ProjectID)
		if err != nil {
			return err
		}
		out = KnowledgeSettings{DistillOnClose: st.cfg.DistillOnClose, Rules: st.rules}
		if st.rulesErr != nil {
			out.RulesErr = st.rulesErr.Error()
		}
		return nil
	})
	return out, pg.Classify("knowledge settings", err)
}

// SettingsChange is a save of the settings page. DistillOnClose nil leaves the stored
// value as it is (the page sends it only when the person changed it, so a value set by
// SQL while the page was open survives a save of the rules).
type SettingsChange struct {
	DistillOnClose *bool
	Rules          []secrets.Rule
}

// SaveSettings validates every rule first (a bad one refuses the whole save, naming the
// rule) and then merges the change into the project in one statement:
// knowledge_config || {"distillOnClose": …} keeps every other key, and redactionRules is
// replaced inside settings without touching its other keys.
func (s *Service) SaveSettings(ctx context.Context, sc tenancy.Scope, c SettingsChange) error {
	if err := requireReviewer(sc); err != nil {
		return err
	}
	if len(c.Rules) > MaxRedactionRules {
		return FieldError(FieldRedactionRules, "at most %d redaction rules (got %d)", MaxRedactionRules, len(c.Rules))
	}
	if err := secrets.ValidateRules(c.Rules); err != nil {
		var msgs []string
		for _, e := range flatten(err) {
			var re *secrets.RuleError
			if errors.As(e, &re) {
				msgs = append(msgs, fmt.Sprintf("rule %q: %v", re.Name, re.Err))
			}
		}
		return FieldError(FieldRedactionRules, "nothing was saved: %s", strings.Join(msgs, "; "))
	}
	patch := map[string]any{}
	if c.DistillOnClose != nil {
		patch["distillOnClose"] = *c.DistillOnClose
	}
	cfg, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("knowledge settings: %w", err)
	}
	rules := c.Rules
	if rules == nil {
		rules = []secrets.Rule{}
	}
	var rb bytes.Buffer
	enc := json.NewEncoder(&rb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rules); err != nil {
		return fmt.Errorf("knowledge settings: %w", err)
	}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		n, err := s.Q.ProjectMergeKnowledgeSettings(ctx, tx, db.ProjectMergeKnowledgeSettingsParams{ConfigPatch: cfg, Rules: rb.Bytes(), ProjectID: sc.ProjectID})
		if err == nil && n == 0 {
			return apperr.New(apperr.NotFound, "no such project")
		}
		if err != nil {
			return err
		}
		return audit.RecordIntended(ctx, tx)
	})
	return pg.Classify("save knowledge settings", err)
}

// flatten lists the errors errors.Join put together.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
