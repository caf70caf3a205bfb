// Package audit is the trail of who changed what, and when (migration 000029,
// docs/dashboard.md "Audit"). A service records a change with Record in the transaction
// that makes the change, so a change that fails leaves no row; a page shows an object's
// history with History and the dashboard's "history" template.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
)

// Kinds of audited objects (audit_event.object_kind). A page names its object with one
// of these, so its history is read with the kind it was written with.
const (
	KindOrganisation = "organisation" // the object id is the organisation's own
	KindAgent        = "agent"
	KindProject      = "project"
	KindAgreement    = "agreement"
	KindPerson       = "person"
	KindOAuthClient  = "oauth_client"
	KindInvitation   = "invitation"
	// Objects in a room, changed by people on its pages (the owner is the room's host).
	KindMemoryEntry       = "memory_entry"
	KindTask              = "task"
	KindKnowledge         = "knowledge"
	KindKnowledgeSettings = "knowledge_settings" // the object id is the project's
	KindThread            = "thread"
	KindWake              = "wake" // a dead wake sent again
	// A desk workspace's objects (the owner is the workspace; the id is the public one).
	KindDeskInbox  = "desk_inbox"
	KindSavedReply = "desk_saved_reply"
)

// MaxDetailBytes bounds an event's detail as JSON (the table's check says the same): a
// detail names what changed, it never carries content or secrets.
const MaxDetailBytes = 4096

// MaxHistory is how many of an object's events a page shows, newest first.
const MaxHistory = 50

// OperatorName is the actor of a change made by the operator's CLI (no person), before the
// operator's own name (AsOperator).
const OperatorName = "operator"

type operatorKey struct{}

// AsOperator marks ctx as the operator's CLI acting, as name (the operating system's
// user and host, "root@bastion"): the admin services record the changes made under it
// (RecordOperator). The CLI works across tenants with the owner's role, and its changes
// (a key rotated, a plan changed) left no trail at all.
func AsOperator(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, operatorKey{}, name)
}

// RecordOperator records e in tx with the operator as its actor when ctx carries one
// (AsOperator), and does nothing otherwise: the dashboard's paths record their own
// events with the person who acted. The operator acts for no organisation, so the event
// is recorded as acting for the object's owner.
func RecordOperator(ctx context.Context, tx *pg.Tx, e Event) error {
	name, ok := ctx.Value(operatorKey{}).(string)
	if !ok {
		return nil
	}
	e.Actor = Actor{OrgID: e.OrgID, Name: OperatorActor(name)}
	return Record(ctx, tx, e)
}

// OperatorActor is the actor name of the operator called name: "operator name", as text
// the table takes (valid UTF-8, no NUL, at most MaxActorName characters) and a reader can
// trust (no control or formatting character: an escape sequence recolours a terminal that
// prints the history, a right-to-left override shows another name). name comes from the
// environment ($USER, RELAYROOM_OPERATOR): a byte Postgres refuses would fail the change
// it records, so such characters are dropped rather than refused.
func OperatorActor(name string) string {
	name = strings.Map(func(r rune) rune {
		if text.Hidden(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	actor := OperatorName
	if name = strings.TrimSpace(name); name != "" {
		actor += " " + name
	}
	if r := []rune(actor); len(r) > MaxActorName {
		actor = string(r[:MaxActorName])
	}
	return actor
}

// Actor is who made a change: a person acting for an organisation, or (UserID nil) the
// operator or the service itself on the organisation's behalf.
type Actor struct {
	OrgID  uuid.UUID
	UserID uuid.UUID // uuid.Nil when no person acted
	Name   string
}

// Event is one change.
type Event struct {
	Actor Actor
	// OrgID owns the object: the project's host for anything in a room, the organisation
	// itself for its agents, people and clients. Its people read the history.
	OrgID uuid.UUID
	// PartyOrgID (optional) is the other company the object concerns (an agreement's
	// guest): its people read the history too.
	PartyOrgID uuid.UUID
	// ProjectID (optional) is the room the change was made in: a guest's person may write
	// into the host's history only in a room its transaction is admitted to.
	ProjectID uuid.UUID
	Kind      string
	ObjectID  string
	Action    string
	// Detail says briefly what changed (field names and new values, never secrets).
	Detail map[string]string
}

// MaxActorName is the longest name an event records its actor under (audit_event.actor_name).
const MaxActorName = 200

// PersonName is the name a person acts and is recorded under: their name, at most
// MaxActorName characters, or their email when they have none (`admin user create` and an
// admin file may leave it out). Left blank, every audited change of theirs failed, and the
// pages, which take a name for a signed-in person, showed them neither their links nor
// Sign out.
func PersonName(name, email string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		name = email
	}
	if r := []rune(name); len(r) > MaxActorName {
		name = string(r[:MaxActorName])
	}
	return name
}

// Record writes e in tx, the transaction of the change it describes.
func Record(ctx context.Context, tx *pg.Tx, e Event) error {
	if e.Actor.Name == "" || e.Actor.OrgID == uuid.Nil || e.OrgID == uuid.Nil || e.Kind == "" || e.ObjectID == "" || e.Action == "" {
		return fmt.Errorf("audit: incomplete event %s/%s %s", e.Kind, e.ObjectID, e.Action)
	}
	detail := e.Detail
	if detail == nil {
		detail = map[string]string{}
	}
	js, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("audit: detail: %w", err)
	}
	if len(js) > MaxDetailBytes {
		return fmt.Errorf("audit: detail of %s/%s %s is %d bytes, at most %d", e.Kind, e.ObjectID, e.Action, len(js), MaxDetailBytes)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("audit: id: %w", err)
	}
	q := db.New()
	// The actor's organisation is always visible to the writer (it is rr_org(), or the
	// operator writes); a name it cannot read is left empty, as the column's default.
	orgName, err := q.OrganisationGetName(ctx, tx, e.Actor.OrgID)
	if err != nil && !pg.IsNoRows(err) {
		return fmt.Errorf("audit: actor's organisation: %w", err)
	}
	err = q.AuditEventInsert(ctx, tx, db.AuditEventInsertParams{
		OrgID: e.OrgID, ID: id, ActorOrgID: e.Actor.OrgID, ActorOrgName: orgName, ActorUserID: optional(e.Actor.UserID), ActorName: e.Actor.Name,
		PartyOrgID: optional(e.PartyOrgID), ProjectID: optional(e.ProjectID),
		ObjectKind: e.Kind, ObjectID: e.ObjectID, Action: e.Action, Detail: js,
	})
	if err != nil {
		return fmt.Errorf("audit: record %s/%s %s: %w", e.Kind, e.ObjectID, e.Action, err)
	}
	return nil
}

func optional(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// intentKey carries an Event a caller wants recorded by the service it calls.
type intentKey struct{}

type intent struct {
	e       Event
	written bool
}

// Intend asks the service called with the returned context to record e in the
// transaction of its change (RecordIntended). A page that changes something through a
// service whose functions do not take an Event uses it: the service records it with one
// line where it commits, and Written tells the page it did.
func Intend(ctx context.Context, e Event) context.Context {
	return context.WithValue(ctx, intentKey{}, &intent{e: e})
}

// RecordIntended records the Event a caller put in ctx with Intend, if any, in tx; a
// service calls it in its writing transaction, after its change succeeded.
func RecordIntended(ctx context.Context, tx *pg.Tx) error {
	in, ok := ctx.Value(intentKey{}).(*intent)
	if !ok || in.written {
		return nil
	}
	if err := Record(ctx, tx, in.e); err != nil {
		return err
	}
	in.written = true
	return nil
}

// Written reports whether the Event put in ctx with Intend was recorded (its transaction
// may still have rolled back: check the service call's error too).
func Written(ctx context.Context) bool {
	in, ok := ctx.Value(intentKey{}).(*intent)
	return ok && in.written
}

// Entry is one line of an object's history, as pages show it.
type Entry struct {
	At time.Time
	// Object is the changed object's id, set by ProjectHistory (a tab's history names
	// which of its objects changed).
	Object   string
	Actor    string
	ActorOrg string
	Action   string
	Detail   map[string]string
}

// Object names the object whose history is read: its owner, kind and id.
type Object struct {
	OrgID uuid.UUID
	Kind  string
	ID    string
}

// Service reads the trail for pages (writing is Record's, inside each change).
type Service struct {
	DB *pg.DB
	Q  *db.Queries
}

// New builds the reader on d.
func New(d *pg.DB) *Service { return &Service{DB: d, Q: db.New()} }

// History reads an object's history, newest first (at most MaxHistory), under tenant t
// (the reader's: a room page's Scope.Tenant(), an organisation page's organisation): RLS
// leaves the reader the events of its own organisation's objects, its own actions and
// those of objects it is a party to.
func (s *Service) History(ctx context.Context, t pg.Tenant, o Object) ([]Entry, error) {
	var rows []db.AuditEventListByObjectRow
	err := s.DB.InTenant(ctx, t, func(tx *pg.Tx) (err error) {
		rows, err = s.Q.AuditEventListByObject(ctx, tx, db.AuditEventListByObjectParams{OrgID: o.OrgID, ObjectKind: o.Kind, ObjectID: o.ID, MaxRows: MaxHistory})
		return err
	})
	if err != nil {
		return nil, pg.Classify("audit history", err)
	}
	out := make([]Entry, 0, len(rows))
	for _, r := range rows {
		e := Entry{At: r.At, Actor: r.ActorName, ActorOrg: r.ActorOrgName, Action: r.Action}
		if err := json.Unmarshal(r.Detail, &e.Detail); err != nil {
			return nil, fmt.Errorf("audit history: detail of %s: %w", r.ID, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// ProjectHistory reads the history of one kind of object in a room (a tab's: every
// memory entry's, every task's), newest first (at most MaxHistory), in one statement
// under tenant t, the reader's; each Entry names its Object. orgID is the room's host.
func (s *Service) ProjectHistory(ctx context.Context, t pg.Tenant, orgID, projectID uuid.UUID, kind string) ([]Entry, error) {
	var rows []db.AuditEventListByProjectRow
	err := s.DB.InTenant(ctx, t, func(tx *pg.Tx) (err error) {
		rows, err = s.Q.AuditEventListByProject(ctx, tx, db.AuditEventListByProjectParams{OrgID: orgID, ObjectKind: kind, ProjectID: &projectID, MaxRows: MaxHistory})
		return err
	})
	if err != nil {
		return nil, pg.Classify("audit history", err)
	}
	out := make([]Entry, 0, len(rows))
	for _, r := range rows {
		e := Entry{At: r.At, Object: r.ObjectID, Actor: r.ActorName, ActorOrg: r.ActorOrgName, Action: r.Action}
		if err := json.Unmarshal(r.Detail, &e.Detail); err != nil {
			return nil, fmt.Errorf("audit history: detail of %s: %w", r.ID, err)
		}
		out = append(out, e)
	}
	return out, nil
}
