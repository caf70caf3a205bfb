package desk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
)

// InboxSpec declares an inbox in `relayroom admin apply`'s desk section. Members, when
// given, restrict it to those members (emails); owners and admins always see it.
//
// A field left out leaves an existing inbox as it is: without `members`, who may see it
// (which the dashboard may have changed since the file was written: applying the file
// again must not open an inbox restricted there); without `forwarding_address`, the
// address. `members: []` opens the inbox to the workspace; `forwarding_address: ""`
// clears the address.
type InboxSpec struct {
	Slug              string   `yaml:"slug" json:"slug"`
	Name              string   `yaml:"name" json:"name"`
	Members           []string `yaml:"members" json:"members"` // nil: left as it is
	ForwardingAddress *string  `yaml:"forwarding_address" json:"forwarding_address"`
}

// SavedReplySpec declares a saved reply.
type SavedReplySpec struct {
	Slug  string `yaml:"slug" json:"slug"`
	Title string `yaml:"title" json:"title"`
	Body  string `yaml:"body" json:"body"`
}

// WorkspaceSpec is one workspace of the desk section.
type WorkspaceSpec struct {
	Workspace    string           `yaml:"workspace" json:"workspace"`
	Inboxes      []InboxSpec      `yaml:"inboxes" json:"inboxes"`
	SavedReplies []SavedReplySpec `yaml:"saved_replies" json:"saved_replies"`
}

// PublicRef is an applied object's public id.
type PublicRef struct {
	ID string `json:"id"`
}

// WorkspaceOut is what applying a workspace prints.
type WorkspaceOut struct {
	Inboxes      map[string]PublicRef `json:"inboxes"`
	SavedReplies map[string]PublicRef `json:"saved_replies"`
}

// slugID is the id of what get finds by its slug, or, when there is none yet, the next id
// of the counter of its kind.
func slugID(ctx context.Context, tx *pg.Tx, q *db.Queries, orgID uuid.UUID, kind string, get func() (int64, error)) (int64, error) {
	id, err := get()
	if pg.IsNoRows(err) {
		return q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: orgID, Kind: kind, N: 1})
	}
	return id, err
}

// dashboardReplyNumber is N when slug is "reply-N", the slug the dashboard gives the
// saved reply numbered N (CreateSavedReply).
func dashboardReplyNumber(slug string) (int64, bool) {
	digits, ok := strings.CutPrefix(slug, dashboardReplySlug)
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" || digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// ApplyWorkspace creates or updates a workspace's inboxes and saved replies by slug, in
// the caller's transaction (admin apply's, on the owner's pool). Inbox members must be
// members of the workspace.
func ApplyWorkspace(ctx context.Context, tx *pg.Tx, q *db.Queries, orgID uuid.UUID, w WorkspaceSpec) (WorkspaceOut, error) {
	out := WorkspaceOut{Inboxes: map[string]PublicRef{}, SavedReplies: map[string]PublicRef{}}
	for _, in := range w.Inboxes {
		id, err := slugID(ctx, tx, q, orgID, counterInbox, func() (int64, error) {
			return q.DeskInboxGetBySlug(ctx, tx, db.DeskInboxGetBySlugParams{OrgID: orgID, Slug: in.Slug})
		})
		if err != nil {
			return out, fmt.Errorf("inbox %s: %w", in.Slug, err)
		}
		p := db.DeskInboxUpsertParams{OrgID: orgID, ID: id, Slug: in.Slug, Name: in.Name, ForwardingGiven: in.ForwardingAddress != nil}
		if in.ForwardingAddress != nil && *in.ForwardingAddress != "" {
			p.ForwardingAddress = in.ForwardingAddress
		}
		if in.Members != nil {
			p.Restricted = new(len(in.Members) > 0)
		}
		if id, err = q.DeskInboxUpsert(ctx, tx, p); err != nil {
			return out, fmt.Errorf("inbox %s: %w", in.Slug, err)
		}
		out.Inboxes[in.Slug] = PublicRef{publicID(PrefixInbox, id)}
		if in.Members == nil {
			continue
		}
		users := make([]uuid.UUID, 0, len(in.Members))
		for _, email := range in.Members {
			m, err := q.DeskMemberGetIDByEmail(ctx, tx, db.DeskMemberGetIDByEmailParams{OrgID: orgID, Email: strings.ToLower(email)})
			if pg.IsNoRows(err) {
				return out, fmt.Errorf("inbox %s: %s is not a member of workspace %s", in.Slug, email, w.Workspace)
			} else if err != nil {
				return out, fmt.Errorf("inbox %s: %w", in.Slug, err)
			}
			users = append(users, m.UserID)
		}
		if err := q.DeskInboxMemberDeleteExcept(ctx, tx, db.DeskInboxMemberDeleteExceptParams{OrgID: orgID, InboxID: id, UserIds: users}); err != nil {
			return out, fmt.Errorf("inbox %s: members: %w", in.Slug, err)
		}
		if err := q.DeskInboxMemberInsert(ctx, tx, db.DeskInboxMemberInsertParams{OrgID: orgID, InboxID: id, UserIds: users}); err != nil {
			return out, fmt.Errorf("inbox %s: members: %w", in.Slug, err)
		}
	}
	for _, r := range w.SavedReplies {
		found := true
		id, err := slugID(ctx, tx, q, orgID, counterReply, func() (int64, error) {
			id, err := q.DeskSavedReplyGetBySlug(ctx, tx, db.DeskSavedReplyGetBySlugParams{OrgID: orgID, Slug: r.Slug})
			found = err == nil
			return id, err
		})
		if err != nil {
			return out, fmt.Errorf("saved reply %s: %w", r.Slug, err)
		}
		if n, dashboard := dashboardReplyNumber(r.Slug); dashboard && !found && n != id {
			// The dashboard names the reply it creates "reply-" and its number: a new one
			// made here under another number's slug would take the slug of a later
			// dashboard reply, whose creation would then fail for good.
			return out, fmt.Errorf("saved reply %s: slugs reply-N name the replies made on the dashboard, and there is no reply %d; give a new reply another slug", r.Slug, n)
		}
		if id, err = q.DeskSavedReplyUpsert(ctx, tx, db.DeskSavedReplyUpsertParams{OrgID: orgID, ID: id, Slug: r.Slug, Title: r.Title, Body: r.Body}); err != nil {
			return out, fmt.Errorf("saved reply %s: %w", r.Slug, err)
		}
		out.SavedReplies[r.Slug] = PublicRef{publicID(PrefixReply, id)}
	}
	return out, nil
}

// CheckWorkspace returns the problems of a workspace's declaration, each named by its
// path (admin apply reports them all before applying anything).
func CheckWorkspace(path string, w WorkspaceSpec) []string {
	var p []string
	add := func(where, format string, args ...any) { p = append(p, where+": "+fmt.Sprintf(format, args...)) }
	slugOK := func(s string) bool {
		if s == "" || len(s) > 63 || s[0] == '-' {
			return false
		}
		return strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) < 0
	}
	// slug checks the slug of item i of a list, unique within it.
	slug := func(at, slug string, seen *[]string) {
		if !slugOK(slug) {
			add(at+".slug", "must be lower-case letters, digits and dashes, got %q", slug)
		} else if slices.Contains(*seen, slug) {
			add(at+".slug", "%q is declared twice", slug)
		}
		*seen = append(*seen, slug)
	}
	var inboxes, replies []string
	for i, in := range w.Inboxes {
		at := fmt.Sprintf("%s.inboxes[%d]", path, i)
		slug(at, in.Slug, &inboxes)
		if n := len([]rune(in.Name)); n < 1 || n > 200 {
			add(at+".name", "must hold 1 to 200 characters")
		}
		if a := in.ForwardingAddress; a != nil && *a != "" {
			if _, err := mail.ParseAddress(*a); err != nil || len(*a) > 320 {
				add(at+".forwarding_address", "must be an email address")
			}
		}
	}
	for i, r := range w.SavedReplies {
		at := fmt.Sprintf("%s.saved_replies[%d]", path, i)
		slug(at, r.Slug, &replies)
		if n := len([]rune(r.Title)); n < 1 || n > MaxSavedReplyTitle {
			add(at+".title", "must hold 1 to %d characters", MaxSavedReplyTitle)
		}
		if n := len([]rune(r.Body)); n < 1 || n > MaxSavedReplyBody {
			add(at+".body", "must hold 1 to %d characters", MaxSavedReplyBody)
		}
	}
	return p
}

// NewConversation is a conversation brought in with its history (demo seed, imports):
// stored as it happened, sending and triggering nothing.
type NewConversation struct {
	ExternalID    string
	InboxID       int64
	Subject       string
	Status        string
	AssigneeID    *uuid.UUID
	CustomerEmail string
	CustomerName  string
	CreatedAt     time.Time
	// ResolvedAt is when a resolved conversation was resolved (nil: unknown, as in
	// imported history; it is then left out of resolution reports). Ignored otherwise.
	ResolvedAt *time.Time
	Messages   []NewMessage
}

// NewMessage is one message of a NewConversation.
type NewMessage struct {
	// ExternalID is the sender's id of the message ("" for none).
	ExternalID  string
	Type        string
	Body        string
	AuthorID    *uuid.UUID
	Attachments []Attachment
	CreatedAt   time.Time
}

// AddConversation stores a conversation and its messages in the caller's transaction.
// An external id already stored adds nothing (created false).
func AddConversation(ctx context.Context, tx *pg.Tx, q *db.Queries, orgID uuid.UUID, c NewConversation) (id int64, created bool, err error) {
	var ext *string
	if c.ExternalID != "" {
		ext = &c.ExternalID
	}
	var resolved *time.Time
	if c.Status == StatusResolved {
		resolved = c.ResolvedAt
	}
	if ext != nil {
		// Known already: nothing to add, and no number spent.
		if id, err := q.DeskConversationGetIDByExternal(ctx, tx, db.DeskConversationGetIDByExternalParams{OrgID: orgID, ExternalID: ext}); err == nil {
			return id, false, nil
		} else if !pg.IsNoRows(err) {
			return 0, false, fmt.Errorf("desk: find conversation: %w", err)
		}
	}
	next, err := q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: orgID, Kind: counterConversation, N: 1})
	if err != nil {
		return 0, false, fmt.Errorf("desk: number the conversation: %w", err)
	}
	row, err := q.DeskConversationInsert(ctx, tx, db.DeskConversationInsertParams{OrgID: orgID, ID: next, InboxID: c.InboxID,
		Subject: c.Subject, Status: c.Status, AssigneeUserID: c.AssigneeID, CustomerEmail: c.CustomerEmail, CustomerName: c.CustomerName,
		ExternalID: ext, CreatedAt: stamp(c.CreatedAt), ResolvedAt: stampPtr(resolved)})
	if pg.IsNoRows(err) && ext != nil {
		// A concurrent call stored the same external id and committed while this
		// statement waited on it, so the statement's snapshot predates that row: a new
		// statement sees it. (Concurrent creators of one workspace usually meet first on
		// the counter's row, which orders them before this statement starts.)
		id, err := q.DeskConversationGetIDByExternal(ctx, tx, db.DeskConversationGetIDByExternalParams{OrgID: orgID, ExternalID: ext})
		if err != nil {
			return 0, false, fmt.Errorf("desk: find conversation: %w", err)
		}
		return id, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("desk: add conversation: %w", err)
	}
	if !row.Created || len(c.Messages) == 0 {
		return row.ID, row.Created, nil
	}
	last, err := q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: orgID, Kind: counterMessage, N: int64(len(c.Messages))})
	if err != nil {
		return 0, false, fmt.Errorf("desk: number the messages: %w", err)
	}
	first := last - int64(len(c.Messages)) + 1
	for i, m := range c.Messages {
		att := attachmentsOrEmpty(m.Attachments)
		b, err := json.Marshal(att)
		if err != nil {
			return 0, false, fmt.Errorf("desk: attachments: %w", err)
		}
		var mext *string
		if m.ExternalID != "" {
			mext = &m.ExternalID
		}
		created, err := q.DeskMessageInsert(ctx, tx, db.DeskMessageInsertParams{OrgID: orgID, ID: first + int64(i), ConversationID: row.ID,
			Type: m.Type, Body: m.Body, AuthorUserID: m.AuthorID, Attachments: b, ExternalID: mext, CreatedAt: stamp(m.CreatedAt)})
		if err != nil {
			return 0, false, fmt.Errorf("desk: add message: %w", err)
		}
		if !created {
			// The conversation is new, so a message already stored under this external id
			// is another conversation's: refuse the whole call (the caller's transaction
			// rolls back) rather than answer created without it.
			return 0, false, apperr.New(apperr.Conflict, MsgIngestMoved, m.ExternalID).WithReason(ReasonExternalIDConflict)
		}
	}
	return row.ID, true, nil
}
