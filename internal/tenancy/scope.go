// Package tenancy resolves a request's credential, once, into the Scope every service
// function takes explicitly: who is calling, in which organisation and project, as which
// part, with what access, under which agreement.
package tenancy

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
)

// Access levels of a membership.
const (
	AccessRead    = "read"
	AccessWrite   = "write"
	AccessManager = "manager"
)

// Agreement grants. They gate the rooms tools (docs/rooms.md) and the threads toolset's
// knowledge (docs/tenancy.md, "Guests on every endpoint").
const (
	GrantReadMemory  = "read_memory"
	GrantWriteMemory = "write_memory"
	GrantAssignTasks = "assign_tasks"
)

// Capabilities a manager grants to a part (membership.capabilities).
const (
	// CapUrgent lets a part's messages and tasks wake their recipient past its budget.
	CapUrgent = "urgent"
	// CapNeedsHuman lets a part flag a thread for people.
	CapNeedsHuman = "needsHuman"
)

// Agreement statuses.
const (
	AgreementPending = "pending"
	AgreementActive  = "active"
	AgreementRevoked = "revoked"
)

// Scope is the verified caller. A zero ProjectID means an agent not yet bound to a room
// (the all-rooms address before a room_id is resolved).
type Scope struct {
	OrgID      uuid.UUID
	OrgName    string
	AgentID    uuid.UUID
	AgentSlug  string
	AgentName  string
	AgentModel string
	AgentKind  string

	ProjectID    uuid.UUID
	ProjectName  string
	MemberID     uuid.UUID
	Part         string
	IsMain       bool
	Nickname     *string
	Access       string
	Capabilities []string
	ParkedUntil  *time.Time

	HostOrgID uuid.UUID
	HostName  string
	// AgreementStatus and Grants describe the caller's organisation's agreement with the
	// host; empty status means none exists. Meaningless for the host itself.
	AgreementStatus string
	Grants          []string

	// Visible is the directory (organisations, projects, agents, people) the caller may
	// see beyond its own organisation and project, computed when it was bound; it holds
	// the project's members only when the scope is admitted. nil (a Scope made by hand)
	// has each transaction compute it.
	Visible *pg.Visible

	// Person is set when the caller is a person rather than an agent: one holding a token
	// that fixes their organisation (the desk endpoint), or one signed in to the dashboard
	// (docs/dashboard.md), who acts in a room with no agent. nil for an agent.
	Person *Person

	// pending is set on a Scope a provisional resolver served from its cache before
	// verifying it (Resolver.Provisional, Settle).
	pending *pending
}

// Person is a person acting for OrgID: who they are, what their organisation says about
// them now, and (with a token) what the token allows.
type Person struct {
	UserID   uuid.UUID
	Name     string   // their display name: agents read a person's room message as "Name [Organisation] (human)"
	Role     string   // owner, admin or member; "" when no longer a member (the grant no longer stands)
	Plan     string   // the organisation's plan
	Timezone string   // the organisation's IANA timezone
	Scopes   []string // what a token allows (the desk); none for a dashboard session
}

// Reasons of the agreement refusals: the machine-readable error codes of the threads and
// desk formats (the rooms format shows the message alone).
const (
	ReasonNoAgreement   = "no_agreement"
	ReasonGrantRequired = "grant_required"
)

// Tenant is what RLS sees for this caller's transactions. A scope that is not admitted (a
// guest without an active agreement) carries no project: should a code path forget to ask
// Admitted, its transactions still see none of the project's rows (fail closed).
func (s Scope) Tenant() pg.Tenant {
	t := pg.Tenant{OrgID: s.OrgID, AgentID: s.AgentID, Visible: s.Visible}
	if s.admitted() {
		t.ProjectID = s.ProjectID
	}
	return t
}

// admitted: not bound to a project (nothing of one to see), the host, or a guest under an
// active agreement.
func (s Scope) admitted() bool { return !s.InRoom() || s.AgreementActive() }

// Admitted is nil when the caller may act in its project: the host's agents always, a
// guest's agents while their organisation's agreement is active. Otherwise it is the one
// refusal every endpoint gives, the same for a pending, a revoked and a missing agreement,
// so that a refused guest learns nothing about the project from it. The Scope is resolved
// on every request, so a change of agreement applies from the next call.
func (s Scope) Admitted() error {
	if s.admitted() {
		return nil
	}
	return apperr.New(apperr.Forbidden, MsgNoAgreement).WithReason(ReasonNoAgreement)
}

// RequireGrant is Admitted, then one grant of the agreement (hosts hold every grant). The
// refusal names the grant and what needed it (what, e.g. "recall reads the project's
// knowledge"), under the reason grant_required.
func (s Scope) RequireGrant(grant, what string) error {
	if err := s.Admitted(); err != nil {
		return err
	}
	if s.Granted(grant) {
		return nil
	}
	return apperr.New(apperr.Forbidden, "%s, which needs the %s grant: your organisation's agreement with the host does not give it", what, grant).WithReason(ReasonGrantRequired)
}

// InRoom reports whether the scope is bound to a project.
func (s Scope) InRoom() bool { return s.ProjectID != uuid.Nil }

// IsHost reports whether the caller's organisation hosts the room.
func (s Scope) IsHost() bool { return s.InRoom() && s.OrgID == s.HostOrgID }

// AgreementActive reports whether a guest's agreement is active (always true for the host).
func (s Scope) AgreementActive() bool { return s.IsHost() || s.AgreementStatus == AgreementActive }

// Granted reports whether the caller may use a rooms capability: hosts always, guests when
// their active agreement grants it.
func (s Scope) Granted(grant string) bool {
	return s.IsHost() || (s.AgreementStatus == AgreementActive && slices.Contains(s.Grants, grant))
}

// HasCapability reports a membership capability (urgent, needsHuman).
func (s Scope) HasCapability(c string) bool { return slices.Contains(s.Capabilities, c) }

// CanWrite reports write or manager access.
func (s Scope) CanWrite() bool { return s.Access == AccessWrite || s.Access == AccessManager }
