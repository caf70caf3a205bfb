// Package wake decides when an idle agent is told that work is waiting, and delivers the
// wake: budget per part per hour, parking while a provider rate-limits the agent,
// coalescing, and delivery by signed webhook or by `relayroom pager`.
package wake

import (
	"time"

	"github.com/google/uuid"
)

// Request asks for the parts named by MemberIDs (memberships of ProjectID) to be woken
// because new work arrived for them. It is queued inside the transaction that stored the
// work, so a committed message always has its wake, and a rolled-back one never does.
type Request struct {
	ProjectID uuid.UUID
	// HostOrgID is the project's host (tenancy.Scope.HostOrgID): its parts are woken
	// without an agreement.
	HostOrgID uuid.UUID
	MemberIDs []uuid.UUID
	// Source says what arrived: "message" (threads), "task" or "room_message" (rooms).
	Source string
	// ThreadID groups a thread's wakes so closing the thread cancels them (threads only).
	ThreadID uuid.UUID
	// ItemID is the message or task that caused the wake.
	ItemID uuid.UUID
	// At is when the item was stored (its created_at); zero: the wake service's clock.
	// A pending wake begins at its first item, and an ack recounts the thread's unread
	// messages since then: a later clock reading would leave the first message out.
	At time.Time
	// Urgent wakes pass a spent budget (never a parked part).
	Urgent bool
	// Broadcast marks a message sent to "*": each recipient is charged one wake.
	Broadcast bool
}
