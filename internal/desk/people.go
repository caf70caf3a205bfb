package desk

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
)

// The desk's pages for people (docs/dashboard.md, "Desk"): a workspace's inboxes and who
// may see them, its saved replies, and CSV import with a preview. Everyone in the
// workspace reads what the desk tools would show them; owners and admins change things,
// each change audited in its own transaction and shown on the object's page. Nothing
// here reads an inbox's connection secret or forwarding address.

// Bounds of what people type, the same the table's checks and admin apply hold.
const (
	MaxSavedReplyTitle = 200
	MaxSavedReplyBody  = 20000
)

// Bounds of what a page lists.
const (
	MaxPeopleInboxes = 200
	MaxPeopleReplies = 500
	// ImportPreviewRows is how many good rows a preview shows (every bad row is shown).
	ImportPreviewRows = 20
)

// ReasonFieldsInvalid marks input refused field by field (Fields reads them).
const ReasonFieldsInvalid = "FIELDS_INVALID"

// MsgChangeRole refuses a member a change only owners and admins make.
const MsgChangeRole = "Only the workspace's owners and admins can change this."

// Member is a person acting on the desk pages for a workspace (org), with the role the
// workspace gives them. The dashboard resolves it from the signed-in session.
type Member struct {
	OrgID  uuid.UUID
	UserID uuid.UUID
	Name   string
	Role   string
}

func (m Member) seesAll() bool { return m.Role == RoleOwner || m.Role == RoleAdmin }

func (m Member) tenant() pg.Tenant { return pg.Tenant{OrgID: m.OrgID} }

// mayChange refuses a member who is not an owner or admin.
func (m Member) mayChange() error {
	if !m.seesAll() {
		return apperr.New(apperr.Forbidden, "%s", MsgChangeRole)
	}
	return nil
}

func (m Member) event(kind, id, action string, detail map[string]string) audit.Event {
	return audit.Event{Actor: audit.Actor{OrgID: m.OrgID, UserID: m.UserID, Name: m.Name}, OrgID: m.OrgID,
		Kind: kind, ObjectID: id, Action: action, Detail: detail}
}

// fieldErrors is input refused field by field (field → message), as an apperr.Invalid
// whose Details["fields"] holds them: the page shows each beside its field.
func fieldErrors(fields map[string]string) error {
	e := apperr.New(apperr.Invalid, "Please correct the fields marked; nothing was saved.").WithReason(ReasonFieldsInvalid)
	e.Details = map[string]any{"fields": fields}
	return e
}

// Fields returns the field messages of an error from this file, or nil.
func Fields(err error) map[string]string {
	if e, ok := apperr.As(err); ok && e.Reason == ReasonFieldsInvalid {
		f, _ := e.Details["fields"].(map[string]string)
		return f
	}
	return nil
}

// Workspace is what the desk pages name: the workspace and the person's role in it.
type Workspace struct {
	Name, Timezone, Role string
}

// PeopleWorkspace reads the workspace and the person's role; a person who is not a
// member is NotFound, a deactivated one Forbidden (MsgAccessEnded), as for their tokens
// (the same statement).
func (s *Service) PeopleWorkspace(ctx context.Context, orgID, userID uuid.UUID) (Workspace, error) {
	var row db.DeskMemberGrantRow
	err := s.db.InTenant(ctx, pg.Tenant{OrgID: orgID}, func(tx *pg.Tx) (err error) {
		row, err = s.q.DeskMemberGrant(ctx, tx, db.DeskMemberGrantParams{OrgID: orgID, UserID: userID})
		return err
	})
	switch {
	case pg.IsNoRows(err):
		return Workspace{}, apperr.New(apperr.NotFound, "no such workspace")
	case err != nil:
		return Workspace{}, pg.Classify("desk workspace", err)
	case row.Deactivated:
		return Workspace{}, apperr.New(apperr.Forbidden, "%s", MsgAccessEnded)
	}
	return Workspace{Name: row.Name, Timezone: row.Timezone, Role: row.Role}, nil
}

// PeopleInbox is an inbox as the pages show it: never its secret or forwarding address.
type PeopleInbox struct {
	ID         string // inbox_N
	Slug       string
	Name       string
	Restricted bool
	OpenCount  int64
	// Members are the names of the members it is restricted to (shown to owners and
	// admins only: a member sees that it is restricted, not to whom).
	Members []string
}

func peopleInbox(m Member, r db.DeskInboxListForPeopleRow) PeopleInbox {
	in := PeopleInbox{ID: publicID(PrefixInbox, r.ID), Slug: r.Slug, Name: r.Name, Restricted: r.Restricted, OpenCount: r.OpenCount}
	if m.seesAll() {
		in.Members = r.MemberNames
	}
	return in
}

// Inboxes lists the inboxes the member sees (owners and admins: all; a member: the open
// ones and the restricted ones that list them), by name, at most MaxPeopleInboxes.
func (s *Service) Inboxes(ctx context.Context, m Member) ([]PeopleInbox, error) {
	var rows []db.DeskInboxListForPeopleRow
	err := s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) (err error) {
		rows, err = s.q.DeskInboxListForPeople(ctx, tx, db.DeskInboxListForPeopleParams{OrgID: m.OrgID, SeesAll: m.seesAll(), UserID: m.UserID, Lim: MaxPeopleInboxes})
		return err
	})
	if err != nil {
		return nil, pg.Classify("desk inboxes", err)
	}
	out := make([]PeopleInbox, 0, len(rows))
	for _, r := range rows {
		out = append(out, peopleInbox(m, r))
	}
	return out, nil
}

// InboxAccess is an inbox's page: the inbox and, for owners and admins, every member of
// the workspace with whether the inbox lists them.
type InboxAccess struct {
	Inbox   PeopleInbox
	Members []db.DeskInboxAccessListRow
}

// inbox resolves a public inbox id the member sees, in tx; NotFound (MsgInboxNotFound)
// for an absent, hidden, malformed or another workspace's id alike.
func (s *Service) inbox(ctx context.Context, tx *pg.Tx, m Member, public string) (int64, PeopleInbox, error) {
	id, ok := parseID(PrefixInbox, public)
	if !ok {
		return 0, PeopleInbox{}, inboxNotFound()
	}
	rows, err := s.q.DeskInboxListForPeople(ctx, tx, db.DeskInboxListForPeopleParams{OrgID: m.OrgID, SeesAll: m.seesAll(), UserID: m.UserID, OnlyID: &id, Lim: 1})
	if err != nil {
		return 0, PeopleInbox{}, err
	}
	if len(rows) == 0 {
		return 0, PeopleInbox{}, inboxNotFound()
	}
	return id, peopleInbox(m, rows[0]), nil
}

// Inbox reads an inbox's page.
func (s *Service) Inbox(ctx context.Context, m Member, public string) (InboxAccess, error) {
	var out InboxAccess
	err := s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) error {
		id, in, err := s.inbox(ctx, tx, m, public)
		if err != nil {
			return err
		}
		out.Inbox = in
		if m.seesAll() {
			out.Members, err = s.q.DeskInboxAccessList(ctx, tx, db.DeskInboxAccessListParams{OrgID: m.OrgID, InboxID: id})
		}
		return err
	})
	return out, pg.Classify("desk inbox", err)
}

// SetInboxAccess restricts an inbox to the listed members (restricted) or opens it to
// the whole workspace (every listed member is then dropped); owners and admins always
// see it. Only owners and admins; every id must be a member of the workspace. The change
// and its audit event are one transaction.
func (s *Service) SetInboxAccess(ctx context.Context, m Member, public string, restricted bool, members []uuid.UUID) error {
	if err := m.mayChange(); err != nil {
		return err
	}
	if !restricted {
		// Not nil: "every member but none of these" must drop the whole list, and a
		// NULL array made it drop nobody.
		members = []uuid.UUID{}
	}
	err := s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) error {
		id, _, err := s.inbox(ctx, tx, m, public)
		if err != nil {
			return err
		}
		all, err := s.q.DeskInboxAccessList(ctx, tx, db.DeskInboxAccessListParams{OrgID: m.OrgID, InboxID: id})
		if err != nil {
			return err
		}
		names := make([]string, 0, len(members))
		for _, u := range members {
			i := slices.IndexFunc(all, func(r db.DeskInboxAccessListRow) bool { return r.UserID == u })
			if i < 0 {
				// Not a member, or deactivated and not listed already (DeskInboxAccessList).
				return fieldErrors(map[string]string{"members": "Choose active members of this workspace."})
			}
			names = append(names, all[i].Name)
		}
		if restricted && len(members) == 0 {
			return fieldErrors(map[string]string{"members": "Choose at least one member, or open the inbox to everyone."})
		}
		if _, err := s.q.DeskInboxSetRestricted(ctx, tx, db.DeskInboxSetRestrictedParams{OrgID: m.OrgID, ID: id, Restricted: restricted}); err != nil {
			return fmt.Errorf("restrict: %w", err)
		}
		if err := s.q.DeskInboxMemberDeleteExcept(ctx, tx, db.DeskInboxMemberDeleteExceptParams{OrgID: m.OrgID, InboxID: id, UserIds: members}); err != nil {
			return fmt.Errorf("members: %w", err)
		}
		if err := s.q.DeskInboxMemberInsert(ctx, tx, db.DeskInboxMemberInsertParams{OrgID: m.OrgID, InboxID: id, UserIds: members}); err != nil {
			return fmt.Errorf("members: %w", err)
		}
		detail := map[string]string{"visible to": "everyone"}
		if restricted {
			slices.Sort(names)
			detail["visible to"] = accessList(names) + " (and owners and admins)"
		}
		return audit.Record(ctx, tx, m.event(audit.KindDeskInbox, public, "access_changed", detail))
	})
	return pg.Classify("desk inbox access", err)
}

// maxAccessListBytes bounds the names an inbox's access_changed event lists: the audit
// trail's detail holds at most 4 KiB, and restricting an inbox to a couple of hundred
// members failed the whole change (503) when every name was listed.
const maxAccessListBytes = 2048

// accessList names the members, as many as fit maxAccessListBytes, then how many more.
func accessList(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if b.Len()+len(n)+2 > maxAccessListBytes {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
	}
	return b.String()
}

// SavedReplies lists the workspace's saved replies by title (every member reads them, as
// relaydesk_find_saved_replies does), at most MaxPeopleReplies.
func (s *Service) SavedReplies(ctx context.Context, m Member) ([]SavedReply, error) {
	var rows []db.DeskSavedReplyListForPeopleRow
	err := s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) (err error) {
		rows, err = s.q.DeskSavedReplyListForPeople(ctx, tx, db.DeskSavedReplyListForPeopleParams{OrgID: m.OrgID, Lim: MaxPeopleReplies})
		return err
	})
	if err != nil {
		return nil, pg.Classify("desk saved replies", err)
	}
	out := make([]SavedReply, 0, len(rows))
	for _, r := range rows {
		out = append(out, SavedReply{ID: publicID(PrefixReply, r.ID), Title: r.Title, Body: r.Body})
	}
	return out, nil
}

// MsgReplyNotFound answers a saved reply id that is absent, malformed or another
// workspace's, alike.
const MsgReplyNotFound = "Saved reply not found."

// SavedReplyByID reads one saved reply (public id reply_N).
func (s *Service) SavedReplyByID(ctx context.Context, m Member, public string) (SavedReply, error) {
	id, ok := parseID(PrefixReply, public)
	if !ok {
		return SavedReply{}, apperr.New(apperr.NotFound, MsgReplyNotFound)
	}
	var row db.DeskSavedReplyGetForPeopleRow
	err := s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) (err error) {
		row, err = s.q.DeskSavedReplyGetForPeople(ctx, tx, db.DeskSavedReplyGetForPeopleParams{OrgID: m.OrgID, ID: id})
		return err
	})
	if pg.IsNoRows(err) {
		return SavedReply{}, apperr.New(apperr.NotFound, MsgReplyNotFound)
	}
	if err != nil {
		return SavedReply{}, pg.Classify("desk saved reply", err)
	}
	return SavedReply{ID: public, Title: row.Title, Body: row.Body}, nil
}

// checkReply refuses a title or body out of bounds, field by field (trimmed of spaces).
func checkReply(title, body string) (string, string, error) {
	title, body = strings.TrimSpace(title), strings.TrimSpace(body)
	f := map[string]string{}
	if n := utf8.RuneCountInString(title); n < 1 || n > MaxSavedReplyTitle {
		f["title"] = fmt.Sprintf("The title must hold 1 to %d characters (it has %d).", MaxSavedReplyTitle, n)
	}
	if n := utf8.RuneCountInString(body); n < 1 || n > MaxSavedReplyBody {
		f["body"] = fmt.Sprintf("The text must hold 1 to %d characters (it has %d).", MaxSavedReplyBody, n)
	}
	if len(f) > 0 {
		return "", "", fieldErrors(f)
	}
	return title, body, nil
}

// dashboardReplySlug and the reply's number are the slug of a saved reply made on the
// dashboard, by which admin apply can name it; apply makes no new reply under such a
// slug (dashboardReplyNumber).
const dashboardReplySlug = "reply-"

// CreateSavedReply adds a saved reply (owners and admins). Its slug, which admin apply
// names replies by, is "reply-N" after its number. Returns its public id.
func (s *Service) CreateSavedReply(ctx context.Context, m Member, title, body string) (string, error) {
	if err := m.mayChange(); err != nil {
		return "", err
	}
	title, body, err := checkReply(title, body)
	if err != nil {
		return "", err
	}
	var public string
	err = s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) error {
		id, err := s.q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: m.OrgID, Kind: counterReply, N: 1})
		if err != nil {
			return fmt.Errorf("number the reply: %w", err)
		}
		public = publicID(PrefixReply, id)
		slug := dashboardReplySlug + strconv.FormatInt(id, 10)
		if err := s.q.DeskSavedReplyInsert(ctx, tx, db.DeskSavedReplyInsertParams{OrgID: m.OrgID, ID: id, Slug: slug, Title: title, Body: body}); err != nil {
			return fmt.Errorf("store the reply: %w", err)
		}
		return audit.Record(ctx, tx, m.event(audit.KindSavedReply, public, "created", map[string]string{"title": title}))
	})
	return public, pg.Classify("desk create saved reply", err)
}

// UpdateSavedReply replaces a saved reply's title and body (owners and admins).
func (s *Service) UpdateSavedReply(ctx context.Context, m Member, public, title, body string) error {
	if err := m.mayChange(); err != nil {
		return err
	}
	id, ok := parseID(PrefixReply, public)
	if !ok {
		return apperr.New(apperr.NotFound, MsgReplyNotFound)
	}
	title, body, err := checkReply(title, body)
	if err != nil {
		return err
	}
	err = s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) error {
		n, err := s.q.DeskSavedReplyUpdate(ctx, tx, db.DeskSavedReplyUpdateParams{OrgID: m.OrgID, ID: id, Title: title, Body: body})
		if err != nil {
			return fmt.Errorf("store the reply: %w", err)
		}
		if n == 0 {
			return apperr.New(apperr.NotFound, MsgReplyNotFound)
		}
		return audit.Record(ctx, tx, m.event(audit.KindSavedReply, public, "edited", map[string]string{"title": title}))
	})
	return pg.Classify("desk edit saved reply", err)
}
