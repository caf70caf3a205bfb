package knowledge

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// What people do with a project's knowledge on the dashboard (docs/dashboard.md), under
// their Scope (tenancy.Resolver.PersonRoom) rather than the operator's pool.

// MsgReviewerRole refuses a decision by anyone but an owner or admin of the host company.
const MsgReviewerRole = "Only an owner or admin of the host company can approve or reject knowledge"

// ReviewQueue lists the project's entries of one status (all when empty), newest first.
// Reading the project's knowledge takes the read_memory grant for a guest, as recall does,
// and a guest reads what recall would give it: trusted entries only. Candidates and
// demoted entries are the host's to review; a candidate distilled from a thread only the
// host's parts were in told a guest what that thread said.
func (s *Service) ReviewQueue(ctx context.Context, sc tenancy.Scope, status string, limit int) ([]Review, error) {
	if err := sc.RequireGrant(tenancy.GrantReadMemory, NeedRecall); err != nil {
		return nil, err
	}
	if !sc.IsHost() {
		if status != "" && status != StatusTrusted {
			return nil, nil
		}
		status = StatusTrusted
	}
	var st *string
	if status != "" {
		st = &status
	}
	var rows []db.KnowledgeListRow
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		rows, err = s.Q.KnowledgeList(ctx, tx, db.KnowledgeListParams{ProjectID: sc.ProjectID, Status: st, Lim: int32(limit)})
		return err
	})
	if err != nil {
		return nil, pg.Classify("review queue", err)
	}
	return reviews(rows), nil
}

// Decide approves (trusted: recall returns it) or rejects an entry as a person. Only an
// owner or admin of the host company may: a member, and any guest, may not.
func (s *Service) Decide(ctx context.Context, sc tenancy.Scope, id uuid.UUID, approve bool) (Decision, error) {
	if err := sc.Admitted(); err != nil {
		return Decision{}, err
	}
	if !sc.IsPerson() || !sc.IsHost() || !sc.IsOrgAdmin() {
		return Decision{}, apperr.New(apperr.Forbidden, MsgReviewerRole)
	}
	to, conf := StatusRejected, func(Config) float64 { return 0 }
	if approve {
		to, conf = StatusTrusted, func(c Config) float64 { return c.ApprovedConfidence }
	}
	var d Decision
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		d, err = s.decide(ctx, tx, sc.ProjectID, id, to, "person:"+sc.Person.Name, conf)
		return err
	})
	return d, pg.Classify("decide knowledge", err)
}

// HitRates are the Learning panel's recall hit rates over the last day and week.
type HitRates struct {
	Day, Week HitRate
}

// LearningHitRates reads both windows in one transaction.
func (s *Service) LearningHitRates(ctx context.Context, sc tenancy.Scope, now time.Time) (HitRates, error) {
	if err := sc.RequireGrant(tenancy.GrantReadMemory, NeedRecall); err != nil {
		return HitRates{}, err
	}
	var h HitRates
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		for _, w := range []struct {
			since time.Time
			into  *HitRate
		}{{now.Add(-24 * time.Hour), &h.Day}, {now.Add(-7 * 24 * time.Hour), &h.Week}} {
			r, err := s.Q.RecallQueryHitRate(ctx, tx, db.RecallQueryHitRateParams{ProjectID: sc.ProjectID, Since: w.since})
			if err != nil {
				return err
			}
			w.into.Returned, w.into.Used = r.Returned, r.Used
			if r.Returned > 0 {
				w.into.Rate = float64(r.Used) / float64(r.Returned)
			}
		}
		return nil
	})
	return h, pg.Classify("learning hit rates", err)
}
