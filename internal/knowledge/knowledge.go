// Package knowledge is the project's knowledge base: entries agents propose (candidates),
// people or CI make trusted, agents recall and report as used, and contradictions demote.
// Every write goes through the project's redaction rules and the secret detectors. It is
// a shared domain service: the threads toolset uses it for recall, learn, recall_used,
// lessons on close and contradictions, and other toolsets may.
package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/stopwords"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// Kinds of entries.
var Kinds = []string{"fact", "procedure", "pitfall", "decision"}

// Statuses of entries.
const (
	StatusCandidate = "candidate"
	StatusTrusted   = "trusted"
	StatusDemoted   = "demoted"
	StatusRejected  = "rejected"
	StatusExpired   = "expired"
)

// Sources of entries.
const (
	SourceLearn  = "learn"
	SourceLesson = "lesson"
)

// Limits of a write.
const (
	MaxTitle = 200
	MaxBody  = 5000
)

// Limits of recall's query and answer (also its schema's bounds).
const (
	MinRecallQuery = 2
	MaxRecallQuery = 500
	MaxRecall      = 20
	DefaultRecall  = 5
)

// RecallTimeout bounds the recall query on its own, below the transaction's timeout.
const RecallTimeout = 2 * time.Second

// TitleThreshold is the trigram word similarity a title needs to be a recall candidate
// by the title channel (which catches typos the word channel misses).
const TitleThreshold = 0.5

// contentWords is the query without stop words (the query itself if nothing is left).
func contentWords(q string) string {
	var keep []string
	for _, w := range strings.Fields(q) {
		// Their trigrams are in most titles and would make every entry a candidate.
		if !stopwords.Is(w) {
			keep = append(keep, w)
		}
	}
	if len(keep) == 0 {
		return q
	}
	return strings.Join(keep, " ")
}

// searchText is what recall's full-text channel searches for a query: the query, and the
// compound of each two adjacent words, so that "time out" and "keep-alive" reach an entry
// that writes "timeout" or "keepalive" (the full-text stems of a compound are not those of
// its halves, and its trigrams stand mostly in no half's). Only words of letters are
// joined, into compounds of 5 to 40 letters (knowledge_word's longest); a compound
// that is no entry's word matches nothing. The other way, a compound in the query and its
// halves written apart in an entry, is not searched: one half is often a stop word that
// full text does not index ("out"), so only the title's trigrams reach it.
func searchText(q string) string {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) })
	var b strings.Builder
	b.WriteString(q)
	for i := 1; i < len(words); i++ {
		if n := utf8.RuneCountInString(words[i-1]) + utf8.RuneCountInString(words[i]); n >= 5 && n <= 40 {
			b.WriteString(" ")
			b.WriteString(words[i-1])
			b.WriteString(words[i])
		}
	}
	return b.String()
}

// RedactedTitle replaces a title that redaction emptied.
const RedactedTitle = "(redacted)"

// Deps are what the knowledge base is built from (New).
type Deps struct {
	DB *pg.DB
	Q  *db.Queries
	// Detector masks secrets in what learn stores; nil builds one (loading the detectors
	// costs tens of milliseconds, once), so that one can be shared with other services.
	Detector *secrets.Detector
	// Now is the clock; nil is the wall clock.
	Now func() time.Time
}

// Service is the knowledge base. Build it with New.
type Service struct {
	Deps
}

// New builds the service.
func New(d Deps) (*Service, error) {
	if d.Detector == nil {
		det, err := secrets.NewDetector()
		if err != nil {
			return nil, fmt.Errorf("knowledge: secret detector: %w", err)
		}
		d.Detector = det
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Q == nil {
		d.Q = db.New()
	}
	return &Service{Deps: d}, nil
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now().UTC()
}

// Config is the project's knowledge_config with defaults for absent keys. It is read on
// every decision, never cached: an UPDATE of the column takes effect on the next call.
type Config struct {
	DistillOnClose       bool    `json:"distillOnClose"`
	RecallFloor          float64 `json:"recallFloor"`          // minimum similarity × confidence to be recalled
	DemoteBelow          float64 `json:"demoteBelow"`          // read and kept for old configs; no longer used: one contradiction demotes
	ContradictionPenalty float64 `json:"contradictionPenalty"` // confidence lost per contradiction
	DuplicateSimilarity  float64 `json:"duplicateSimilarity"`  // trigram similarity that links a near-duplicate
	LessonsPerHour       int     `json:"lessonsPerHour"`       // per agent
	ApprovedConfidence   float64 `json:"approvedConfidence"`   // confidence a person's approval gives
	CIConfidence         float64 `json:"ciConfidence"`         // confidence a CI confirmation gives
}

// DefaultConfig is what an empty knowledge_config means.
func DefaultConfig() Config {
	return Config{DistillOnClose: true, RecallFloor: 0.3, DemoteBelow: 0.4, ContradictionPenalty: 0.25,
		DuplicateSimilarity: 0.8, LessonsPerHour: 60, ApprovedConfidence: 1, CIConfidence: 0.9}
}

// settings is what a knowledge decision reads from the project row.
type settings struct {
	cfg      Config
	rules    []secrets.Rule
	rulesErr error // redactionRules present but not a list of rules
}

func (s *Service) load(ctx context.Context, tx *pg.Tx, projectID uuid.UUID) (settings, error) {
	row, err := s.Q.ProjectGetKnowledgeSettings(ctx, tx, projectID)
	if err != nil {
		return settings{}, err
	}
	st := settings{cfg: DefaultConfig()}
	if len(row.KnowledgeConfig) > 0 {
		// Unknown keys are ignored; a key of the wrong type keeps its default.
		var m map[string]json.RawMessage
		if json.Unmarshal(row.KnowledgeConfig, &m) == nil {
			keys := map[string]any{
				"distillOnClose": &st.cfg.DistillOnClose, "recallFloor": &st.cfg.RecallFloor,
				"demoteBelow": &st.cfg.DemoteBelow, "contradictionPenalty": &st.cfg.ContradictionPenalty,
				"duplicateSimilarity": &st.cfg.DuplicateSimilarity, "lessonsPerHour": &st.cfg.LessonsPerHour,
				"approvedConfidence": &st.cfg.ApprovedConfidence, "ciConfidence": &st.cfg.CIConfidence,
			}
			for k, v := range m {
				if field, ok := keys[k]; ok {
					_ = json.Unmarshal(v, field) // the wrong type: the default stays
				}
			}
			if v, ok := m["distillOnClose"]; ok && string(v) == "null" {
				st.cfg.DistillOnClose = true
			}
		}
	}
	var set struct {
		RedactionRules json.RawMessage `json:"redactionRules"`
	}
	if len(row.Settings) > 0 && json.Unmarshal(row.Settings, &set) == nil && len(set.RedactionRules) > 0 && string(set.RedactionRules) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(set.RedactionRules)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st.rules); err != nil {
			st.rulesErr = &secrets.RuleError{Name: "redactionRules", Err: fmt.Errorf("not a list of {name, pattern, replacement?}: %w", err)}
		}
	}
	return st, nil
}

// Redacted is a title and body after the project's rules and the secret detectors.
type Redacted struct {
	Title, Body string
	// Kinds names what was redacted (rule names and secret kinds), for the caller.
	Kinds []string
	// replaced are the replacements of their own that matched rules put in: like a
	// marker, they are what redaction left, not what the writer said.
	replaced []string
}

// emptied reports whether s (the redacted title or body) holds nothing of substance
// once the markers and the rules' own replacements are taken out: a body that a rule
// with a replacement of its own reduced to "[codename]" is as empty as one reduced to a
// marker.
func (r Redacted) emptied(s string) bool {
	for _, rep := range r.replaced {
		s = strings.ReplaceAll(s, rep, "")
	}
	return secrets.IsEmptyAfterRedaction(s)
}

// redact applies the rules and the detectors to a title and body. An unusable rule fails
// with an error matching secrets.ErrRuleInvalid.
func (s *Service) redact(st settings, title, body string) (Redacted, error) {
	if st.rulesErr != nil {
		return Redacted{}, st.rulesErr
	}
	t, tf, tm, err := s.Detector.Redact(title, st.rules)
	if err != nil {
		return Redacted{}, err
	}
	b, bf, bm, err := s.Detector.Redact(body, st.rules)
	if err != nil {
		return Redacted{}, err
	}
	r := Redacted{Title: strings.TrimSpace(t), Body: strings.TrimSpace(b)}
	seen := map[string]bool{}
	// The rules that matched first, then the secrets found: a rule with a replacement of
	// its own leaves no marker to find, and was missing from redacted.
	for _, rule := range append(tm, bm...) {
		if !seen[rule.Name] {
			seen[rule.Name] = true
			r.Kinds = append(r.Kinds, rule.Name)
			if rule.Replacement != "" {
				r.replaced = append(r.replaced, rule.Replacement)
			}
		}
	}
	for _, f := range append(tf, bf...) {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			r.Kinds = append(r.Kinds, f.Kind)
		}
	}
	return r, nil
}

// Entry is a recalled entry.
type Entry struct {
	ID         string         `json:"knowledgeId"`
	Kind       string         `json:"kind"`
	Title      string         `json:"title"`
	Body       string         `json:"body"`
	Confidence float64        `json:"confidence"`
	Score      float64        `json:"score"`
	ExpiresAt  *wiretime.Time `json:"expiresAt,omitempty"`
	CreatedAt  wiretime.Time  `json:"createdAt"`
	// Provenance, so an agent can weigh what it is told: how the entry came (learn, or a
	// lesson written when threadId closed), which part of the project wrote it, and when
	// a person confirmed it. Who confirmed it is not given: a person's name is not an
	// agent's to read.
	Source      string         `json:"source"`
	LearnedBy   string         `json:"learnedBy,omitempty"`
	ThreadID    string         `json:"threadId,omitempty"`
	ConfirmedAt *wiretime.Time `json:"confirmedAt,omitempty"`
}

// LearnInput is learn's arguments.
type LearnInput struct {
	Title     string        `json:"title"`
	Body      string        `json:"body"`
	Kind      string        `json:"kind"`
	ExpiresAt *wiretime.Arg `json:"expiresAt,omitempty"`
}

// LearnResult is learn's answer.
type LearnResult struct {
	KnowledgeID string   `json:"knowledgeId"`
	Status      string   `json:"status"`
	DuplicateOf *string  `json:"duplicateOf,omitempty"`
	Redacted    []string `json:"redacted,omitempty"`
}

// Learn records a candidate. There is no path to trusted here: people and CI decide.
func (s *Service) Learn(ctx context.Context, sc tenancy.Scope, in LearnInput) (LearnResult, error) {
	if err := sc.RequireGrant(tenancy.GrantWriteMemory, NeedLearn); err != nil {
		return LearnResult{}, err
	}
	if !sc.CanWrite() {
		return LearnResult{}, apperr.New(apperr.Forbidden, "learn needs write access to the project; your part has %s access", sc.Access).WithReason(ReasonWriteAccessRequired)
	}
	now := s.now()
	expires := in.ExpiresAt.TimePtr()
	if expires != nil && !expires.After(now) {
		return LearnResult{}, apperr.New(apperr.Invalid, "expiresAt must be in the future").WithReason(apperr.ReasonInvalidArgument)
	}
	// Blank as sent is the caller's slip, not what redaction did to a secret.
	if secrets.IsEmptyAfterRedaction(in.Title) || secrets.IsEmptyAfterRedaction(in.Body) {
		return LearnResult{}, apperr.New(apperr.Invalid, "title and body must not be blank (each needs a letter or a digit)").WithReason(apperr.ReasonInvalidArgument)
	}
	var out LearnResult
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		st, err := s.load(ctx, tx, sc.ProjectID)
		if err != nil {
			return err
		}
		red, err := s.redact(st, in.Title, in.Body)
		if err != nil {
			return apperr.New(apperr.Conflict, "a redaction rule of this project cannot be applied (%v); nothing was written — ask a manager to fix the project's redaction rules", err).WithReason(ReasonRedactionUnresolvable)
		}
		if red.emptied(red.Body) {
			return apperr.New(apperr.Invalid, "the body is empty once secrets are redacted (%s); nothing was written", strings.Join(red.Kinds, ", ")).WithReason(ReasonEmptyAfterRedaction)
		}
		if red.emptied(red.Title) {
			red.Title = RedactedTitle
		}
		w, err := s.store(ctx, tx, sc, st, red, in.Kind, SourceLearn, nil, expires)
		if err != nil {
			if pg.IsCheckViolation(err) {
				return apperr.New(apperr.Invalid, "the entry is too long once secrets are redacted (title ≤ %d, body ≤ %d characters)", MaxTitle, MaxBody).WithReason(ReasonStorageFailed)
			}
			return err
		}
		out = LearnResult{KnowledgeID: w.ID.String(), Status: StatusCandidate, Redacted: red.Kinds}
		if w.DuplicateOf == nil {
			return nil
		}
		shown, err := s.mayName(ctx, tx, sc, *w.DuplicateOf)
		if shown {
			d := w.DuplicateOf.String()
			out.DuplicateOf = &d
		}
		return err
	})
	if err != nil {
		return LearnResult{}, pg.Classify("learn", err)
	}
	return out, nil
}

// Written is a stored candidate.
type Written struct {
	ID          uuid.UUID
	DuplicateOf *uuid.UUID
}

// titleKey is what near-duplicate titles most often share: their letters and digits,
// lower-cased ("Run migrations before deploy!" and "run migrations before deploy").
func titleKey(title string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, title)
}

// store inserts a redacted candidate, linking it to a near-duplicate of the project when
// one exists (both are then reviewed together; the new one is not a second, unlinked copy).
func (s *Service) store(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, st settings, red Redacted, kind, source string, threadID *uuid.UUID, expires *time.Time) (Written, error) {
	w := Written{ID: uuid.Must(uuid.NewV7())}
	minTitle, minText, text := float32(st.cfg.DuplicateSimilarity)*0.75, float32(st.cfg.DuplicateSimilarity), red.Title+" "+red.Body
	// Another write of this title at once would not see this one, nor this one it: they
	// take turns, so the later one is linked (KnowledgeTitleLock). The lock travels with
	// the check, in its round trip.
	if err := tx.Pipeline(func() error {
		return s.Q.KnowledgeTitleLock(ctx, tx, db.KnowledgeTitleLockParams{ProjectID: sc.ProjectID, TitleKey: titleKey(red.Title)})
	}); err != nil {
		return Written{}, err
	}
	var dup uuid.UUID
	var err error
	if s.DB.Citus() {
		// Citus refuses the owner's read (rr_near_duplicate) of shards the transaction
		// already wrote as the request role (a close's lesson).
		dup, err = s.Q.KnowledgeFindNearDuplicateAsCaller(ctx, tx, db.KnowledgeFindNearDuplicateAsCallerParams{
			ProjectID: sc.ProjectID, Title: red.Title, MinTitle: minTitle, Text: text, MinText: minText})
	} else {
		dup, err = s.Q.KnowledgeFindNearDuplicate(ctx, tx, db.KnowledgeFindNearDuplicateParams{
			Title: red.Title, MinTitle: minTitle, Text: text, MinText: minText})
	}
	if pg.IsNoRows(err) {
		// No live original: the same title and text a person rejected, or a contradiction
		// demoted, is linked to that entry, so its reviewers see it was turned down
		// before instead of deciding afresh.
		dup, err = s.Q.KnowledgeFindTurnedDownTwin(ctx, tx, db.KnowledgeFindTurnedDownTwinParams{
			ProjectID: sc.ProjectID, Title: red.Title, Text: text, MinText: minText})
	}
	switch {
	case err == nil:
		w.DuplicateOf = &dup
	case !pg.IsNoRows(err):
		return Written{}, err
	}
	var member, agent *uuid.UUID
	var part *string
	if sc.MemberID != uuid.Nil {
		member, part = &sc.MemberID, &sc.Part
	}
	if sc.AgentID != uuid.Nil {
		agent = &sc.AgentID
	}
	err = s.Q.KnowledgeInsert(ctx, tx, db.KnowledgeInsertParams{
		ProjectID: sc.ProjectID, ID: w.ID, Kind: kind, Title: red.Title, Body: red.Body, Confidence: 0.5,
		Source: source, SourceThreadID: threadID, AuthorMemberID: member, AuthorAgentID: agent, AuthorPart: part,
		DuplicateOf: w.DuplicateOf, ExpiresAt: expires, Now: s.now(),
	})
	if err != nil {
		return Written{}, err
	}
	return w, nil
}

// mayName reports whether learn's answer may name the entry a new one duplicates: one
// the caller could read anyway (trusted and not past its expiry, with the grant recall
// needs) or wrote itself. Any other is linked all the same, for the review queue, but not
// named: the id of another part's candidate told the caller what others proposed and gave
// it an id to contradict, and candidates reach no other agent. A trusted entry past its
// expiry, not yet retired by the sweep, is one recall no longer returns: named, it was
// such an id too.
func (s *Service) mayName(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, id uuid.UUID) (bool, error) {
	orig, err := s.Q.KnowledgeGetStatus(ctx, tx, db.KnowledgeGetStatusParams{ProjectID: sc.ProjectID, ID: id})
	if err != nil {
		return false, err
	}
	own := orig.AuthorAgentID != nil && *orig.AuthorAgentID == sc.AgentID
	live := orig.ExpiresAt == nil || orig.ExpiresAt.After(s.now())
	readable := orig.Status == StatusTrusted && live && sc.RequireGrant(tenancy.GrantReadMemory, NeedRecall) == nil
	return own || readable, nil
}

// What each grant-gated knowledge operation does, as its refusal says it (the grant each
// one needs is in docs/tenancy.md, "Guests on every endpoint").
const (
	NeedRecall     = "recall reads the project's trusted knowledge"
	NeedRecallUsed = "recall_used reports on the project's recalled knowledge"
	NeedLearn      = "learn writes to the project's knowledge"
	NeedLesson     = "a lesson writes to the project's knowledge"
	NeedContradict = "a contradiction changes the project's knowledge"
)

// Lesson outcome codes (the spec's eight refusals, and recorded).
const (
	OutcomeRecorded              = "recorded"
	OutcomeThreadCanceled        = "thread_canceled"
	OutcomeUnauthorized          = "unauthorized"
	OutcomeDistillDisabled       = "distill_disabled"
	OutcomeRedactionUnresolvable = "redaction_unresolvable"
	OutcomeRateLimited           = "rate_limited"
	OutcomeEmptyAfterRedaction   = "empty_after_redaction"
	OutcomeAlreadyDecided        = "already_decided"
	OutcomeStorageFailed         = "storage_failed"
)

// LessonInput is close's optional lesson.
type LessonInput struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Kind  string `json:"kind"`
}

// LessonRequest is a lesson with what the thread already knows about itself.
type LessonRequest struct {
	LessonInput
	ThreadID uuid.UUID
	// Canceled: a person canceled the thread. AlreadyDecided: the thread's lesson was
	// recorded or refused before.
	Canceled, AlreadyDecided bool
}

// LessonOutcome is the lesson part of close's answer. Recorded false is not an error.
type LessonOutcome struct {
	Recorded    bool   `json:"recorded"`
	KnowledgeID string `json:"knowledgeId,omitempty"`
	Code        string `json:"code,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Title is the recorded entry's title, once redacted, for the caller's own use: the
	// contract's answer is {recorded, knowledgeId}, nothing more.
	Title string `json:"-"`
	// slip: the lesson was refused for how it was sent (blank, past a bound, an unknown
	// kind), before any redaction. It is refused with one of the contract's fixed codes but
	// settles nothing: a caller's slip must not keep the thread from its real lesson.
	slip bool
}

// Outcome is the code stored on the thread: recorded or the refusal.
func (o LessonOutcome) Outcome() string {
	if o.Recorded {
		return OutcomeRecorded
	}
	return o.Code
}

// Settles says whether the outcome decides the thread's lesson for good: it was recorded,
// or refused for what it says (emptied by redaction, past a limit once redacted). A
// refusal for who closed or when (unauthorized, rate_limited, distill_disabled,
// redaction_unresolvable: a project setting a person can fix; thread_canceled, which
// no lesson ever passes) leaves it open, so a later close of the ended thread can still
// record one.
func (o LessonOutcome) Settles() bool {
	return o.Recorded || ((o.Code == OutcomeEmptyAfterRedaction || o.Code == OutcomeStorageFailed) && !o.slip)
}

func refused(code, reason string) LessonOutcome {
	return LessonOutcome{Code: code, Reason: reason}
}

// Lesson decides and, when allowed, writes a lesson inside the close's transaction. Every
// expected refusal is decided before the write and comes back as an outcome; the write
// itself runs under a savepoint, so a storage error that is not infrastructure (a
// constraint) is the outcome storage_failed and the close goes on. An infrastructure
// failure (lost connection, statement timeout, deadlock) is returned as an error: it fails
// the close, as the spec requires.
func (s *Service) Lesson(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, req LessonRequest) (LessonOutcome, error) {
	if req.Canceled {
		return refused(OutcomeThreadCanceled, "the thread was canceled by a person; a canceled thread records no lesson"), nil
	}
	if err := sc.RequireGrant(tenancy.GrantWriteMemory, NeedLesson); err != nil {
		// The spec's outcome codes are fixed: a missing grant is unauthorized, with the
		// grant's refusal as the reason.
		return refused(OutcomeUnauthorized, apperrMessage(err)), nil
	}
	if !sc.CanWrite() {
		return refused(OutcomeUnauthorized, fmt.Sprintf("writing knowledge needs write access to the project; your part has %s access", sc.Access)), nil
	}
	st, err := s.load(ctx, tx, sc.ProjectID)
	if err != nil {
		return LessonOutcome{}, err
	}
	if !st.cfg.DistillOnClose {
		return refused(OutcomeDistillDisabled, "lessons on close are turned off for this project (knowledge_config distillOnClose is false)"), nil
	}
	// The thread's own state before the caller's budget and the lesson's text: nothing
	// sent to a thread whose lesson is decided can be recorded, and a rate_limited
	// answer ("try again later") would send the caller back for nothing.
	if req.AlreadyDecided {
		return refused(OutcomeAlreadyDecided, "this thread's lesson was already recorded, or refused for what it said"), nil
	}
	red, rerr := s.redact(st, req.Title, req.Body)
	if rerr != nil {
		return refused(OutcomeRedactionUnresolvable, "a redaction rule of this project cannot be applied: "+rerr.Error()), nil
	}
	// The limit is per agent across every project, as the contract says: an agent in
	// five projects gets 60 lessons an hour, not 300.
	if err := s.Q.AgentLessonLock(ctx, tx, sc.AgentID); err != nil {
		return LessonOutcome{}, err
	}
	since := s.now().Add(-time.Hour)
	n, err := s.Q.AgentLessonCount(ctx, tx, db.AgentLessonCountParams{OrgID: sc.OrgID, AgentID: sc.AgentID, Since: since})
	if err != nil {
		return LessonOutcome{}, err
	}
	if n >= int64(st.cfg.LessonsPerHour) {
		return refused(OutcomeRateLimited, fmt.Sprintf("%d lessons per agent per hour; try again later", st.cfg.LessonsPerHour)), nil
	}
	if secrets.IsEmptyAfterRedaction(req.Body) || secrets.IsEmptyAfterRedaction(req.Title) {
		// Nothing of substance as sent (no letter, no digit), before any rule ran.
		o := refused(OutcomeEmptyAfterRedaction, "the lesson's title and body must not be blank (each needs a letter or a digit); close again with the lesson written out")
		o.slip = true
		return o, nil
	}
	// The bounds are decided here, not by close's input schema: losing the lesson never
	// costs the close, so a lesson past a bound is an outcome (storage_failed, the
	// contract's code for a lesson that cannot be stored), and the close happens.
	if reason := lessonOutOfBounds(req.LessonInput); reason != "" {
		o := refused(OutcomeStorageFailed, reason+"; close again with the lesson corrected")
		o.slip = true
		return o, nil
	}
	if red.emptied(red.Body) {
		return refused(OutcomeEmptyAfterRedaction, "the lesson body is empty once secrets are redacted ("+strings.Join(red.Kinds, ", ")+")"), nil
	}
	if red.emptied(red.Title) {
		red.Title = RedactedTitle
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT lesson"); err != nil {
		return LessonOutcome{}, err
	}
	tid := req.ThreadID
	w, err := s.store(ctx, tx, sc, st, red, req.Kind, SourceLesson, &tid, nil)
	if err != nil {
		if pg.IsInfrastructure(err) {
			return LessonOutcome{}, err
		}
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT lesson"); rerr != nil {
			return LessonOutcome{}, errors.Join(err, rerr)
		}
		return refused(OutcomeStorageFailed, "the lesson could not be stored: "+storageReason(err)), nil
	}
	if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT lesson"); err != nil {
		return LessonOutcome{}, err
	}
	if err := s.Q.AgentLessonRecord(ctx, tx, db.AgentLessonRecordParams{OrgID: sc.OrgID, AgentID: sc.AgentID, ID: w.ID, Since: since, Now: s.now()}); err != nil {
		return LessonOutcome{}, err
	}
	return LessonOutcome{Recorded: true, KnowledgeID: w.ID.String(), Title: red.Title}, nil
}

// lessonOutOfBounds names what breaks a lesson's bounds as sent ("" when nothing does):
// learn's bounds, which its schema enforces for learn.
func lessonOutOfBounds(l LessonInput) string {
	switch {
	case utf8.RuneCountInString(l.Title) > MaxTitle:
		return fmt.Sprintf("the lesson's title holds %d characters, more than %d", utf8.RuneCountInString(l.Title), MaxTitle)
	case utf8.RuneCountInString(l.Body) > MaxBody:
		return fmt.Sprintf("the lesson's body holds %d characters, more than %d", utf8.RuneCountInString(l.Body), MaxBody)
	case !slices.Contains(Kinds, l.Kind):
		return fmt.Sprintf("the lesson's kind %q is not one of %s", l.Kind, strings.Join(Kinds, ", "))
	}
	return ""
}

func storageReason(err error) string {
	switch {
	case pg.IsCheckViolation(err):
		return fmt.Sprintf("it breaks a limit once redacted (title ≤ %d, body ≤ %d characters)", MaxTitle, MaxBody)
	case pg.IsUniqueViolation(err):
		return "it collides with an existing entry"
	case pg.IsForeignKeyViolation(err):
		return "it refers to something that no longer exists"
	}
	return "the database refused the write"
}

// RecallInput is recall's arguments.
type RecallInput struct {
	Query string  `json:"query"`
	Limit int     `json:"limit,omitempty"`
	Kind  *string `json:"kind,omitempty"`
}

// RecallResult is recall's answer.
type RecallResult struct {
	QueryID string  `json:"queryId"`
	Entries []Entry `json:"entries"`
}

// Recall returns the project's trusted, unexpired entries most similar to the query,
// weighted by confidence, above the project's floor; it records the query and what it
// returned so recall_used can accept exactly those ids.
func (s *Service) Recall(ctx context.Context, sc tenancy.Scope, in RecallInput) (RecallResult, error) {
	if err := sc.RequireGrant(tenancy.GrantReadMemory, NeedRecall); err != nil {
		return RecallResult{}, err
	}
	if in.Limit <= 0 {
		in.Limit = DefaultRecall
	}
	in.Limit = min(in.Limit, MaxRecall)
	out := RecallResult{QueryID: uuid.Must(uuid.NewV7()).String(), Entries: []Entry{}}
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		st, err := s.load(ctx, tx, sc.ProjectID)
		if err != nil {
			return err
		}
		now := s.now()
		// Its own statement timeout, and the threshold of the title channel's trigram match,
		// sent with the search (SetLocal: no round trip of their own).
		tx.SetLocal("statement_timeout", fmt.Sprintf("%dms", RecallTimeout.Milliseconds()))
		tx.SetLocal("pg_trgm.word_similarity_threshold", strconv.FormatFloat(TitleThreshold, 'f', 3, 64))
		cands, err := s.Q.KnowledgeRecall(ctx, tx, db.KnowledgeRecallParams{Query: in.Query, Search: searchText(in.Query),
			TitleQuery: contentWords(in.Query), ProjectID: sc.ProjectID, Now: now, Kind: in.Kind})
		if err != nil {
			return err
		}
		tx.SetLocal("statement_timeout", fmt.Sprintf("%dms", s.DB.StatementTimeout.Milliseconds()))
		rows := rankRecall(in.Query, cands, float32(st.cfg.RecallFloor), in.Limit)
		ids := make([]uuid.UUID, 0, len(rows))
		for _, r := range rows {
			ids = append(ids, r.ID)
			e := Entry{ID: r.ID.String(), Kind: r.Kind, Title: r.Title, Body: r.Body,
				Confidence: round(float64(r.Confidence)), Score: round(float64(r.score)), ExpiresAt: wiretime.Ptr(r.ExpiresAt), CreatedAt: wiretime.Time(r.CreatedAt),
				Source: r.Source, ConfirmedAt: wiretime.Ptr(r.DecidedAt)}
			if r.AuthorPart != nil {
				e.LearnedBy = *r.AuthorPart
			}
			if r.SourceThreadID != nil {
				e.ThreadID = r.SourceThreadID.String()
			}
			out.Entries = append(out.Entries, e)
		}
		qid := uuid.MustParse(out.QueryID)
		member := memberOf(sc)
		// The query is kept (eight weeks) and shown to the host's people (the Learning
		// panel's queries that found nothing): a secret an agent searched for is masked, as
		// in every stored text. The search itself ran on the query as sent.
		return s.Q.RecallQueryInsert(ctx, tx, db.RecallQueryInsertParams{ProjectID: sc.ProjectID, ID: qid, MemberID: member,
			Query: s.Detector.Mask(in.Query, 0), Returned: ids, Now: now})
	})
	if err != nil {
		return RecallResult{}, pg.Classify("recall", err)
	}
	return out, nil
}

// RecallUsed records that an entry a query returned shaped the caller's work. Only ids
// the named query returned are accepted, each once.
func (s *Service) RecallUsed(ctx context.Context, sc tenancy.Scope, queryID, knowledgeID string) error {
	// Before the ids are looked at: a refused caller learns nothing about them.
	if err := sc.RequireGrant(tenancy.GrantReadMemory, NeedRecallUsed); err != nil {
		return err
	}
	qid, err1 := uuid.Parse(queryID)
	kid, err2 := uuid.Parse(knowledgeID)
	if err1 != nil || err2 != nil {
		return apperr.New(apperr.Invalid, "queryId and knowledgeId must be ids returned by recall").WithReason(apperr.ReasonInvalidArgument)
	}
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		q, err := s.Q.RecallQueryGet(ctx, tx, db.RecallQueryGetParams{ProjectID: sc.ProjectID, ID: qid})
		// A query belongs to the part that ran it: another part's query id answers as
		// if it did not exist, so parts cannot inflate each other's hit rate.
		if err == nil && !sameMember(q.MemberID, sc) {
			err = pgx.ErrNoRows
		}
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no recall query %s in this project", queryID).WithReason(ReasonQueryNotFound)
		}
		if err != nil {
			return err
		}
		found := false
		for _, id := range q.Returned {
			if id == kid {
				found = true
				break
			}
		}
		if !found {
			return apperr.New(apperr.Invalid, "recall query %s did not return entry %s; only an entry the query returned can be reported as used", queryID, knowledgeID).WithReason(ReasonNotReturned)
		}
		n, err := s.Q.RecallUseInsert(ctx, tx, db.RecallUseInsertParams{ProjectID: sc.ProjectID, QueryID: qid, KnowledgeID: kid, Now: s.now()})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.New(apperr.Conflict, "entry %s was already reported as used for query %s", knowledgeID, queryID).WithReason(ReasonAlreadyReported)
		}
		return nil
	})
	return pg.Classify("recall_used", err)
}

// Contradiction is what a contradiction did to an entry.
type Contradiction struct {
	KnowledgeID string  `json:"knowledgeId"`
	Status      string  `json:"status"`
	Confidence  float64 `json:"confidence"`
}

// Contradict refutes an entry inside the caller's transaction (an event of type error
// with detail.contradicts): as the threads contract says, one contradiction demotes it
// (no longer recalled until a person approves it again) and lowers its confidence. An
// entry already demoted stays demoted and says so; a rejected one is not found.
func (s *Service) Contradict(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, knowledgeID string) (Contradiction, error) {
	if err := sc.RequireGrant(tenancy.GrantWriteMemory, NeedContradict); err != nil {
		return Contradiction{}, err
	}
	id, err := uuid.Parse(knowledgeID)
	if err != nil {
		return Contradiction{}, apperr.New(apperr.Invalid, "detail.contradicts must be a knowledgeId").WithReason(apperr.ReasonInvalidArgument)
	}
	st, err := s.load(ctx, tx, sc.ProjectID)
	if err != nil {
		return Contradiction{}, err
	}
	r, err := s.Q.KnowledgeContradict(ctx, tx, db.KnowledgeContradictParams{Penalty: float32(st.cfg.ContradictionPenalty),
		Now: s.now(), ProjectID: sc.ProjectID, ID: id})
	if pg.IsNoRows(err) {
		return Contradiction{}, apperr.New(apperr.NotFound, "no candidate, trusted or demoted knowledge entry %s in this project", knowledgeID).WithReason(ReasonKnowledgeNotFound)
	}
	if err != nil {
		return Contradiction{}, err
	}
	return Contradiction{KnowledgeID: r.ID.String(), Status: r.Status, Confidence: round(float64(r.Confidence))}, nil
}

// HitRate is used / returned over recall queries since a time.
type HitRate struct {
	Returned int64   `json:"returned"`
	Used     int64   `json:"used"`
	Rate     float64 `json:"rate"`
}

// RecallHitRate reports the project's recall hit rate since a time (the Learning panel).
func (s *Service) RecallHitRate(ctx context.Context, sc tenancy.Scope, since time.Time) (HitRate, error) {
	var h HitRate
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		r, err := s.Q.RecallQueryHitRate(ctx, tx, db.RecallQueryHitRateParams{ProjectID: sc.ProjectID, Since: since})
		h.Returned, h.Used = r.Returned, r.Used
		return err
	})
	if h.Returned > 0 {
		h.Rate = float64(h.Used) / float64(h.Returned)
	}
	return h, pg.Classify("recall hit rate", err)
}

// ExpireDue retires entries past their expiry, across projects (a periodic job). Recall
// already excludes them at read time; this makes the status say so.
func (s *Service) ExpireDue(ctx context.Context) (int64, error) {
	var n int64
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		n, err = s.Q.KnowledgeExpire(ctx, tx, s.now())
		return err
	})
	return n, pg.Classify("expire knowledge", err)
}

// apperrMessage is the client-facing message of a refusal.
func apperrMessage(err error) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return err.Error()
}

func sameMember(stored *uuid.UUID, sc tenancy.Scope) bool {
	if stored == nil {
		return sc.MemberID == uuid.Nil
	}
	return *stored == sc.MemberID
}

func memberOf(sc tenancy.Scope) *uuid.UUID {
	if sc.MemberID == uuid.Nil {
		return nil
	}
	m := sc.MemberID
	return &m
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
