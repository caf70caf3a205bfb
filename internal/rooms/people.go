package rooms

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// What the dashboard (people, docs/dashboard.md) does with rooms beyond the agents' tools.
// Every function takes the person's Scope (tenancy.Resolver.PersonRoom) and runs under
// its tenant, as the tools do.

// MaxMemoryList bounds the Memory tab's listing.
const MaxMemoryList = 100

// PersonRoom is one room of a person's organisation.
type PersonRoom struct {
	ID              uuid.UUID
	Name            string
	HostName        string
	IsHost          bool
	AgreementStatus string // the organisation's agreement as a guest; empty for the host
}

// PersonRooms lists the rooms an organisation hosts or has an agreement for (in any state,
// so that a guest's admin sees a pending one). sc needs only OrgID.
func (s *Service) PersonRooms(ctx context.Context, sc tenancy.Scope) ([]PersonRoom, error) {
	rows, err := pg.ReadOne(ctx, s.DB, pg.Tenant{OrgID: sc.OrgID}, "person rooms", func(tx *pg.Tx) ([]db.PersonListRoomsRow, error) {
		return s.Q.PersonListRooms(ctx, tx, sc.OrgID)
	})
	if err != nil {
		return nil, err
	}
	out := make([]PersonRoom, 0, len(rows))
	for _, r := range rows {
		pr := PersonRoom{ID: r.ID, Name: r.Name, HostName: r.HostName, IsHost: r.HostOrgID == sc.OrgID}
		if !pr.IsHost && r.AgreementStatus != nil {
			pr.AgreementStatus = *r.AgreementStatus
		}
		out = append(out, pr)
	}
	return out, nil
}

// MemoryFilter narrows the Memory tab.
type MemoryFilter struct {
	OrgID    *uuid.UUID
	Category string
	Tag      string
}

// MemoryItem is one entry of the Memory tab.
type MemoryItem struct {
	ID           uuid.UUID
	Company      string
	WrittenBy    string
	Model        string
	Content      string
	Tags         []string
	Category     string
	IsDecision   bool
	IsPrivate    bool
	CreatedAt    time.Time
	DeprecatedAt *time.Time
	DeprecatedBy string
}

// ListMemory is the Memory tab without a query: the newest entries, deprecated ones
// included and marked, never another organisation's private ones. It needs the
// read_memory grant, as read_memory does.
func (s *Service) ListMemory(ctx context.Context, sc tenancy.Scope, f MemoryFilter) ([]MemoryItem, error) {
	if err := requireGrant(sc, tenancy.GrantReadMemory, MsgNoReadMemory); err != nil {
		return nil, err
	}
	arg := db.MemoryEntryListForPeopleParams{ProjectID: sc.ProjectID, ViewerOrgID: sc.OrgID, OrgID: f.OrgID, Lim: MaxMemoryList}
	if c := strings.TrimSpace(f.Category); c != "" {
		arg.Category = &c
	}
	if t := normTags([]string{f.Tag}); len(t) == 1 {
		arg.Tag = &t[0]
	}
	var rows []db.MemoryEntryListForPeopleRow
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		rows, err = s.Q.MemoryEntryListForPeople(ctx, tx, arg)
		return err
	})
	if err != nil {
		return nil, pg.Classify("list memory", err)
	}
	out := make([]MemoryItem, 0, len(rows))
	for _, r := range rows {
		out = append(out, MemoryItem{ID: r.ID, Company: orUnknown(r.OrgName, "Unknown org"), WrittenBy: orUnknown(r.AgentName, "Unknown"),
			Model: r.Model, Content: r.Content, Tags: r.Tags, Category: orUnknown(r.Category, ""), IsDecision: r.IsDecision,
			IsPrivate: r.IsPrivate, CreatedAt: r.CreatedAt, DeprecatedAt: r.DeprecatedAt, DeprecatedBy: orUnknown(r.DeprecatedByName, "")})
	}
	return out, nil
}

// MsgMemoryNotFound answers an entry that does not exist, is already deprecated, is
// another organisation's private entry, or is not the person's to deprecate.
const MsgMemoryNotFound = "Memory entry not found: %s"

// DeprecateMemory marks an entry deprecated by the person: read_memory stops returning it
// and the Memory tab shows who and when. Entries are never deleted. The host's people and
// the writing company's may deprecate; anything else answers not found.
func (s *Service) DeprecateMemory(ctx context.Context, sc tenancy.Scope, id uuid.UUID) (time.Time, error) {
	if err := requireGrant(sc, tenancy.GrantWriteMemory, MsgNoWriteMemory); err != nil {
		return time.Time{}, err
	}
	if !sc.IsPerson() {
		return time.Time{}, apperr.New(apperr.Forbidden, "Only a person can mark a memory entry deprecated")
	}
	var at *time.Time
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		at, err = s.Q.MemoryEntryDeprecate(ctx, tx, db.MemoryEntryDeprecateParams{UserID: &sc.Person.UserID, UserName: &sc.Person.Name,
			ProjectID: sc.ProjectID, ID: id, ViewerOrgID: sc.OrgID, ViewerIsHost: sc.IsHost()})
		if err != nil || at == nil {
			return err
		}
		return audit.RecordIntended(ctx, tx)
	})
	if pg.IsNoRows(err) || (err == nil && at == nil) {
		return time.Time{}, apperr.New(apperr.NotFound, MsgMemoryNotFound, id)
	}
	if err != nil {
		return time.Time{}, pg.Classify("deprecate memory", err)
	}
	return *at, nil
}

// Kinds of what waits for people (NeedsYou).
const (
	NeedThread    = "thread"    // an open thread flagged needsHuman
	NeedTask      = "task"      // a done result the organisation's agent sent, not yet accepted or rejected
	NeedKnowledge = "knowledge" // a knowledge candidate (the host's reviewers)
	NeedAgreement = "agreement" // an agreement a guest has not accepted
	NeedWake      = "wake"      // a wake that could not be delivered
)

// MaxNeedsPerKind bounds each kind of NeedsYou in one room.
const MaxNeedsPerKind = 10

// Need is one thing in a room waiting for a person: ID is the thread's, task's, knowledge
// entry's or wake's, or the guest organisation's for an agreement.
type Need = db.RoomListNeedsYouRow

// NeedsYou lists what in the room waits for the person's organisation (the home page's
// "needs you" panel), in one statement. A guest that is not admitted sees nothing of the
// room (its own pending agreement is on PersonRooms).
func (s *Service) NeedsYou(ctx context.Context, sc tenancy.Scope) ([]Need, error) {
	if sc.Admitted() != nil {
		return nil, nil
	}
	return pg.ReadOne(ctx, s.DB, sc.Tenant(), "needs you", func(tx *pg.Tx) ([]Need, error) {
		return s.Q.RoomListNeedsYou(ctx, tx, db.RoomListNeedsYouParams{ProjectID: sc.ProjectID, ViewerIsHost: sc.IsHost(),
			ViewerOrgID: sc.OrgID, ViewerReviews: sc.IsHost() && sc.IsOrgAdmin(), Lim: MaxNeedsPerKind})
	})
}

// MaxTaskList bounds the Tasks tab.
const MaxTaskList = 100

// PersonTask is a task as the Tasks tab shows it: the whole of it, with its files.
type PersonTask struct {
	db.TaskListForPeopleRow
	Attachments []Attachment
}

// Final reports a task nobody works on any more.
func (t PersonTask) Final() bool { return finalStatus(t.Status) }

func finalStatus(status string) bool {
	return status == "done" || status == "failed" || status == "rejected" || status == "canceled"
}

// TasksForPeople lists the room's tasks for the Tasks tab (a guest's people: those their
// company sent or received), newest first, with their files as signed download links, in
// two statements.
func (s *Service) TasksForPeople(ctx context.Context, sc tenancy.Scope) ([]PersonTask, error) {
	if err := requireAgreement(sc); err != nil {
		return nil, err
	}
	var out []PersonTask
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		rows, err := s.Q.TaskListForPeople(ctx, tx, db.TaskListForPeopleParams{ProjectID: sc.ProjectID, ViewerIsHost: sc.IsHost(),
			ViewerOrgID: sc.OrgID, Lim: MaxTaskList})
		if err != nil || len(rows) == 0 {
			return err
		}
		ids, idx := make([]uuid.UUID, len(rows)), map[uuid.UUID]int{}
		out = make([]PersonTask, len(rows))
		for i, r := range rows {
			out[i], ids[i], idx[r.ID] = PersonTask{TaskListForPeopleRow: r}, r.ID, i
		}
		files, err := s.Q.AttachmentListByTask(ctx, tx, db.AttachmentListByTaskParams{ProjectID: sc.ProjectID, TaskIds: ids})
		if err != nil {
			return err
		}
		exp := s.now().Add(LinkTTLSeconds * time.Second)
		for _, f := range files {
			i := idx[f.TaskID]
			out[i].Attachments = append(out[i].Attachments, Attachment{ID: f.ID.String(), UploadedByOrgID: f.UploadedByOrgID.String(),
				Filename: f.Filename, ContentType: f.ContentType, SizeBytes: f.SizeBytes, Sha256: f.Sha256,
				DownloadURL: s.downloadURL(sc.ProjectID, f.ID, exp), ExpiresIn: LinkTTLSeconds})
		}
		return nil
	})
	if err != nil {
		return nil, pg.Classify("tasks for people", err)
	}
	return out, nil
}

// CancelTask cancels a task nobody can finish: a person of the sending company or of the
// host may, while it is not final. A guest's people see only their company's tasks.
func (s *Service) CancelTask(ctx context.Context, sc tenancy.Scope, taskID string) error {
	if err := requireAgreement(sc); err != nil {
		return err
	}
	if !sc.IsPerson() {
		return apperr.New(apperr.Forbidden, "Only people cancel tasks, on the dashboard")
	}
	id, err := uuid.Parse(taskID)
	if err != nil {
		return taskNotFound(taskID)
	}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		t, err := s.lockTask(ctx, tx, sc, id, taskID, true)
		if err != nil {
			return err
		}
		if !sc.IsHost() && t.FromOrgID != sc.OrgID {
			return apperr.New(apperr.Forbidden, "Only the company that sent task %s, or the room's host, can cancel it", id)
		}
		if finalStatus(t.Status) {
			return apperr.New(apperr.Conflict, "Task %s is %s and cannot be canceled", id, t.Status)
		}
		if err := s.Q.TaskCancel(ctx, tx, db.TaskCancelParams{ProjectID: sc.ProjectID, ID: id}); err != nil {
			return err
		}
		if err := audit.RecordIntended(ctx, tx); err != nil {
			return err
		}
		return s.card(ctx, tx, sc, "task", fmt.Sprintf("[task] %q canceled by %s.", excerpt(t.Goal, 80), sc.Person.Name), id, s.now())
	})
	if err != nil {
		return pg.Classify("cancel task", err)
	}
	return nil
}

// RosterEntry is one part of the room as people see it.
type RosterEntry struct {
	db.MembershipListForPeopleRow
	// Limited is set while the part is parked (its wake budget is spent): until then it is
	// not woken.
	Limited bool
}

// RosterForPeople lists the room's parts with their last sighting and parking, in one
// statement.
func (s *Service) RosterForPeople(ctx context.Context, sc tenancy.Scope) ([]RosterEntry, error) {
	if err := requireAgreement(sc); err != nil {
		return nil, err
	}
	var rows []db.MembershipListForPeopleRow
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		rows, err = s.Q.MembershipListForPeople(ctx, tx, sc.ProjectID)
		return err
	})
	if err != nil {
		return nil, pg.Classify("roster for people", err)
	}
	now := s.now()
	out := make([]RosterEntry, len(rows))
	for i, r := range rows {
		out[i] = RosterEntry{MembershipListForPeopleRow: r, Limited: r.ParkedUntil != nil && r.ParkedUntil.After(now)}
	}
	return out, nil
}
