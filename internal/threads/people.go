package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// What the dashboard (people, docs/dashboard.md) reads and does with a project's threads.
// Every function takes the person's Scope (tenancy.Resolver.PersonRoom) and runs under its
// tenant, as the tools do. The host's people see every thread, event and usage row of the
// project; a guest company's people see the threads its parts take part in and only its
// own parts' events and usage: its agents may read further (show, search), but what the
// host's parts said among themselves is not the guest company's to browse.

// Bounds of the people's pages.
const (
	MaxPeopleThreads  = 100 // the thread list
	MaxPeopleActivity = 100 // the activity feed (and one live read)
	// MaxUsageDays is how far back the usage charts and CSV reach, in UTC days.
	MaxUsageDays = 90
)

// ServiceEventPrefix starts the types of the events the service records itself; the
// event tool refuses them from agents, so none can be forged.
const ServiceEventPrefix = "thread."

// EventCanceled is the activity a person's cancel leaves on the feed.
const EventCanceled = ServiceEventPrefix + "canceled"

// Channel is the Postgres notification channel on which a project's id is announced after
// a thread's messages, its end, an event or a composing indicator were committed in it
// (RunNotifier). Every replica's dashboard listens to it; the payload is the id only.
const Channel = "rr_thread"

// RunNotifier sends one NOTIFY per project for the projects written since the previous
// batch, until ctx ends.
func (s *Service) RunNotifier(ctx context.Context, log *slog.Logger) {
	s.notes.Run(ctx, s.DB, log, Channel, func(ctx context.Context, tx *pg.Tx, ids []uuid.UUID) error {
		return s.Q.ThreadNotifyChanged(ctx, tx, ids)
	})
}

// changed announces the project on Channel once tx commits.
func (s *Service) changed(tx *pg.Tx, projectID uuid.UUID) { s.notes.AfterCommit(tx, projectID) }

// ThreadFilter narrows the thread list; zero values do not filter.
type ThreadFilter struct {
	Status  string // open, closed or canceled
	Part    string // threads this part takes part in
	Flagged bool   // only threads flagged needsHuman
}

// PersonThread is a line of the thread list.
type PersonThread = db.ThreadListForPeopleRow

func viewer(sc tenancy.Scope) (host bool, org uuid.UUID) { return sc.IsHost(), sc.OrgID }

// ThreadsForPeople lists the project's threads the person's company may see, most
// recently active first (at most MaxPeopleThreads), in one statement.
func (s *Service) ThreadsForPeople(ctx context.Context, sc tenancy.Scope, f ThreadFilter) ([]PersonThread, error) {
	if err := sc.Admitted(); err != nil {
		return nil, err
	}
	p := db.ThreadListForPeopleParams{ProjectID: sc.ProjectID, FlaggedOnly: f.Flagged, Lim: MaxPeopleThreads}
	p.ViewerIsHost, p.ViewerOrgID = viewer(sc)
	switch f.Status {
	case "":
	case StatusOpen, StatusClosed, StatusCanceled:
		p.Status = &f.Status
	default:
		return nil, invalid("status must be %s, %s or %s", StatusOpen, StatusClosed, StatusCanceled)
	}
	if f.Part == "" {
		return pg.ReadOne(ctx, s.DB, sc.Tenant(), "threads for people", func(tx *pg.Tx) ([]PersonThread, error) { return s.Q.ThreadListForPeople(ctx, tx, p) })
	}
	bp := db.ThreadListForPeopleByPartParams{ProjectID: p.ProjectID, Part: f.Part, Few: PartThreadsByKey, Status: p.Status,
		FlaggedOnly: p.FlaggedOnly, ViewerIsHost: p.ViewerIsHost, ViewerOrgID: p.ViewerOrgID, Lim: p.Lim}
	return pg.ReadOne(ctx, s.DB, sc.Tenant(), "threads for people", func(tx *pg.Tx) ([]PersonThread, error) {
		rows, err := s.Q.ThreadListForPeopleByPart(ctx, tx, bp)
		out := make([]PersonThread, len(rows))
		for i, r := range rows {
			out[i] = PersonThread(r)
		}
		return out, err
	})
}

// PartThreadsByKey is how many threads of one part the filtered thread list looks up by
// key and sorts (ThreadListForPeopleByPart); a part in more is found by walking the
// recent-threads index, where at least 1 thread in 100 of a 100k-thread project is its.
const PartThreadsByKey = 1000

// Read is a recipient of a message and when it read it (nil: unread).
type Read struct {
	Part   string     `json:"part"`
	ReadAt *time.Time `json:"readAt"`
}

// PersonMessage is a message of the thread view with who read it.
type PersonMessage struct {
	ID         uuid.UUID `json:"id"`
	From       string    `json:"from"`
	Body       string    `json:"body"`
	Urgent     bool      `json:"urgent"`
	NeedsHuman bool      `json:"needsHuman"`
	Broadcast  bool      `json:"broadcast"`
	CreatedAt  time.Time `json:"createdAt"`
	Reads      []Read    `json:"reads"`
}

// PersonThreadView is a thread's page: its header (parts, who is composing now) and its
// newest messages in order, as many as show's page holds (ShowMaxMessages and
// ShowMaxBytes); EarlierOmitted says the thread has older ones.
type PersonThreadView struct {
	db.ThreadGetForPeopleRow
	Messages       []PersonMessage
	EarlierOmitted bool
}

// ThreadForPeople reads a thread the person's company may see, with its messages and
// their read state: two statements in one transaction. Another company's thread, and one
// of another project, answer thread_not_found.
func (s *Service) ThreadForPeople(ctx context.Context, sc tenancy.Scope, threadID string) (PersonThreadView, error) {
	if err := sc.Admitted(); err != nil {
		return PersonThreadView{}, err
	}
	tid, err := parseID("threadId", threadID)
	if err != nil {
		return PersonThreadView{}, err
	}
	var v PersonThreadView
	var rows []db.MessageListForPeopleRow
	p := db.ThreadGetForPeopleParams{ProjectID: sc.ProjectID, ID: tid, Now: s.now()}
	p.ViewerIsHost, p.ViewerOrgID = viewer(sc)
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		t, err := s.Q.ThreadGetForPeople(ctx, tx, p)
		if pg.IsNoRows(err) {
			return threadNotFound(threadID)
		}
		if err != nil {
			return err
		}
		v.ThreadGetForPeopleRow = t
		tx.CommitWithNext(ctx) // the last read: no round trip for the COMMIT
		rows, err = s.Q.MessageListForPeople(ctx, tx, db.MessageListForPeopleParams{ProjectID: sc.ProjectID, ThreadID: tid})
		return err
	})
	if err != nil {
		return PersonThreadView{}, pg.Classify("thread for people", err)
	}
	v.Messages = make([]PersonMessage, 0, min(len(rows), ShowMaxMessages))
	size := 0
	for _, r := range rows { // newest first
		size += text.JSONSize(r.Body)
		if len(v.Messages) == ShowMaxMessages || (len(v.Messages) > 0 && size > ShowMaxBytes) {
			v.EarlierOmitted = true
			break
		}
		m := PersonMessage{ID: r.ID, From: r.FromPart, Body: r.Body, Urgent: r.Urgent, NeedsHuman: r.NeedsHuman, Broadcast: r.Broadcast, CreatedAt: r.CreatedAt}
		if err := json.Unmarshal(r.Reads, &m.Reads); err != nil {
			return PersonThreadView{}, fmt.Errorf("thread for people: read state of %s: %w", r.ID, err)
		}
		v.Messages = append(v.Messages, m)
	}
	slices.Reverse(v.Messages)
	return v, nil
}

// CancelByPerson ends a thread on a person's behalf, as `relayroom admin thread cancel`
// does (Cancel): an open thread becomes canceled, leaves every inbox and its wakes are
// canceled; agents then get thread_canceled from reply and status canceled from close and
// show. Any person who may see the thread may cancel it (a participant agent may close
// it, too). The activity feed records who did (EventCanceled, detail {threadId, by}).
// Canceling a canceled thread changes nothing; a closed one is refused (conflict).
func (s *Service) CancelByPerson(ctx context.Context, sc tenancy.Scope, threadID string) (CancelResult, error) {
	if err := sc.Admitted(); err != nil {
		return CancelResult{}, err
	}
	if !sc.IsPerson() {
		return CancelResult{}, apperr.New(apperr.Forbidden, "only a person cancels a thread here")
	}
	tid, err := parseID("threadId", threadID)
	if err != nil {
		return CancelResult{}, err
	}
	res := CancelResult{ProjectID: sc.ProjectID.String(), ThreadID: tid.String()}
	p := db.ThreadLockForPeopleParams{ProjectID: sc.ProjectID, ID: tid}
	p.ViewerIsHost, p.ViewerOrgID = viewer(sc)
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		t, err := s.Q.ThreadLockForPeople(ctx, tx, p)
		if pg.IsNoRows(err) {
			return threadNotFound(threadID)
		}
		if err != nil {
			return err
		}
		res.Status = t.Status
		switch t.Status {
		case StatusCanceled:
			return nil
		case StatusClosed:
			return apperr.New(apperr.Conflict, "This thread is already closed.")
		}
		now, by := s.now(), "person"
		if err := s.Q.ThreadEnd(ctx, tx, db.ThreadEndParams{Status: StatusCanceled, Now: &now, ClosedBy: &by, ProjectID: sc.ProjectID, ID: tid}); err != nil {
			return err
		}
		res.Status, res.Canceled = StatusCanceled, true
		if err := s.endThread(ctx, tx, sc.ProjectID, tid, now); err != nil {
			return err
		}
		detail, err := json.Marshal(map[string]string{"threadId": tid.String(), "by": fmt.Sprintf("%s [%s] (human)", sc.Person.Name, sc.OrgName)})
		if err != nil {
			return err
		}
		if err := s.Q.ActivityEventInsert(ctx, tx, db.ActivityEventInsertParams{ProjectID: sc.ProjectID, ID: newID(), Type: EventCanceled, Detail: detail, Now: now}); err != nil {
			return err
		}
		// The dashboard's audit of the cancel, in its transaction (a thread already
		// canceled above changed nothing and records nothing).
		return audit.RecordIntended(ctx, tx)
	})
	if err != nil {
		return CancelResult{}, pg.Classify("cancel thread", err)
	}
	return res, nil
}

// Activity is an event of the activity feed.
type Activity = db.ActivityEventListForPeopleRow

// ActivityForPeople lists the project's events after an id (uuid.Nil: all) and, when
// before is given, before that one (the page before a page already read), newest first,
// at most MaxPeopleActivity: the host's people see every part's, a guest's its own
// parts'. One statement.
func (s *Service) ActivityForPeople(ctx context.Context, sc tenancy.Scope, after uuid.UUID, before *uuid.UUID) ([]Activity, error) {
	if err := sc.Admitted(); err != nil {
		return nil, err
	}
	p := db.ActivityEventListForPeopleParams{ProjectID: sc.ProjectID, After: after, Before: before, Lim: MaxPeopleActivity}
	p.ViewerIsHost, p.ViewerOrgID = viewer(sc)
	return pg.ReadOne(ctx, s.DB, sc.Tenant(), "activity for people", func(tx *pg.Tx) ([]Activity, error) { return s.Q.ActivityEventListForPeople(ctx, tx, p) })
}

// UsageRow is a part's usage of a model on a UTC day.
type UsageRow = db.UsageDailyListForPeopleRow

// UsageForPeople lists usage per UTC day, part and model over the last days (1 to
// MaxUsageDays, today included), oldest first: the host's people see every part's, a
// guest's its own parts'. One statement.
func (s *Service) UsageForPeople(ctx context.Context, sc tenancy.Scope, days int) ([]UsageRow, error) {
	if err := sc.Admitted(); err != nil {
		return nil, err
	}
	if days < 1 || days > MaxUsageDays {
		return nil, invalid("days must be between 1 and %d", MaxUsageDays)
	}
	y, m, d := s.now().Date()
	p := db.UsageDailyListForPeopleParams{ProjectID: sc.ProjectID}
	p.Since.Time, p.Since.Valid = time.Date(y, m, d-days+1, 0, 0, 0, 0, time.UTC), true
	p.ViewerIsHost, p.ViewerOrgID = viewer(sc)
	return pg.ReadOne(ctx, s.DB, sc.Tenant(), "usage for people", func(tx *pg.Tx) ([]UsageRow, error) { return s.Q.UsageDailyListForPeople(ctx, tx, p) })
}
