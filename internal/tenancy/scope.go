// Package tenancy resolves a request's credential, once, into the Scope every service
// function takes explicitly: who is calling, in which organisation and project, as which
// part, with what access, under which agreement.
package tenancy

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
)

// Access levels of a membership.
const (
	AccessRead    = "read"
	AccessWrite   = "write"
	AccessManager = "manager"
)

// Agreement grants (rooms).
const (
	GrantReadMemory  = "read_memory"
	GrantWriteMemory = "write_memory"
	GrantAssignTasks = "assign_tasks"
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
}

// Tenant is what RLS sees for this caller's transactions.
func (s Scope) Tenant() pg.Tenant {
	return pg.Tenant{OrgID: s.OrgID, ProjectID: s.ProjectID, AgentID: s.AgentID}
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
