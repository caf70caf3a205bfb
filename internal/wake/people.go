package wake

import (
	"context"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// What the dashboard (people, docs/dashboard.md) reads and does with a room's wakes: the
// page a dead wake on Needs you links to. Both take the person's Scope and run under its
// tenant; the host's people see every wake of the room, a guest company's only its own
// parts' (the rule of Needs you). Another company's wake answers like a missing one.

// PersonWake is a wake as its page shows it.
type PersonWake = db.WakeGetForPeopleRow

// MsgWakeNotFound answers a wake that does not exist in the room or is another
// company's.
const MsgWakeNotFound = "Wake not found: %s"

// WakeForPeople reads one wake of the person's room.
func (s *Service) WakeForPeople(ctx context.Context, sc tenancy.Scope, id uuid.UUID) (PersonWake, error) {
	if err := sc.Admitted(); err != nil {
		return PersonWake{}, err
	}
	var w PersonWake
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		w, err = s.Q.WakeGetForPeople(ctx, tx, db.WakeGetForPeopleParams{ProjectID: sc.ProjectID, ID: id,
			ViewerIsHost: sc.IsHost(), ViewerOrgID: sc.OrgID})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, MsgWakeNotFound, id)
		}
		return err
	})
	return w, pg.Classify("wake for people", err)
}

// RetryByPerson sends a dead wake of the person's room again, as the operator's Retry
// does: it becomes pending with its attempts reset, and the pagers and the webhook
// dispatch are told. The change records the audit event the caller intended
// (audit.Intend) in its transaction. A wake that is not dead, or whose part already has a
// pending wake, is a conflict.
func (s *Service) RetryByPerson(ctx context.Context, sc tenancy.Scope, id uuid.UUID) error {
	if _, err := s.WakeForPeople(ctx, sc, id); err != nil {
		return err
	}
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		n, err := s.Q.WakeRetryDeadForPeople(ctx, tx, db.WakeRetryDeadForPeopleParams{ProjectID: sc.ProjectID, ID: id,
			ViewerIsHost: sc.IsHost(), ViewerOrgID: sc.OrgID})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.New(apperr.Conflict, "This wake is not a dead letter any more, its threads have all ended, or its part already has a wake waiting")
		}
		if err := audit.RecordIntended(ctx, tx); err != nil {
			return err
		}
		return s.Q.WakeNotify(ctx, tx, "*")
	})
	return pg.Classify("wake retry by person", err)
}
