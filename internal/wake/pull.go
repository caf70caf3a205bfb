package wake

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/pg"
)

// Agent is the verified holder of an agent key, as the pager presents it.
type Agent struct {
	ID    uuid.UUID
	OrgID uuid.UUID
	// key is the credential Authenticate verified: a long poll verifies it again before
	// each claim after a wait, so that a key revoked meanwhile claims nothing more.
	key string
}

// Authenticate verifies an agent key. Unlike the MCP endpoints it does not move the
// agent's last_seen: a pager waiting for wakes must not make its agent look online, or
// nothing would ever wake it.
func (s *Service) Authenticate(ctx context.Context, key string) (Agent, error) {
	p, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Agent{}, apperr.New(apperr.Unauthenticated, "Unauthorized")
	}
	var a Agent
	err = s.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID}, func(tx *pg.Tx) error {
		rows, err := s.Q.CredentialRows(ctx, tx, db.CredentialRowsParams{KeyID: p.ID})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Kind == "key" && p.Matches(r.SecretHash) {
				a = Agent{ID: r.AgentID, OrgID: r.OwnerID, key: key}
				return nil
			}
		}
		return apperr.New(apperr.Unauthenticated, "Unauthorized")
	})
	if err != nil {
		return Agent{}, pg.Classify("wake authenticate", err)
	}
	return a, nil
}

// claimProjects bounds the projects one claim looks at: an agent in more rooms with work
// waiting gets the oldest ones' first, the rest at its next claim.
const claimProjects = 100

func (s *Service) claim(ctx context.Context, a Agent) (*Wake, error) {
	now := s.now()
	var w *Wake
	err := s.DB.InTenant(ctx, pg.Tenant{OrgID: a.OrgID, AgentID: a.ID}, func(tx *pg.Tx) error {
		// The pager names no project: its agent's projects with events or claimable
		// wakes are listed first (oldest first), then, project by project, the events are
		// folded into the pending wakes and a wake claimed, in one round trip (pipelined):
		// on Citus both are router statements, which FOR UPDATE needs.
		projects, err := s.Q.WakeListAgentProjects(ctx, tx, db.WakeListAgentProjectsParams{AgentID: a.ID, Now: now, MaxRows: claimProjects})
		if err != nil {
			return err
		}
		for _, p := range projects {
			if err := tx.Pipeline(func() error {
				_, err := s.Q.WakeEventFold(ctx, tx, db.WakeEventFoldParams{Now: now, ProjectID: p, AgentIds: []uuid.UUID{a.ID}, MaxRows: foldBatch, MaxThreads: MaxThreads})
				return err
			}); err != nil {
				return err
			}
			r, err := s.Q.WakeClaim(ctx, tx, db.WakeClaimParams{ProjectID: p, AgentID: a.ID, Now: now, Since: now.Add(-time.Hour),
				LeaseUntil: now.Add(s.lease()), OnlineSince: now.Add(-s.onlineWindow())})
			if pg.IsNoRows(err) {
				// Nothing deliverable here (held while online or parked, over budget):
				// the fold still commits, so the pending wake is current for the sweep,
				// acks and the admin listing.
				continue
			}
			if err != nil {
				return err
			}
			w = &Wake{ID: r.ID, ProjectID: r.ProjectID, Project: r.ProjectName, Part: r.Part, Count: int(r.Count), Sources: r.Sources,
				ThreadIDs: threadIDs(r.ThreadCounts), Urgent: r.Urgent, LastItemID: r.LastItemID,
				CreatedAt: r.CreatedAt, Attempt: int(r.Attempts), LeaseUntil: r.LeaseUntil}
			return nil
		}
		return nil
	})
	if err != nil {
		return nil, pg.Classify("wake claim", err)
	}
	return w, nil
}

// MaxPollsPerAgent bounds the long polls one agent holds at once in a process. A pager
// holds one; long polls are not counted per address (pagers share addresses behind a
// NAT), so without a bound one key held every connection the server allows, for a
// minute at a time, and nobody else could connect.
const MaxPollsPerAgent = 4

// MsgTooManyPolls refuses a long poll past MaxPollsPerAgent.
const MsgTooManyPolls = "This agent already has the most long polls waiting at once; retry when one ends"

// Next claims the agent's oldest deliverable wake, waiting up to wait for one. The claim
// is a lease: a wake not acknowledged before it ends is handed out again (at least once
// delivery). nil means none arrived in time.
func (s *Service) Next(ctx context.Context, a Agent, wait time.Duration) (*Wake, error) {
	s.init()
	if wait > 0 {
		if !s.polls.Take(a.ID, MaxPollsPerAgent) {
			e := apperr.New(apperr.RateLimited, "%s", MsgTooManyPolls)
			e.Details = map[string]any{httpapi.RetryAfterDetail: 1}
			return nil, e
		}
		defer s.polls.Give(a.ID)
	}
	ch, cancel := s.hub.Subscribe(a.ID)
	defer cancel()
	deadline := time.Now().Add(wait)
	for waited := false; ; waited = true {
		// A key revoked while its pager waited got the next wake, and held it from the
		// agent's new key for the lease: the key is verified again after each wait.
		if waited && a.key != "" {
			if _, err := s.Authenticate(ctx, a.key); err != nil {
				return nil, err
			}
		}
		w, err := s.claim(ctx, a)
		if err != nil || w != nil {
			return w, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(left, s.pollInterval()))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-s.stopped:
			t.Stop()
			return nil, nil
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// Ack marks a claimed wake delivered. Acknowledging twice, or a wake canceled meanwhile
// (its thread closed), is fine; a wake of another agent does not exist.
func (s *Service) Ack(ctx context.Context, a Agent, id uuid.UUID) (string, error) {
	now := s.now()
	status := StatusDelivered
	err := s.DB.InTenant(ctx, pg.Tenant{OrgID: a.OrgID, AgentID: a.ID}, func(tx *pg.Tx) error {
		_, err := s.Q.WakeAck(ctx, tx, db.WakeAckParams{AgentID: a.ID, ID: id, Now: now})
		if !pg.IsNoRows(err) {
			return err
		}
		st, err := s.Q.WakeGetAgentStatus(ctx, tx, db.WakeGetAgentStatusParams{AgentID: a.ID, ID: id})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no such wake")
		}
		if err != nil {
			return err
		}
		if st != StatusDelivered && st != StatusCanceled {
			return apperr.New(apperr.Conflict, "wake %s is %s, not claimed", id, st)
		}
		status = st
		return nil
	})
	if err != nil {
		return "", pg.Classify("wake ack", err)
	}
	return status, nil
}

// MaxWait bounds a long poll.
const MaxWait = 60 * time.Second
