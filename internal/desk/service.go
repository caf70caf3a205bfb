// Package desk is the desk toolset served on /desk/mcp: six tools for a support person's
// AI assistant over a helpdesk workspace (search and read conversations, list inboxes,
// find saved replies, daily reports, private notes), the personal access tokens people
// reach it with, and the writes that bring a workspace's data in (admin apply, the
// ingest API, CSV import, the demo seed). docs/desk.md is its contract in our words.
package desk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Reason codes of the desk errors that are more precise than their apperr code; the desk
// wire format sends a reason as the error's code.
const (
	ReasonPlanRequired        = "PLAN_REQUIRED"
	ReasonCursorExpired       = "CURSOR_EXPIRED"
	ReasonIdempotencyConflict = "IDEMPOTENCY_CONFLICT"
	ReasonAuthRequired        = "AUTH_REQUIRED"
)

// MsgAccessEnded answers a verified token whose holder was removed from the workspace or
// deactivated in it.
const MsgAccessEnded = "Your access to this workspace no longer stands (you are no longer an active member of it); reauthorise the connector."

// Token scopes, each required by the tools that read or write what it names.
const (
	ScopeConversationsRead = "conversations:read"
	ScopeInboxesRead       = "inboxes:read"
	ScopeSavedRepliesRead  = "saved_replies:read"
	ScopeReportsRead       = "reports:read"
	ScopeNotesWrite        = "notes:write"
)

// Scopes lists every scope, in the order the endpoint's challenge and metadata announce.
var Scopes = []string{ScopeConversationsRead, ScopeInboxesRead, ScopeSavedRepliesRead, ScopeReportsRead, ScopeNotesWrite}

// Roles of a workspace's members.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Plans of a workspace.
const (
	PlanTrial   = "trial"
	PlanStarter = "starter"
	PlanGrowth  = "growth"
	PlanScale   = "scale"
)

// Conversation statuses and message types.
const (
	StatusOpen     = "open"
	StatusPending  = "pending"
	StatusResolved = "resolved"

	TypeCustomer  = "customer"
	TypeReply     = "reply"
	TypeNote      = "note"
	TypeAutomated = "automated"
)

// Bounds of the tools' arguments: the schemas state them and the service holds them.
const (
	DefaultLimit      = 20
	MaxLimit          = 50
	MinQueryLen       = 2
	MaxQueryLen       = 200
	MaxNoteBody       = 5000
	MinIdempotencyKey = 8
	MaxIdempotencyKey = 128
	// MaxReportDays is the longest report range, both ends included.
	MaxReportDays = 31
	// ReportHistoryMonths is how far back a report may start, in the workspace's calendar.
	ReportHistoryMonths = 24
	// CursorTTL is how long a cursor can be used after the page that issued it.
	CursorTTL = 15 * time.Minute
	// NoteKeyRetention is how long a note's idempotency key is remembered.
	NoteKeyRetention = 24 * time.Hour
)

// Deps are what the service needs; New checks them.
type Deps struct {
	DB *pg.DB
	Q  *db.Queries
	// CursorKey signs cursors (HMAC-SHA256); every replica must hold the same one, at
	// least 32 bytes. A key derived from it is used, so it can be shared with other uses.
	CursorKey []byte
	// Secrets refuses notes that hold a live credential. Required.
	Secrets *secrets.Detector
	// Limits are the rate limits by plan; nil takes DefaultLimits.
	Limits map[string]Limits
	// AccessTokens verifies tokens other than personal access tokens (OAuth access tokens
	// once sign-in issues them); nil refuses them.
	AccessTokens AccessTokens
	// Boxes seal inbox connection secrets: the first (RELAYROOM_SECRET_KEY) seals and
	// opens, the others (RELAYROOM_SECRET_KEY_PREVIOUS, during a rotation) only open.
	// Empty: secrets cannot be stored; everything else works.
	Boxes []Box
	// Now is the clock of cursors, rate windows, reports and note keys (time.Now when nil).
	Now func() time.Time
	// SearchCandidates is how many matches search reads from the full-text index before
	// it takes the term for a common one and walks the conversations by updated_at
	// instead (0: DefaultSearchCandidates). Either way the page is the same; tests set it
	// to reach both plans on a small workspace.
	SearchCandidates int
}

// DefaultSearchCandidates bounds the matches search collects through the full-text
// index and sorts itself; past it, the walk by updated_at meets a page's worth of
// matches soon (at least one conversation in 100 of a 100k workspace matches).
const DefaultSearchCandidates = 500

// Service is the desk toolset.
type Service struct {
	db        *pg.DB
	q         *db.Queries
	cursorKey []byte
	secrets   *secrets.Detector
	limits    map[string]Limits
	tokens    AccessTokens
	boxes     []Box
	now       func() time.Time
	// searchCap is Deps.SearchCandidates.
	searchCap int
}

// New builds the service.
func New(d Deps) (*Service, error) {
	switch {
	case d.DB == nil:
		return nil, errors.New("desk: a database is required")
	case len(d.CursorKey) < 32:
		return nil, errors.New("desk: the cursor signing key must be at least 32 bytes")
	case d.Secrets == nil:
		return nil, errors.New("desk: a secrets detector is required")
	case slices.Contains(d.Boxes, nil):
		return nil, errors.New("desk: a secret box is nil")
	}
	if d.Q == nil {
		d.Q = db.New()
	}
	s := &Service{db: d.DB, q: d.Q, secrets: d.Secrets, limits: d.Limits, tokens: d.AccessTokens, boxes: slices.Clone(d.Boxes), now: d.Now}
	if s.limits == nil {
		s.limits = DefaultLimits()
	}
	for _, p := range []string{PlanGrowth, PlanScale} {
		if err := s.limits[p].check(); err != nil {
			return nil, fmt.Errorf("desk: %s limits: %w", p, err)
		}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.searchCap = d.SearchCandidates; s.searchCap <= 0 {
		s.searchCap = DefaultSearchCandidates
	}
	m := hmac.New(sha256.New, d.CursorKey)
	m.Write([]byte("relaydesk cursor v1"))
	s.cursorKey = m.Sum(nil)
	return s, nil
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// caller is the verified person of a desk call.
type caller struct {
	org  uuid.UUID
	user uuid.UUID
	role string
	plan string
	tz   string
}

func (c caller) seesAll() bool { return c.role == RoleOwner || c.role == RoleAdmin }

func (c caller) tenant() pg.Tenant { return pg.Tenant{OrgID: c.org} }

// scopeMissing is the FORBIDDEN of a token without the scope a call requires.
func scopeMissing(scope string) error {
	e := apperr.New(apperr.Forbidden, "The token lacks the %s scope this call requires; request that access and reauthorise.", scope)
	e.Details = map[string]any{"required_scope": scope}
	return e
}

func invalid(format string, args ...any) error {
	return apperr.New(apperr.Invalid, format, args...)
}

// admit checks, in this order, what every tool requires before it does any work: a
// person whose grant still stands, a plan with MCP access, the tool's token scope, for a
// write (the note, the only one) the Scale plan, and the rate limits. An error is the
// answer. The write's plan is checked before the count: a Growth caller's note can never
// succeed, so it is PLAN_REQUIRED however often it is tried, never RATE_LIMITED.
func (s *Service) admit(ctx context.Context, sc tenancy.Scope, scope string, write bool) (caller, error) {
	p := sc.Person
	if p == nil || sc.OrgID == uuid.Nil {
		return caller{}, apperr.New(apperr.Unauthenticated, "This endpoint needs a person's token; reauthorise the connector.").WithReason(ReasonAuthRequired)
	}
	if p.Role == "" {
		return caller{}, apperr.New(apperr.Unauthenticated, MsgAccessEnded).WithReason(ReasonAuthRequired)
	}
	if p.Plan != PlanGrowth && p.Plan != PlanScale {
		return caller{}, apperr.New(apperr.Forbidden, "The workspace's %s plan does not include MCP access; it needs Growth or Scale.", p.Plan).WithReason(ReasonPlanRequired)
	}
	if !slices.Contains(p.Scopes, scope) {
		return caller{}, scopeMissing(scope)
	}
	if write && p.Plan != PlanScale {
		return caller{}, apperr.New(apperr.Forbidden, MsgNoteScale).WithReason(ReasonPlanRequired)
	}
	c := caller{org: sc.OrgID, user: p.UserID, role: p.Role, plan: p.Plan, tz: p.Timezone}
	if err := s.hit(ctx, c, write); err != nil {
		return caller{}, err
	}
	return c, nil
}

// location is the workspace's timezone (UTC when it cannot be loaded: the organisation's
// timezone is checked when it is set, so this only guards a broken tz database).
func (c caller) location() *time.Location {
	if loc, err := tenancy.LoadTimezone(c.tz); err == nil {
		return loc
	}
	return time.UTC
}

// tzName is the name of location() for PostgreSQL: a stored zone it does not know
// ("Local", from before such a zone was refused) is UTC, as in Go.
func (c caller) tzName() string {
	if _, err := tenancy.LoadTimezone(c.tz); err != nil {
		return "UTC"
	}
	return c.tz
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// stamp is a time as a conversation or message stores it: to the second, the precision
// answers show (ts). Lists sort on the stored times, then by id: stored finer, two
// conversations of one shown second came out in the order of their fractions, which to
// a client reads as ids out of the contract's order.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// stampPtr is stamp for a time that may be absent.
func stampPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	s := stamp(*t)
	return &s
}

func tsp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	v := ts(*t)
	return &v
}
