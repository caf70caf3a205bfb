package rooms

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wake"
)

// PostResult is post_message's answer.
type PostResult struct {
	Success   bool   `json:"success"`
	MessageID string `json:"message_id"`
	PostedAt  string `json:"posted_at"`
	VisibleTo string `json:"visible_to"`
	// Redacted names the kinds of secret masked in what was stored; absent when nothing
	// was (every answer of the contract's shape stays as it is).
	Redacted []string `json:"redacted,omitempty"`
}

// PostMessage posts to the room. Room chat needs only an active agreement for a guest.
// Always-on agents of the room are woken (the wake engine applies budgets).
func (s *Service) PostMessage(ctx context.Context, sc tenancy.Scope, content string) (PostResult, error) {
	if err := requireAgreement(sc); err != nil {
		return PostResult{}, err
	}
	if strings.TrimSpace(content) == "" {
		return PostResult{}, invalid("content must not be blank")
	}
	// The tool's schema says so too; a person's post from the dashboard reaches only this,
	// and past the column's bound it failed as an internal error.
	if n := utf8.RuneCountInString(content); n > MaxPost {
		return PostResult{}, invalid("content must hold at most %d characters (it holds %d)", MaxPost, n)
	}
	var redacted []string
	content, err := s.mask(content, maxMessageRunes, &redacted)
	if err != nil {
		return PostResult{}, err
	}
	id, at := newID(), s.now()
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		// The insert returns nothing anyone reads: it travels with the members' lookup.
		return tx.Pipeline(func() error { return s.postMessage(ctx, tx, sc, id, content, at) })
	})
	if err != nil {
		return PostResult{}, pg.Classify("post message", err)
	}
	return PostResult{Success: true, MessageID: id.String(), PostedAt: ts(at), VisibleTo: VisibleToAll, Redacted: redacted}, nil
}

// Column bounds a masked text must still fit: a marker can be longer than the secret it
// replaces. A room message holds up to 50,000 characters (migrations 000060 and 000061)
// so that a task's response card carries the whole result after its prefix.
const (
	maxMessageRunes = 50000 // room_message.content
	maxGoalRunes    = 5000  // room_task.goal
)

// mask replaces secrets in a text that room chat or a task stores and shows, and adds the
// kinds it masked to *kinds. These channels have no content check in the rooms contract,
// so nothing is refused: the secret is masked, and the call answers as it always does
// plus a redacted list naming the kinds, so the writer knows the room reads a marker
// (docs/secrets.md).
func (s *Service) mask(text string, maxRunes int, kinds *[]string) (string, error) {
	if s.Secrets == nil {
		return "", errors.New("rooms: no secret detector configured")
	}
	return s.Secrets.MaskAdding(text, maxRunes, kinds), nil
}

// postMessage stores the message and wakes the room's always-on agents.
func (s *Service) postMessage(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, id uuid.UUID, content string, at time.Time) error {
	var err error
	if sc.IsPerson() {
		// A person's post (the dashboard): agents read it as "Name [Organisation] (human)".
		err = s.Q.RoomMessageInsertFromPerson(ctx, tx, db.RoomMessageInsertFromPersonParams{
			ProjectID: sc.ProjectID, ID: id, AuthorUserID: &sc.Person.UserID, AuthorName: &sc.Person.Name, AuthorOrgID: &sc.OrgID,
			Content: content, CreatedAt: at,
		})
	} else {
		err = s.Q.RoomMessageInsert(ctx, tx, db.RoomMessageInsertParams{
			ProjectID: sc.ProjectID, ID: id, Kind: "message", AuthorAgentID: &sc.AgentID, AuthorOrgID: &sc.OrgID,
			AuthorModel: sc.AgentModel, Content: content, CreatedAt: at,
		})
	}
	if err != nil {
		return err
	}
	s.roomChanged(tx, sc.ProjectID)
	if s.Wakes == nil {
		return nil
	}
	// Only always-on agents are woken; the lookup keeps them, so the wake needs no
	// filter of its own (AlwaysOnOnly would read them again: one more round trip).
	others, err := s.Q.RoomMemberListAlwaysOn(ctx, tx, db.RoomMemberListAlwaysOnParams{ProjectID: sc.ProjectID, AgentID: sc.AgentID})
	if err != nil {
		return err
	}
	return s.queueWake(ctx, tx, wake.Request{ProjectID: sc.ProjectID, HostOrgID: sc.HostOrgID, MemberIDs: others, Source: "room_message",
		ItemID: id, Broadcast: true})
}

// Message is one message of get_messages.
type Message struct {
	ID        string `json:"id"`
	From      string `json:"from"`
	Content   string `json:"content"`
	Timestamp string `json:"timestamp"`
}

// MessagesResult is get_messages' answer.
// MaxMessagesBytes bounds the content one get_messages answer holds, as JSON writes it
// (never fewer than one message): 100 messages of 10,000 control characters, six bytes
// each once written and held twice in the answer, made 12 MB a call.
const MaxMessagesBytes = 1 << 20

type MessagesResult struct {
	Messages []Message `json:"messages"`
	Count    int       `json:"count"`
	// Truncated is true when MaxMessagesBytes cut the answer short of limit: without it,
	// fewer messages than limit read as a room that holds no more. It is left out of a
	// whole answer, which keeps the contract's {messages, count}.
	Truncated bool `json:"truncated,omitempty"`
}

// parseCursor reads get_messages' before: nil for none, a message id otherwise. A value
// that cannot be an id answers like an id that does not exist.
func parseCursor(before string) (*uuid.UUID, error) {
	if before = strings.TrimSpace(before); before == "" {
		return nil, nil
	}
	id, err := uuid.Parse(before)
	if err != nil {
		return nil, messageNotFound(before)
	}
	return &id, nil
}

func messageNotFound(before string) error {
	return apperr.New(apperr.NotFound, "Message not found: %s", before)
}

// GetMessages returns the newest limit messages (before a message id when given), oldest
// first, memory and task cards included.
func (s *Service) GetMessages(ctx context.Context, sc tenancy.Scope, limit int, before string) (MessagesResult, error) {
	if err := requireAgreement(sc); err != nil {
		return MessagesResult{}, err
	}
	if limit <= 0 {
		limit = 20
	}
	cursor, err := parseCursor(before)
	if err != nil {
		return MessagesResult{}, err
	}
	var rows []db.RoomMessageListRow
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		if cursor != nil {
			ok, err := s.Q.RoomMessageExists(ctx, tx, db.RoomMessageExistsParams{ProjectID: sc.ProjectID, ID: *cursor})
			if err != nil {
				return err
			}
			if !ok {
				return messageNotFound(strings.TrimSpace(before))
			}
		}
		// The joins' row-level security policies make planning cost ~1.5 ms, ten times
		// the execution; the generic plan (a backward scan of the room's primary key) is
		// the right one for every room, so let the prepared statement keep it.
		// (Sent with the query: no round trip of its own.)
		tx.PreferGenericPlan()
		tx.CommitWithNext(ctx) // the last read: no round trip for the COMMIT
		// No cursor: before the largest uuid, which every id is.
		p := db.RoomMessageListParams{ProjectID: sc.ProjectID, Before: uuid.Max}
		if cursor != nil {
			p.Before = *cursor
		}
		var err error
		rows, err = s.Q.RoomMessageList(ctx, tx, p)
		return err
	})
	if err != nil {
		return MessagesResult{}, pg.Classify("get messages", err)
	}
	rows = rows[:min(limit, len(rows))]
	size, truncated := 0, false
	for i, r := range rows { // newest first
		if size += text.JSONSize(r.Content); i > 0 && size > MaxMessagesBytes {
			rows, truncated = rows[:i], true // the older ones are read with before, from the oldest given
			break
		}
	}
	slices.Reverse(rows)
	out := MessagesResult{Messages: make([]Message, 0, len(rows)), Count: len(rows), Truncated: truncated}
	readsMemory := sc.Granted(tenancy.GrantReadMemory)
	for _, r := range rows {
		content := r.Content
		if r.Kind == cardMemory && !readsMemory {
			content = memoryCardWithheld
		}
		out.Messages = append(out.Messages, Message{ID: r.ID.String(), From: messageFrom(r), Content: content, Timestamp: ts(r.CreatedAt)})
	}
	return out, nil
}

// messageFrom is "Name [Organisation] (agent · model)" or "Name [Organisation] (human)".
func messageFrom(r db.RoomMessageListRow) string {
	org := orUnknown(r.OrgName, "Unknown org")
	// A person's name is the one kept with the message (every company reads it); the
	// directory's is only the caller's own organisation's, for messages from before.
	name := r.AuthorName
	if name == nil || *name == "" {
		name = r.UserName
	}
	if r.AuthorUserID != nil || (r.AuthorAgentID == nil && name != nil) {
		return fmt.Sprintf("%s [%s] (human)", orUnknown(name, "Human"), org)
	}
	kind := "agent"
	if r.AuthorModel != "" {
		kind += " · " + r.AuthorModel
	}
	return fmt.Sprintf("%s [%s] (%s)", orUnknown(r.AgentName, "Agent"), org, kind)
}
