// Package rooms is the rooms toolset: rooms hosted by one company with guest companies
// under agreements, and the all-rooms address that serves every room an agent is in.
//
// The seven room tools (read_memory, write_memory, get_inbox, send_task, respond_to_task,
// post_message, get_messages) and list_rooms follow the rooms contract (docs/contracts.md);
// decisions beyond it are in docs/rooms.md.
package rooms

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/wake"
)

// Texts of the rooms spec, verbatim: clients match on them.
const (
	MsgNoAgreement   = tenancy.MsgNoAgreement
	MsgNoReadMemory  = "Agreement does not permit can read memory"
	MsgNoWriteMemory = "Agreement does not permit can write memory"
	MsgNoAssignTasks = "Agreement does not permit can assign tasks"
	MsgSecret        = "Content looks like it contains a secret and was not written"
	MsgNoMemory      = "No memory entries found for this query."
	MsgEmptyInbox    = "No pending tasks in your inbox."
	MsgNoDeadline    = "No deadline set"
	VisibleToAll     = "All agents and humans in all project organisations"
	SharedWithOrg    = "Your org only"
	SharedWithAll    = "All orgs in project"
	defaultEmbedWait = 1500 * time.Millisecond
	// MsgNoWriteAccess is ours (the spec has no access levels): write_memory needs write
	// access to the room, as learn does to a project's knowledge.
	MsgNoWriteAccess  = "write_memory needs write access to this room; your membership has %s access"
	defaultAttachSize = 25 << 20
)

// WakeQueue queues a wake inside the transaction that stored the work (internal/wake
// implements it). A nil WakeQueue disables wakes.
type WakeQueue interface {
	Queue(ctx context.Context, tx *pg.Tx, r wake.Request) error
}

// Deps are what the rooms toolset is built from (New).
type Deps struct {
	DB *pg.DB
	Q  *db.Queries
	// Resolver binds the all-rooms address's room_id to a room scope.
	Resolver *tenancy.Resolver
	// Embedder makes memory vectors; nil means none (lexical search only).
	Embedder embed.Embedder
	// EmbedTimeout bounds the embedding a write or a read waits for (default 1.5 s); a
	// write whose embedding does not arrive in time is stored and embedded later.
	EmbedTimeout time.Duration
	// Secrets refuses memory writes that contain credentials and masks them in room chat
	// and tasks (docs/secrets.md, per field). Required.
	Secrets *secrets.Detector
	// Wakes is told about new tasks and messages; nil disables wakes.
	Wakes WakeQueue
	// SigningKey signs attachment download links (HMAC-SHA256). Required for attachments.
	SigningKey []byte
	// MaxAttachmentBytes is the upload limit (default 25 MB).
	MaxAttachmentBytes int64
	// MaxRoomAttachmentBytes is what one room's attachments may hold together (default
	// DefaultMaxRoomAttachmentBytes).
	MaxRoomAttachmentBytes int64
	// PublicURL is the base of download links.
	PublicURL string
	Now       func() time.Time
	Log       *slog.Logger
}

// Service is the rooms toolset. Build it with New.
type Service struct {
	Deps
	// notes are the rooms to announce on RoomChannel (RunNotifier).
	notes *pg.Announcer
	// embeds are the entries RunEmbedder embeds after write_memory's commit.
	embeds *embedQueue
	// embedsSpilled counts entries left to the sweep past the queue's bound.
	embedsSpilled atomic.Uint64
	// backlog is where the embedding backlog's next listing starts.
	backlog *backlogCursor
	// parked are the entries the embedder fails on, left out of the backlog for a while.
	parked *parkingLot
	// downloads is the byte budget of the attachments being sent (MaxDownloadBytes).
	downloads *semaphore.Weighted
}

// New builds the toolset; a nil Now is the wall clock, a nil Log discards, a nil Q is
// the generated queries.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Q == nil {
		d.Q = db.New()
	}
	return &Service{Deps: d, notes: pg.NewAnnouncer(), embeds: newEmbedQueue(), backlog: newBacklogCursor(), parked: newParkingLot(),
		downloads: semaphore.NewWeighted(MaxDownloadBytes)}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *Service) embedder() embed.Embedder {
	if s.Embedder == nil {
		return embed.None{}
	}
	return s.Embedder
}

func (s *Service) embedTimeout() time.Duration {
	if s.EmbedTimeout > 0 {
		return s.EmbedTimeout
	}
	return defaultEmbedWait
}

// MaxAttachment is the configured upload limit.
func (s *Service) MaxAttachment() int64 {
	if s.MaxAttachmentBytes > 0 {
		return s.MaxAttachmentBytes
	}
	return defaultAttachSize
}

func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// requireAgreement is the check every tool makes first: the host always passes; a guest
// needs an active agreement. The endpoints make it before any tool runs too
// (Scope.Admitted); the service keeps it for its other callers. Scopes are resolved per
// request, so a revocation takes effect on the next call.
func requireAgreement(sc tenancy.Scope) error { return sc.Admitted() }

// requireGrant checks the agreement, then one of its grants.
func requireGrant(sc tenancy.Scope, grant, refusal string) error {
	if err := requireAgreement(sc); err != nil {
		return err
	}
	if !sc.Granted(grant) {
		return apperr.New(apperr.Forbidden, "%s", refusal)
	}
	return nil
}

func invalid(format string, args ...any) error { return apperr.New(apperr.Invalid, format, args...) }

// Room is one entry of list_rooms.
type Room struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	HostCompany string `json:"host_company"`
	Role        string `json:"role"` // "host" or "guest": the caller's company's place in the room
}

// ListRooms lists every room the agent is in, except rooms where its company is a guest
// without an active agreement (pending or revoked): those are not the agent's to use.
func (s *Service) ListRooms(ctx context.Context, sc tenancy.Scope) ([]Room, error) {
	rows, err := pg.ReadOne(ctx, s.DB, sc.Tenant(), "list rooms", func(tx *pg.Tx) ([]db.AgentListRoomsRow, error) {
		return s.Q.AgentListRooms(ctx, tx, sc.AgentID)
	})
	if err != nil {
		return nil, err
	}
	out := make([]Room, 0, len(rows))
	for _, r := range rows {
		role := "guest"
		if r.HostOrgID == r.OrgID {
			role = "host"
		} else if r.AgreementStatus == nil || *r.AgreementStatus != tenancy.AgreementActive {
			continue
		}
		out = append(out, Room{ID: r.ID.String(), Name: r.Name, HostCompany: r.HostName, Role: role})
	}
	return out, nil
}

// Display formats of the spec.

func orUnknown(p *string, fallback string) string {
	if p == nil || *p == "" {
		return fallback
	}
	return *p
}

// nameOrg is "Name (Organisation)", each part falling back independently.
func nameOrg(name, org *string) string {
	return fmt.Sprintf("%s (%s)", orUnknown(name, "Unknown"), orUnknown(org, "Unknown org"))
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func strp(s string) *string { return &s }

// agentAlwaysOn is the agent kind that wakes reach (agent.kind): a session agent sees
// what arrived at its next call instead.
const agentAlwaysOn = "always_on"

func (s *Service) queueWake(ctx context.Context, tx *pg.Tx, r wake.Request) error {
	if s.Wakes == nil || len(r.MemberIDs) == 0 {
		return nil
	}
	if err := s.Wakes.Queue(ctx, tx, r); err != nil {
		return fmt.Errorf("queue wake: %w", err)
	}
	return nil
}

func (s *Service) card(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, kind, content string, ref uuid.UUID, at time.Time) error {
	var err error
	if sc.IsPerson() {
		// A person's action (the dashboard): the card names them as their posts do.
		err = s.Q.RoomMessageInsertPersonCard(ctx, tx, db.RoomMessageInsertPersonCardParams{ProjectID: sc.ProjectID, ID: newID(), Kind: kind,
			AuthorUserID: &sc.Person.UserID, AuthorName: &sc.Person.Name, AuthorOrgID: &sc.OrgID, Content: content, RefID: &ref, CreatedAt: at})
	} else {
		err = s.Q.RoomMessageInsert(ctx, tx, db.RoomMessageInsertParams{
			ProjectID: sc.ProjectID, ID: newID(), Kind: kind, AuthorAgentID: &sc.AgentID, AuthorOrgID: &sc.OrgID,
			AuthorModel: sc.AgentModel, Content: content, RefID: &ref, CreatedAt: at,
		})
	}
	if err != nil {
		return err
	}
	s.roomChanged(tx, sc.ProjectID)
	return nil
}

func excerpt(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
