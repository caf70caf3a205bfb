// Package threads is the threads toolset: conversations between the parts (agents) of a
// project, presence, and the tools an agent uses to find its bearings.
package threads

import (
	"context"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// OnlineWindow is how recently a part must have called to count as online.
const OnlineWindow = time.Minute

// Deps are what the threads toolset is built from (New).
type Deps struct {
	DB  *pg.DB
	Q   *db.Queries
	Now func() time.Time
	// Knowledge serves recall, learn, recall_used, lessons on close and contradictions.
	Knowledge *knowledge.Service
	// Waker queues and cancels wakes inside the message's transaction; nil disables wakes
	// (messages are still delivered to inboxes, nothing is dropped).
	Waker Waker
	// Secrets masks credentials in the subjects and bodies send and reply store
	// (docs/secrets.md). Required by send and reply.
	Secrets *secrets.Detector
}

// Service is the threads toolset. Build it with New.
type Service struct {
	Deps
	// notes are the projects to announce on Channel (RunNotifier).
	notes *pg.Announcer
}

// New builds the toolset; a nil Now is the wall clock, a nil Q the generated queries.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Q == nil {
		d.Q = db.New()
	}
	return &Service{Deps: d, notes: pg.NewAnnouncer()}
}

// Identity is whoami's answer.
type Identity struct {
	Part      string  `json:"part"`
	Project   string  `json:"project"`
	ProjectID string  `json:"projectId"`
	IsMain    bool    `json:"isMain"`
	Nickname  *string `json:"nickname,omitempty"`
}

// WhoAmI reports the caller's own part. The Scope already holds it, resolved (and
// last_seen moved) when the request was authenticated, so this costs no query.
func (s *Service) WhoAmI(_ context.Context, sc tenancy.Scope) Identity {
	return Identity{Part: sc.Part, Project: sc.ProjectName, ProjectID: sc.ProjectID.String(), IsMain: sc.IsMain, Nickname: sc.Nickname}
}

// RosterEntry is one part of the project.
type RosterEntry struct {
	Part         string  `json:"part"`
	IsMain       bool    `json:"isMain"`
	Nickname     *string `json:"nickname,omitempty"`
	Online       bool    `json:"online"`
	LastSeen     *Time   `json:"lastSeen"`
	You          bool    `json:"you"`
	LimitedUntil *Time   `json:"limitedUntil,omitempty"`
}

// Roster lists every part of the caller's project, main first.
func (s *Service) Roster(ctx context.Context, sc tenancy.Scope) ([]RosterEntry, error) {
	rows, err := pg.ReadOne(ctx, s.DB, sc.Tenant(), "roster", func(tx *pg.Tx) ([]db.MembershipListPartsRow, error) {
		return s.Q.MembershipListParts(ctx, tx, sc.ProjectID)
	})
	if err != nil {
		return nil, err
	}
	now := s.Now()
	out := make([]RosterEntry, 0, len(rows))
	for _, r := range rows {
		e := RosterEntry{Part: r.Part, IsMain: r.IsMain, Nickname: r.Nickname, LastSeen: wiretime.Ptr(r.LastSeenAt), You: r.Part == sc.Part}
		e.Online = r.LastSeenAt != nil && now.Sub(*r.LastSeenAt) < OnlineWindow
		if r.ParkedUntil != nil && r.ParkedUntil.After(now) {
			e.LimitedUntil = wiretime.Ptr(r.ParkedUntil)
		}
		out = append(out, e)
	}
	return out, nil
}
