package desk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// ScopeIngestWrite lets a token of an owner or admin write a workspace's conversations
// and messages through the ingest API. It is not an MCP scope: the endpoint's challenge
// and metadata announce Scopes only.
const ScopeIngestWrite = "ingest:write"

// TokenScopes is every scope a personal access token may carry.
var TokenScopes = append(slices.Clone(Scopes), ScopeIngestWrite)

// Bounds of the ingest API: the handler and the service hold them, docs/desk.md states them.
const (
	// MaxIngestBytes bounds one request's body.
	MaxIngestBytes = 1 << 20
	// MaxIngestMessages bounds the history a new conversation brings.
	MaxIngestMessages = 100
	MaxExternalID     = 200
	MaxSubject        = 1000
	MaxMessageBody    = 100000
	MaxCustomerName   = 200
	MaxEmail          = 320
	MaxAttachments    = 20
	MaxFilename       = 255
	// IngestPerWindow is how many ingest calls a workspace may make per IngestWindow,
	// on every plan: a sync catching up stays well under it, a runaway loop does not.
	IngestPerWindow = 600
	IngestWindow    = time.Minute
	// MaxIngestSkew is how far in the future a created_at may be (clocks of senders drift).
	MaxIngestSkew = 5 * time.Minute
)

// EarliestYear: a conversation or message may carry no time before the start of it
// (ingest API and CSV import). Earlier ones are a sender's bug, a zero time (year 1 in
// Go, 1970 in Unix time) sent for a missing one, not helpdesk history: stored, they
// sorted first in every export and stretched a report's range over two thousand years.
const EarliestYear = 1990

// earliest is the start of EarliestYear.
func earliest() time.Time { return time.Date(EarliestYear, 1, 1, 0, 0, 0, 0, time.UTC) }

// Reasons of the ingest API's refusals that are more precise than their code.
const (
	ReasonExternalIDConflict = "external_id_conflict"
)

// Messages of the ingest refusals.
const (
	MsgIngestRole  = "The ingest API needs a token of an owner or admin of the workspace."
	MsgIngestLimit = "Workspace ingest-call limit exceeded."
	MsgIngestMoved = "external_id %q already names a message of another conversation; nothing was written."
	// MsgIngestChanged: a replay must be the same call; a reused id with other content is
	// a conflict, not a silent success that drops the new content.
	MsgIngestChanged = "external_id %q already names a %s with another %s; nothing was written."
)

// IngestMessage is a message the ingest API stores: a customer's message, a member's
// public reply (author_email names the member) or an automated notification.
type IngestMessage struct {
	ExternalID  string        `json:"external_id"`
	Type        string        `json:"type"`
	Body        string        `json:"body"`
	AuthorEmail string        `json:"author_email,omitempty"`
	Attachments []Attachment  `json:"attachments,omitempty"`
	CreatedAt   *wiretime.Arg `json:"created_at,omitempty"`
}

// IngestConversation is POST /api/desk/conversations' body.
type IngestConversation struct {
	ExternalID    string          `json:"external_id"`
	InboxID       string          `json:"inbox_id"`
	Subject       string          `json:"subject"`
	Status        string          `json:"status,omitempty"`
	CustomerEmail string          `json:"customer_email"`
	CustomerName  string          `json:"customer_name,omitempty"`
	AssigneeEmail string          `json:"assignee_email,omitempty"`
	CreatedAt     *wiretime.Arg   `json:"created_at,omitempty"`
	ResolvedAt    *wiretime.Arg   `json:"resolved_at,omitempty"`
	Messages      []IngestMessage `json:"messages"`
}

// IngestAppend is POST /api/desk/conversations/{conversation_id}/messages' body: one
// message, and optionally the conversation's new status.
type IngestAppend struct {
	IngestMessage
	Status string `json:"status,omitempty"`
}

// IngestResult is what an ingest call answers; Created is false when the external id
// was already stored (nothing was written).
type IngestResult struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id,omitempty"`
	Created        bool   `json:"created"`
}

// admitIngest checks an ingest call's caller: an active member (AUTH_REQUIRED-like 401
// otherwise), the ingest scope, the owner or admin role, and the workspace's ingest rate.
func (s *Service) admitIngest(ctx context.Context, sc tenancy.Scope) (caller, error) {
	p := sc.Person
	if p == nil || sc.OrgID == uuid.Nil || p.Role == "" {
		return caller{}, apperr.New(apperr.Unauthenticated, MsgAccessEnded).WithReason(ReasonAuthRequired)
	}
	if !slices.Contains(p.Scopes, ScopeIngestWrite) {
		return caller{}, scopeMissing(ScopeIngestWrite)
	}
	c := caller{org: sc.OrgID, user: p.UserID, role: p.Role, plan: p.Plan, tz: p.Timezone}
	if !c.seesAll() {
		return caller{}, apperr.New(apperr.Forbidden, MsgIngestRole)
	}
	now := s.clock()
	// One counter: the second subject is never counted (FirstMax 0).
	rows, err := s.countHits(ctx, c, db.DeskRateHitParams{OrgID: c.org, WindowStart: now.Truncate(IngestWindow), First: "ingest"})
	if err != nil {
		return caller{}, err
	}
	if r := rows[0]; int(r.Hits) > IngestPerWindow {
		return caller{}, rateLimited(MsgIngestLimit, r.WindowStart.Add(IngestWindow).Sub(now))
	}
	return c, nil
}

func checkExternalID(field, v string) error {
	if n := len([]rune(v)); n < 1 || n > MaxExternalID {
		return invalid("%q must hold 1 to %d characters", field, MaxExternalID)
	}
	return nil
}

// checkTime refuses a time later than now allows; a missing one is now.
func checkTime(field string, at *wiretime.Arg, now time.Time) (time.Time, error) {
	t := at.TimePtr()
	if t == nil {
		return now, nil
	}
	if t.After(now.Add(MaxIngestSkew)) {
		return time.Time{}, invalid("%q is in the future", field)
	}
	if t.Before(earliest()) {
		return time.Time{}, invalid("%q is before %s (a zero time sent for a missing one?)", field, earliest().Format(time.DateOnly))
	}
	return t.UTC(), nil
}

func checkStatus(field, v string) error {
	switch v {
	case StatusOpen, StatusPending, StatusResolved:
		return nil
	}
	return invalid("%q must be open, pending or resolved", field)
}

// member finds an active member of the workspace by email, for an author or an assignee.
func (s *Service) member(ctx context.Context, tx *pg.Tx, org uuid.UUID, field, email string) (*uuid.UUID, error) {
	m, err := s.q.DeskMemberGetIDByEmail(ctx, tx, db.DeskMemberGetIDByEmailParams{OrgID: org, Email: strings.ToLower(email)})
	if pg.IsNoRows(err) || (err == nil && m.Deactivated) {
		return nil, invalid("%q: %s is not an active member of the workspace", field, email)
	} else if err != nil {
		return nil, fmt.Errorf("find member: %w", err)
	}
	return &m.UserID, nil
}

// newMessage checks one ingested message and resolves its author.
func (s *Service) newMessage(ctx context.Context, tx *pg.Tx, org uuid.UUID, at string, m IngestMessage, now time.Time) (NewMessage, error) {
	if err := checkExternalID(at+"external_id", m.ExternalID); err != nil {
		return NewMessage{}, err
	}
	switch m.Type {
	case TypeCustomer, TypeAutomated:
		if m.AuthorEmail != "" {
			return NewMessage{}, invalid("%q is only for a member's reply", at+"author_email")
		}
	case TypeReply:
		if m.AuthorEmail == "" {
			return NewMessage{}, invalid("%q is required for a reply", at+"author_email")
		}
	default:
		// Notes are written by members (the note tool, RelayDesk), never ingested.
		return NewMessage{}, invalid("%q must be customer, reply or automated", at+"type")
	}
	if n := len([]rune(m.Body)); n < 1 || n > MaxMessageBody {
		return NewMessage{}, invalid("%q must hold 1 to %d characters", at+"body", MaxMessageBody)
	}
	if len(m.Attachments) > MaxAttachments {
		return NewMessage{}, invalid("%q holds at most %d attachments", at+"attachments", MaxAttachments)
	}
	for i, a := range m.Attachments {
		if n := len([]rune(a.Filename)); n < 1 || n > MaxFilename || a.Size < 0 || text.CheckShown(a.Filename) != nil {
			return NewMessage{}, invalid("%q needs a filename of 1 to %d characters, none of them a control or formatting character, and a size of at least 0", fmt.Sprintf("%sattachments[%d]", at, i), MaxFilename)
		}
	}
	created, err := checkTime(at+"created_at", m.CreatedAt, now)
	if err != nil {
		return NewMessage{}, err
	}
	out := NewMessage{ExternalID: m.ExternalID, Type: m.Type, Body: m.Body, Attachments: m.Attachments, CreatedAt: created}
	if m.Type == TypeReply {
		if out.AuthorID, err = s.member(ctx, tx, org, at+"author_email", m.AuthorEmail); err != nil {
			return NewMessage{}, err
		}
	}
	return out, nil
}

// IngestConversation stores a conversation and its history, idempotent by its external
// id: an id already stored writes nothing and answers that conversation (Created false),
// unless the call names another conversation (sameConversation), which is a conflict.
// Stored history sends nothing and triggers nothing.
func (s *Service) IngestConversation(ctx context.Context, sc tenancy.Scope, in IngestConversation) (IngestResult, error) {
	c, err := s.admitIngest(ctx, sc)
	if err != nil {
		return IngestResult{}, err
	}
	now := s.clock()
	if err := checkExternalID("external_id", in.ExternalID); err != nil {
		return IngestResult{}, err
	}
	if in.Status == "" {
		in.Status = StatusOpen
	}
	if err := checkStatus("status", in.Status); err != nil {
		return IngestResult{}, err
	}
	if n := len([]rune(in.Subject)); n > MaxSubject {
		return IngestResult{}, invalid("\"subject\" holds at most %d characters", MaxSubject)
	}
	if a, err := mail.ParseAddress(in.CustomerEmail); err != nil || a.Address != in.CustomerEmail || len(in.CustomerEmail) > MaxEmail {
		return IngestResult{}, invalid("\"customer_email\" must be an email address")
	}
	if len([]rune(in.CustomerName)) > MaxCustomerName {
		return IngestResult{}, invalid("\"customer_name\" holds at most %d characters", MaxCustomerName)
	}
	if len(in.Messages) > MaxIngestMessages {
		return IngestResult{}, invalid("\"messages\" holds at most %d messages", MaxIngestMessages)
	}
	created, err := checkTime("created_at", in.CreatedAt, now)
	if err != nil {
		return IngestResult{}, err
	}
	if in.ResolvedAt != nil && in.Status != StatusResolved {
		return IngestResult{}, invalid("\"resolved_at\" is only for a resolved conversation")
	}
	inbox, ok := parseID(PrefixInbox, in.InboxID)
	if !ok {
		return IngestResult{}, inboxNotFound()
	}
	var out IngestResult
	err = s.db.InTenant(ctx, c.tenant(), func(tx *pg.Tx) error {
		if _, err := s.visibleInbox(ctx, tx, c, in.InboxID); err != nil {
			return err
		}
		nc := NewConversation{ExternalID: in.ExternalID, InboxID: inbox, Subject: in.Subject, Status: in.Status,
			CustomerEmail: in.CustomerEmail, CustomerName: in.CustomerName, CreatedAt: created}
		if in.AssigneeEmail != "" {
			if nc.AssigneeID, err = s.member(ctx, tx, c.org, "assignee_email", in.AssigneeEmail); err != nil {
				return err
			}
		}
		last := created
		seen := make(map[string]int, len(in.Messages))
		for i, m := range in.Messages {
			nm, err := s.newMessage(ctx, tx, c.org, fmt.Sprintf("messages[%d].", i), m, now)
			if err != nil {
				return err
			}
			if nm.ExternalID != "" {
				if j, dup := seen[nm.ExternalID]; dup {
					return invalid("\"messages[%d].external_id\" repeats messages[%d]'s", i, j)
				}
				seen[nm.ExternalID] = i
			}
			if nm.CreatedAt.Before(created) {
				return invalid("\"messages[%d].created_at\" is before the conversation's", i)
			}
			last = later(last, nm.CreatedAt)
			nc.Messages = append(nc.Messages, nm)
		}
		if in.Status == StatusResolved {
			// Resolved at the given time, or with the last thing that happened.
			nc.ResolvedAt = &last
			if in.ResolvedAt != nil {
				r := in.ResolvedAt.Time().UTC()
				if r.Before(created) || r.After(now.Add(MaxIngestSkew)) {
					return invalid("\"resolved_at\" must be between created_at and now")
				}
				nc.ResolvedAt = &r
			}
		}
		id, isNew, err := AddConversation(ctx, tx, s.q, c.org, nc)
		if err != nil {
			return err
		}
		if !isNew {
			if err := s.sameConversation(ctx, tx, c, id, nc); err != nil {
				return err
			}
		}
		out = IngestResult{ConversationID: publicID(PrefixConversation, id), Created: isNew}
		return nil
	})
	if err != nil {
		return IngestResult{}, pg.Classify("desk: ingest conversation", err)
	}
	return out, nil
}

// sameConversation refuses a replay whose conversation differs from the stored one in what
// names it (inbox, subject, customer): a sync that reuses an id for another ticket must
// hear of it. Status, assignee and times move on with the conversation, and its messages
// are the first call's, so they are not compared.
func (s *Service) sameConversation(ctx context.Context, tx *pg.Tx, c caller, id int64, nc NewConversation) error {
	cv, err := s.q.DeskConversationGet(ctx, tx, db.DeskConversationGetParams{OrgID: c.org, ID: id, SeesAll: true, UserID: c.user})
	if err != nil {
		return fmt.Errorf("read conversation: %w", err)
	}
	differs := ""
	switch {
	case cv.InboxID != nc.InboxID:
		differs = "inbox"
	case cv.Subject != nc.Subject:
		differs = "subject"
	case !strings.EqualFold(cv.CustomerEmail, nc.CustomerEmail):
		differs = "customer_email"
	}
	if differs != "" {
		return apperr.New(apperr.Conflict, MsgIngestChanged, nc.ExternalID, "conversation", differs).WithReason(ReasonExternalIDConflict)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// IngestMessage appends one message to a conversation, idempotent by its external id:
// an id already stored on this conversation with the same type and body writes nothing
// (Created false); with another type or body, or on another conversation, it is a
// conflict. A status, when given, is set in the same transaction.
func (s *Service) IngestMessage(ctx context.Context, sc tenancy.Scope, conversationID string, in IngestAppend) (IngestResult, error) {
	c, err := s.admitIngest(ctx, sc)
	if err != nil {
		return IngestResult{}, err
	}
	now := s.clock()
	if in.Status != "" {
		if err := checkStatus("status", in.Status); err != nil {
			return IngestResult{}, err
		}
	}
	conv, ok := parseID(PrefixConversation, conversationID)
	if !ok {
		return IngestResult{}, conversationNotFound()
	}
	out := IngestResult{ConversationID: publicID(PrefixConversation, conv)}
	err = s.db.InTenant(ctx, c.tenant(), func(tx *pg.Tx) error {
		cv, err := s.q.DeskConversationGet(ctx, tx, db.DeskConversationGetParams{OrgID: c.org, ID: conv, SeesAll: true, UserID: c.user})
		if pg.IsNoRows(err) {
			return conversationNotFound()
		} else if err != nil {
			return fmt.Errorf("read conversation: %w", err)
		}
		nm, err := s.newMessage(ctx, tx, c.org, "", in.IngestMessage, now)
		if err != nil {
			return err
		}
		if nm.CreatedAt.Before(cv.CreatedAt) {
			return invalid("\"created_at\" is before the conversation's")
		}
		id, err := s.q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: c.org, Kind: counterMessage, N: 1})
		if err != nil {
			return fmt.Errorf("number the message: %w", err)
		}
		att, err := json.Marshal(attachmentsOrEmpty(nm.Attachments))
		if err != nil {
			return fmt.Errorf("attachments: %w", err)
		}
		if out.Created, err = s.q.DeskMessageInsert(ctx, tx, db.DeskMessageInsertParams{OrgID: c.org, ID: id, ConversationID: conv,
			Type: nm.Type, Body: nm.Body, AuthorUserID: nm.AuthorID, Attachments: att, ExternalID: &nm.ExternalID, CreatedAt: stamp(nm.CreatedAt)}); err != nil {
			return fmt.Errorf("add message: %w", err)
		}
		if !out.Created {
			// Stored before (or by a concurrent call, committed before this statement's
			// conflict check): answer that message, if it is this conversation's.
			prev, err := s.q.DeskMessageByExternal(ctx, tx, db.DeskMessageByExternalParams{OrgID: c.org, ExternalID: &nm.ExternalID})
			if err != nil {
				return fmt.Errorf("read message: %w", err)
			}
			if prev.ConversationID != conv {
				return apperr.New(apperr.Conflict, MsgIngestMoved, nm.ExternalID).WithReason(ReasonExternalIDConflict)
			}
			if prev.Type != nm.Type || prev.Body != nm.Body {
				what := "body"
				if prev.Type != nm.Type {
					what = "type"
				}
				return apperr.New(apperr.Conflict, MsgIngestChanged, nm.ExternalID, "message", what).WithReason(ReasonExternalIDConflict)
			}
			out.MessageID = messageID(prev.Type, prev.ID)
			return nil
		}
		out.MessageID = messageID(nm.Type, id)
		if in.Status != "" && in.Status != cv.Status {
			return s.q.DeskConversationSetStatus(ctx, tx, db.DeskConversationSetStatusParams{OrgID: c.org, ID: conv, Status: in.Status, At: stamp(nm.CreatedAt)})
		}
		return nil
	})
	if err != nil {
		return IngestResult{}, pg.Classify("desk: ingest message", err)
	}
	return out, nil
}

func attachmentsOrEmpty(a []Attachment) []Attachment {
	if a == nil {
		return []Attachment{}
	}
	return a
}
