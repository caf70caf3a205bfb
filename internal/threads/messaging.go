package threads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wake"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// Waker queues wakes for the parts a new message is for, withdraws a message from them
// when it is acked, and cancels a thread's pending wakes when it ends. Both run inside the transaction that stored the work, so a committed
// message always has its wake and a rolled-back one never does. internal/wake implements
// it; a nil Waker means wakes are disabled (messages are still delivered to inboxes).
type Waker interface {
	Queue(ctx context.Context, tx *pg.Tx, r wake.Request) error
	CancelThread(ctx context.Context, tx *pg.Tx, projectID, threadID uuid.UUID) error
	// Withdraw takes an acked message out of the part's wakes not delivered yet.
	Withdraw(ctx context.Context, tx *pg.Tx, projectID, memberID, threadID, messageID uuid.UUID) error
}

// Limits of the toolset (also stated in the tools' schemas).
const (
	MaxRecipients  = 50
	MaxSubject     = 200
	MaxBody        = 20000
	MaxInbox       = 50
	DefaultInbox   = 20
	MaxThreads     = 50
	PreviewRunes   = 160
	Broadcast      = "*"
	CapUrgent      = tenancy.CapUrgent
	CapNeedsHuman  = tenancy.CapNeedsHuman
	ComposingFor   = 10 * time.Second
	MaxParkWindow  = 24 * time.Hour
	DefaultIdle    = 30 * time.Minute
	idleCloseBatch = 500
)

// Thread statuses.
const (
	StatusOpen     = "open"
	StatusClosed   = "closed"
	StatusCanceled = "canceled"
)

// Time is a timestamp on the wire (internal/wiretime: UTC, milliseconds).
type Time = wiretime.Time

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now().UTC()
}

func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

func parseID(name, v string) (uuid.UUID, error) {
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, apperr.New(apperr.Invalid, "%s %q is not an id", name, v).WithReason(apperr.ReasonInvalidArgument)
	}
	return id, nil
}

func threadNotFound(id string) error {
	return apperr.New(apperr.NotFound, "no thread %s in this project", id).WithReason(ReasonThreadNotFound)
}

// SendInput is send's arguments.
type SendInput struct {
	To         []string `json:"to"`
	Subject    string   `json:"subject"`
	Body       string   `json:"body"`
	Urgent     bool     `json:"urgent,omitempty"`
	NeedsHuman bool     `json:"needsHuman,omitempty"`
}

// SendResult is send's answer.
type SendResult struct {
	ThreadID  string   `json:"threadId"`
	MessageID string   `json:"messageId"`
	To        []string `json:"to"`
	// Redacted names the kinds of secret masked in the subject or body (as learn's answer
	// does), so the sender knows the recipients read a marker, not what it wrote. Absent
	// when nothing was masked.
	Redacted []string `json:"redacted,omitempty"`
}

// checkFlags refuses urgent without the capability and drops needsHuman without it.
func checkFlags(sc tenancy.Scope, urgent, needsHuman bool) (bool, error) {
	if urgent && !sc.HasCapability(CapUrgent) {
		return false, apperr.New(apperr.Forbidden, "urgent needs the urgent capability, which a manager grants to a part; send without urgent").WithReason(ReasonCapabilityRequired)
	}
	return needsHuman && sc.HasCapability(CapNeedsHuman), nil
}

// Send starts a thread addressed to parts, or to every other part with ["*"]. All or
// nothing: an unknown part fails the call and nothing is delivered.
func (s *Service) Send(ctx context.Context, sc tenancy.Scope, in SendInput) (SendResult, error) {
	needsHuman, err := checkFlags(sc, in.Urgent, in.NeedsHuman)
	if err != nil {
		return SendResult{}, err
	}
	if strings.TrimSpace(in.Subject) == "" || strings.TrimSpace(in.Body) == "" {
		return SendResult{}, apperr.New(apperr.Invalid, "subject and body must not be blank").WithReason(apperr.ReasonInvalidArgument)
	}
	var redacted []string
	if in.Subject, err = s.mask(in.Subject, MaxSubject, &redacted); err != nil {
		return SendResult{}, err
	}
	if in.Body, err = s.mask(in.Body, MaxBody, &redacted); err != nil {
		return SendResult{}, err
	}
	broadcast := slices.Contains(in.To, Broadcast)
	if broadcast && len(in.To) != 1 {
		return SendResult{}, apperr.New(apperr.Invalid, `"*" (every other part) cannot be combined with part names`).WithReason(ReasonInvalidRecipient)
	}
	var parts []string
	if !broadcast {
		seen := map[string]bool{}
		for _, p := range in.To {
			if p == sc.Part {
				return SendResult{}, apperr.New(apperr.Invalid, "you cannot send to your own part %q", p).WithReason(ReasonInvalidRecipient)
			}
			if !seen[p] {
				seen[p] = true
				parts = append(parts, p)
			}
		}
	}
	now := s.now()
	res := SendResult{ThreadID: newID().String(), MessageID: newID().String(), Redacted: redacted}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		var ids []uuid.UUID
		if broadcast {
			rows, err := s.Q.MembershipListOthers(ctx, tx, db.MembershipListOthersParams{ProjectID: sc.ProjectID, MemberID: sc.MemberID})
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return apperr.New(apperr.Invalid, "there is no other part in this project to broadcast to").WithReason(ReasonInvalidRecipient)
			}
			for _, r := range rows {
				ids, res.To = append(ids, r.ID), append(res.To, r.Part)
			}
		} else {
			rows, err := s.Q.MembershipListByParts(ctx, tx, db.MembershipListByPartsParams{ProjectID: sc.ProjectID, Parts: parts})
			if err != nil {
				return err
			}
			byPart := make(map[string]uuid.UUID, len(rows))
			for _, r := range rows {
				byPart[r.Part] = r.ID
			}
			var unknown []string
			for _, p := range parts {
				id, ok := byPart[p]
				if !ok {
					unknown = append(unknown, p)
					continue
				}
				ids, res.To = append(ids, id), append(res.To, p)
			}
			if len(unknown) > 0 {
				return apperr.New(apperr.NotFound, "no part named %s in this project (see roster); nothing was sent", quoteList(unknown)).WithReason(ReasonUnknownPart)
			}
		}
		tid, mid := uuid.MustParse(res.ThreadID), uuid.MustParse(res.MessageID)
		sender := sc.MemberID
		return tx.Pipeline(func() error {
			if err := s.Q.ThreadInsert(ctx, tx, db.ThreadInsertParams{ProjectID: sc.ProjectID, ID: tid, Subject: in.Subject, CreatedBy: &sender, NeedsHuman: needsHuman, Now: now}); err != nil {
				return err
			}
			return s.storeMessage(ctx, tx, sc, tid, mid, in.Body, in.Urgent, needsHuman, broadcast, ids, now)
		})
	})
	if err != nil {
		return SendResult{}, pg.Classify("send", err)
	}
	return res, nil
}

// mask replaces secrets in a subject or body and adds the kinds it masked to *kinds. The
// threads contract lists no content check for messages, so nothing is refused: what is
// stored (and so shown by inbox, show, threads and search) carries [REDACTED:<kind>]
// markers, cut to the column's bound if the markers made it longer, and the answer gains
// a redacted list (docs/secrets.md).
func (s *Service) mask(text string, maxRunes int, kinds *[]string) (string, error) {
	if s.Secrets == nil {
		return "", errors.New("threads: no secret detector configured")
	}
	return s.Secrets.MaskAdding(text, maxRunes, kinds), nil
}

// storeMessage writes a message, its participants and inbox rows, and queues its wake.
func (s *Service) storeMessage(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, threadID, messageID uuid.UUID, body string, urgent, needsHuman, broadcast bool, recipients []uuid.UUID, now time.Time) error {
	sender := sc.MemberID
	// The inserts return nothing anyone reads: they travel with the wake's statement (or
	// the COMMIT) in one round trip instead of one each.
	return tx.Pipeline(func() error {
		return s.storeMessagePipelined(ctx, tx, sc, sender, threadID, messageID, body, urgent, needsHuman, broadcast, recipients, now)
	})
}

func (s *Service) storeMessagePipelined(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, sender, threadID, messageID uuid.UUID, body string, urgent, needsHuman, broadcast bool, recipients []uuid.UUID, now time.Time) error {
	s.changed(tx, sc.ProjectID) // the dashboard's thread pages show it live
	if err := s.Q.MessageInsert(ctx, tx, db.MessageInsertParams{ProjectID: sc.ProjectID, ID: messageID, ThreadID: threadID, SenderID: &sender,
		FromPart: sc.Part, Body: body, Urgent: urgent, NeedsHuman: needsHuman, Broadcast: broadcast, Now: now}); err != nil {
		return err
	}
	if err := s.Q.ParticipantAdd(ctx, tx, db.ParticipantAddParams{ProjectID: sc.ProjectID, ThreadID: threadID, Now: now,
		MemberIds: append([]uuid.UUID{sender}, recipients...)}); err != nil {
		return err
	}
	if len(recipients) == 0 {
		return nil
	}
	if err := s.Q.DeliveryInsert(ctx, tx, db.DeliveryInsertParams{ProjectID: sc.ProjectID, MessageID: messageID, ThreadID: threadID, MemberIds: recipients}); err != nil {
		return err
	}
	if s.Waker == nil {
		return nil
	}
	return s.Waker.Queue(ctx, tx, wake.Request{ProjectID: sc.ProjectID, HostOrgID: sc.HostOrgID, MemberIDs: recipients, Source: "message",
		ThreadID: threadID, ItemID: messageID, At: now, Urgent: urgent, Broadcast: broadcast})
}

// ReplyInput is reply's arguments.
type ReplyInput struct {
	ThreadID   string `json:"threadId"`
	Body       string `json:"body"`
	Urgent     bool   `json:"urgent,omitempty"`
	NeedsHuman bool   `json:"needsHuman,omitempty"`
}

// ReplyResult is reply's answer.
type ReplyResult struct {
	ThreadID  string `json:"threadId"`
	MessageID string `json:"messageId"`
	// Redacted is as in SendResult.
	Redacted []string `json:"redacted,omitempty"`
}

// Reply adds a message to an open thread of the project, for every other participant;
// the caller becomes a participant.
func (s *Service) Reply(ctx context.Context, sc tenancy.Scope, in ReplyInput) (ReplyResult, error) {
	tid, err := parseID("threadId", in.ThreadID)
	if err != nil {
		return ReplyResult{}, err
	}
	needsHuman, err := checkFlags(sc, in.Urgent, in.NeedsHuman)
	if err != nil {
		return ReplyResult{}, err
	}
	if strings.TrimSpace(in.Body) == "" {
		return ReplyResult{}, apperr.New(apperr.Invalid, "body must not be blank").WithReason(apperr.ReasonInvalidArgument)
	}
	var redacted []string
	if in.Body, err = s.mask(in.Body, MaxBody, &redacted); err != nil {
		return ReplyResult{}, err
	}
	now := s.now()
	res := ReplyResult{ThreadID: tid.String(), MessageID: newID().String(), Redacted: redacted}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		t, err := s.Q.ThreadShare(ctx, tx, db.ThreadShareParams{ProjectID: sc.ProjectID, ID: tid})
		if pg.IsNoRows(err) {
			return threadNotFound(in.ThreadID)
		}
		if err != nil {
			return err
		}
		if t.Status != StatusOpen {
			return apperr.New(apperr.Conflict, "thread %s is %s and takes no more replies; start a new thread with send", tid, t.Status).WithReason(endedReason(t.Status))
		}
		recipients, err := s.Q.ThreadListRecipients(ctx, tx, db.ThreadListRecipientsParams{ProjectID: sc.ProjectID, ThreadID: tid, SenderID: sc.MemberID})
		if err != nil {
			return err
		}
		// The touch returns nothing anyone reads: it travels with the message's inserts and
		// the COMMIT (storeMessage pipelines them) instead of costing a round trip.
		return tx.Pipeline(func() error {
			if err := s.Q.ThreadTouch(ctx, tx, db.ThreadTouchParams{Now: now, NeedsHuman: needsHuman, ProjectID: sc.ProjectID, ID: tid}); err != nil {
				return err
			}
			return s.storeMessage(ctx, tx, sc, tid, uuid.MustParse(res.MessageID), in.Body, in.Urgent, needsHuman, false, recipients, now)
		})
	})
	if err != nil {
		return ReplyResult{}, pg.Classify("reply", err)
	}
	return res, nil
}

// InboxInput is inbox's arguments.
type InboxInput struct {
	UnreadOnly bool    `json:"unreadOnly,omitempty"`
	Limit      int     `json:"limit,omitempty"`
	Before     *string `json:"before,omitempty"`
}

// InboxItem is one token-lean preview, exactly the spec's fields.
type InboxItem struct {
	MessageID string `json:"messageId"`
	ThreadID  string `json:"threadId"`
	Subject   string `json:"subject"`
	From      string `json:"from"`
	Unread    bool   `json:"unread"`
	At        Time   `json:"at"`
	Preview   string `json:"preview"`
}

// cursor is the id a page starts before: the given one, or the largest uuid for the first
// page (the list queries compare with it instead of a "cursor IS NULL OR …" that plans
// badly).
func cursor(before *string) (uuid.UUID, error) {
	if before == nil {
		return uuid.Max, nil
	}
	return parseID("before", *before)
}

// Inbox lists messages addressed to the caller in open threads, newest first. It never
// changes state: reading is not acknowledging.
func (s *Service) Inbox(ctx context.Context, sc tenancy.Scope, in InboxInput) ([]InboxItem, error) {
	if in.Limit <= 0 {
		in.Limit = DefaultInbox
	}
	in.Limit = min(in.Limit, MaxInbox)
	before, err := cursor(in.Before)
	if err != nil {
		return nil, err
	}
	out := make([]InboxItem, 0, in.Limit)
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		tx.CommitWithNext(ctx) // a read of one statement: no round trip for the COMMIT
		if in.UnreadOnly {
			rows, err := s.Q.DeliveryListInboxUnread(ctx, tx, db.DeliveryListInboxUnreadParams{ProjectID: sc.ProjectID, MemberID: sc.MemberID, Before: before, Lim: int32(in.Limit)})
			for _, r := range rows {
				out = append(out, InboxItem{MessageID: r.MessageID.String(), ThreadID: r.ThreadID.String(), Subject: r.Subject, From: r.FromPart,
					Unread: true, At: Time(r.CreatedAt), Preview: inboxPreview(r.BodyHead)})
			}
			return err
		}
		rows, err := s.Q.DeliveryListInbox(ctx, tx, db.DeliveryListInboxParams{ProjectID: sc.ProjectID, MemberID: sc.MemberID, Before: before, Lim: int32(in.Limit)})
		for _, r := range rows {
			out = append(out, InboxItem{MessageID: r.MessageID.String(), ThreadID: r.ThreadID.String(), Subject: r.Subject, From: r.FromPart,
				Unread: r.Unread, At: Time(r.CreatedAt), Preview: inboxPreview(r.BodyHead)})
		}
		return err
	})
	if err != nil {
		return nil, pg.Classify("inbox", err)
	}
	return out, nil
}

// previewHeadRunes is how much of a body the inbox reads for its preview: enough for
// PreviewRunes after ordinary white space collapses. DeliveryListInbox reads one more
// character, which says that more followed.
const previewHeadRunes = 600

// inboxPreview is Preview of a body read as its first previewHeadRunes+1 characters. A
// head that long was cut, so its preview ends in "…" even when its first 600 characters
// collapse to fewer than PreviewRunes (a long run of blanks), instead of passing for the
// whole message.
func inboxPreview(head string) string {
	cut := false
	if len(head) > previewHeadRunes && utf8.RuneCountInString(head) > previewHeadRunes {
		_, size := utf8.DecodeLastRuneInString(head)
		head, cut = head[:len(head)-size], true
	}
	p := Preview(head)
	if cut && !strings.HasSuffix(p, "…") {
		p += "…"
	}
	return p
}

// Preview collapses a body to one line (every run of white space becomes one space) and
// cuts it to PreviewRunes characters, ending in "…" when something was cut.
func Preview(body string) string {
	if previewIsBody(body) {
		return body // most bodies of a busy inbox: nothing to collapse or cut, no copy
	}
	return previewCopy(body)
}

// previewCopy is Preview's collapsing copy.
func previewCopy(body string) string {
	var b strings.Builder
	b.Grow(min(len(body), previewMaxBytes))
	space := false
	n := 0
	for _, r := range body {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			if n+1 >= PreviewRunes {
				return strings.TrimSpace(b.String()) + "…"
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= PreviewRunes {
			return strings.TrimRightFunc(b.String(), unicode.IsSpace) + "…"
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// previewMaxBytes bounds what Preview writes before its "…": PreviewRunes runes of at
// most 4 bytes each.
const previewMaxBytes = PreviewRunes * utf8.UTFMax

// previewIsBody reports whether Preview would return body unchanged: valid UTF-8 of at
// most PreviewRunes runes whose only white space is single spaces between other runes.
func previewIsBody(body string) bool {
	n := 0
	space := true // a leading space is collapsed away
	for _, r := range body {
		n++
		if n > PreviewRunes {
			return false
		}
		if r == ' ' {
			if space {
				return false
			}
			space = true
			continue
		}
		// RuneError: invalid UTF-8, which Preview's copy replaces.
		if r == utf8.RuneError || unicode.IsSpace(r) {
			return false
		}
		space = false
	}
	return !space || body == ""
}

// AckResult is ack's answer.
type AckResult struct {
	MessageID string `json:"messageId"`
	Unread    bool   `json:"unread"`
}

// Ack marks a message of the caller's inbox read. Acking twice is fine.
func (s *Service) Ack(ctx context.Context, sc tenancy.Scope, messageID string) (AckResult, error) {
	mid, err := parseID("messageId", messageID)
	if err != nil {
		return AckResult{}, err
	}
	now := s.now()
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		row, err := s.Q.DeliveryAck(ctx, tx, db.DeliveryAckParams{Now: &now, ProjectID: sc.ProjectID, MemberID: sc.MemberID, MessageID: mid})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no message %s addressed to your part", messageID).WithReason(ReasonMessageNotFound)
		}
		if err != nil {
			return err
		}
		s.changed(tx, sc.ProjectID) // the thread view shows who read what, live
		if s.Waker == nil {
			return nil
		}
		// A message the part has read needs no nudge: it leaves the wakes not sent yet.
		return s.Waker.Withdraw(ctx, tx, sc.ProjectID, sc.MemberID, row.ThreadID, mid)
	})
	if err != nil {
		return AckResult{}, pg.Classify("ack", err)
	}
	return AckResult{MessageID: mid.String(), Unread: false}, nil
}

// ThreadsInput is threads' arguments.
type ThreadsInput struct {
	Query  *string `json:"query,omitempty"`
	Status *string `json:"status,omitempty"`
	Limit  int     `json:"limit,omitempty"`
	// Before pages: only threads older than this thread id (the last of a previous page).
	Before *string `json:"before,omitempty"`
}

// ThreadSummary is a thread in a list.
type ThreadSummary struct {
	ID        string `json:"id"`
	Subject   string `json:"subject"`
	Status    string `json:"status"`
	CreatedAt Time   `json:"createdAt"`
}

// SearchHit is a thread found by search.
type SearchHit struct {
	ThreadID  string `json:"threadId"`
	Subject   string `json:"subject"`
	Status    string `json:"status"`
	CreatedAt Time   `json:"createdAt"`
}

// Threads lists the threads the caller takes part in, newest first, optionally filtered
// by status and by a substring of the subject or any message.
func (s *Service) Threads(ctx context.Context, sc tenancy.Scope, in ThreadsInput) ([]ThreadSummary, error) {
	if in.Limit <= 0 {
		in.Limit = MaxThreads
	}
	in.Limit = min(in.Limit, MaxThreads)
	var pattern *string
	if in.Query != nil && strings.TrimSpace(*in.Query) != "" {
		p := pg.LikeSubstring(*in.Query)
		pattern = &p
	}
	before, err := cursor(in.Before)
	if err != nil {
		return nil, err
	}
	rows, err := pg.ReadOne(ctx, s.DB, sc.Tenant(), "threads", func(tx *pg.Tx) ([]db.ThreadListMineRow, error) {
		return s.Q.ThreadListMine(ctx, tx, db.ThreadListMineParams{ProjectID: sc.ProjectID, MemberID: sc.MemberID, Before: before,
			Status: in.Status, Pattern: pattern, Lim: int32(in.Limit)})
	})
	if err != nil {
		return nil, err
	}
	out := make([]ThreadSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, ThreadSummary{ID: r.ID.String(), Subject: r.Subject, Status: r.Status, CreatedAt: Time(r.CreatedAt)})
	}
	return out, nil
}

// SearchInput is search's arguments.
type SearchInput struct {
	Query string `json:"query"`
	// Before pages: only threads older than this thread id (the last of a previous page).
	Before *string `json:"before,omitempty"`
}

// Search finds threads of the project the caller does not take part in, by a
// case-insensitive substring of the subject or of any message body.
func (s *Service) Search(ctx context.Context, sc tenancy.Scope, in SearchInput) ([]SearchHit, error) {
	if utf8.RuneCountInString(strings.TrimSpace(in.Query)) < MinSearchQuery {
		return nil, apperr.New(apperr.Invalid, "query needs at least %d characters", MinSearchQuery).WithReason(apperr.ReasonInvalidArgument)
	}
	before, err := cursor(in.Before)
	if err != nil {
		return nil, err
	}
	rows, err := pg.ReadOne(ctx, s.DB, sc.Tenant(), "search", func(tx *pg.Tx) ([]db.ThreadSearchOthersRow, error) {
		return s.Q.ThreadSearchOthers(ctx, tx, db.ThreadSearchOthersParams{ProjectID: sc.ProjectID, MemberID: sc.MemberID,
			Pattern: pg.LikeSubstring(in.Query), Lim: MaxThreads, Before: before})
	})
	if err != nil {
		return nil, err
	}
	out := make([]SearchHit, 0, len(rows))
	for _, r := range rows {
		out = append(out, SearchHit{ThreadID: r.ID.String(), Subject: r.Subject, Status: r.Status, CreatedAt: Time(r.CreatedAt)})
	}
	return out, nil
}

// ShownMessage is a message in show.
type ShownMessage struct {
	ID        string `json:"id"`
	From      string `json:"from"`
	Body      string `json:"body"`
	CreatedAt Time   `json:"createdAt"`
}

// ShowResult is show's answer.
type ShowResult struct {
	Thread struct {
		ID        string `json:"id"`
		Subject   string `json:"subject"`
		Status    string `json:"status"`
		CreatedAt Time   `json:"createdAt"`
	} `json:"thread"`
	Messages  []ShownMessage `json:"messages"`
	Composing []string       `json:"composing,omitempty"`
	// Before is set when the thread holds older messages than those shown: show with it
	// as before reads the page before them.
	Before string `json:"before,omitempty"`
}

// A page of show: the newest messages (before the message `before`, when given), at most
// ShowMaxMessages of them and ShowMaxBytes of bodies as JSON writes them (a control
// character takes six bytes), never fewer than one. A thread has
// no bound of its own (replies are never refused for its size), and show returned every
// message: 400 replies of 20,000 characters made one answer of 104 MB, and 20 of them
// at once took the server to 5 GB.
const (
	ShowMaxMessages = 200
	ShowMaxBytes    = 1 << 20
)

// ShowInput is show's arguments.
type ShowInput struct {
	ThreadID string  `json:"threadId"`
	Before   *string `json:"before,omitempty"`
}

// Show returns a thread of the project and its newest messages in order (ShowPage's first
// page). It changes nothing.
func (s *Service) Show(ctx context.Context, sc tenancy.Scope, threadID string) (ShowResult, error) {
	return s.ShowPage(ctx, sc, ShowInput{ThreadID: threadID})
}

// ShowPage returns a thread of the project and a page of its messages in order: the
// newest, or those before in.Before; ShowResult.Before names the next page back.
func (s *Service) ShowPage(ctx context.Context, sc tenancy.Scope, in ShowInput) (ShowResult, error) {
	tid, err := parseID("threadId", in.ThreadID)
	if err != nil {
		return ShowResult{}, err
	}
	var before *uuid.UUID
	if in.Before != nil {
		id, err := parseID("before", *in.Before)
		if err != nil {
			return ShowResult{}, err
		}
		before = &id
	}
	rows, err := pg.ReadOne(ctx, s.DB, sc.Tenant(), "show", func(tx *pg.Tx) ([]db.ThreadShowRow, error) {
		return s.Q.ThreadShow(ctx, tx, db.ThreadShowParams{ProjectID: sc.ProjectID, ID: tid, Now: s.now(), Before: before})
	})
	if err != nil {
		return ShowResult{}, err
	}
	if len(rows) == 0 {
		return ShowResult{}, threadNotFound(in.ThreadID)
	}
	t := rows[0]
	var res ShowResult
	res.Thread.ID, res.Thread.Subject, res.Thread.Status, res.Thread.CreatedAt = t.ID.String(), t.Subject, t.Status, Time(t.CreatedAt)
	res.Composing = t.Composing
	res.Messages = make([]ShownMessage, 0, min(len(rows), ShowMaxMessages))
	size := 0
	for _, m := range rows { // newest first
		if m.MessageID == nil {
			continue // a thread without messages (or none before `before`): its one row has none
		}
		size += text.JSONSize(*m.Body)
		if len(res.Messages) == ShowMaxMessages || (len(res.Messages) > 0 && size > ShowMaxBytes) {
			res.Before = res.Messages[len(res.Messages)-1].ID
			break
		}
		res.Messages = append(res.Messages, ShownMessage{ID: m.MessageID.String(), From: *m.FromPart, Body: *m.Body, CreatedAt: Time(*m.MessageCreatedAt)})
	}
	slices.Reverse(res.Messages)
	return res, nil
}

// CloseInput is close's arguments.
type CloseInput struct {
	ThreadID string                 `json:"threadId"`
	Lesson   *knowledge.LessonInput `json:"lesson,omitempty"`
}

// CloseResult is close's answer, as the spec shows it.
type CloseResult struct {
	OK       bool                     `json:"ok"`
	ThreadID string                   `json:"threadId"`
	Status   string                   `json:"status"`
	Lesson   *knowledge.LessonOutcome `json:"lesson,omitempty"`
}

// Close ends a thread the caller takes part in. It is idempotent and reports the status
// the thread really has (canceled when a person canceled it). The thread leaves every
// participant's inbox, its unread is marked read and its pending wakes are canceled.
// A lesson is decided in the same transaction; losing it never costs the close, except
// for an infrastructure failure, which fails the close as a whole (nothing committed).
func (s *Service) Close(ctx context.Context, sc tenancy.Scope, in CloseInput) (CloseResult, error) {
	tid, err := parseID("threadId", in.ThreadID)
	if err != nil {
		return CloseResult{}, err
	}
	now := s.now()
	res := CloseResult{OK: true, ThreadID: tid.String()}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		t, err := s.Q.ThreadLock(ctx, tx, db.ThreadLockParams{ProjectID: sc.ProjectID, ID: tid})
		if pg.IsNoRows(err) {
			return threadNotFound(in.ThreadID)
		}
		if err != nil {
			return err
		}
		member, err := s.Q.ParticipantExists(ctx, tx, db.ParticipantExistsParams{ProjectID: sc.ProjectID, ThreadID: tid, MemberID: sc.MemberID})
		if err != nil {
			return err
		}
		if !member {
			return apperr.New(apperr.Forbidden, "only a participant can close thread %s; reply to it first if it concerns you", tid).WithReason(ReasonNotParticipant)
		}
		res.Status = t.Status
		if t.Status == StatusOpen {
			closedBy, member := "agent", sc.MemberID
			if err := s.Q.ThreadEnd(ctx, tx, db.ThreadEndParams{Status: StatusClosed, Now: &now, ClosedBy: &closedBy, ClosedByMember: &member, ProjectID: sc.ProjectID, ID: tid}); err != nil {
				return err
			}
			res.Status = StatusClosed
			if err := s.endThread(ctx, tx, sc.ProjectID, tid, now); err != nil {
				return err
			}
		}
		if in.Lesson == nil {
			return nil
		}
		if s.Knowledge == nil {
			return apperr.New(apperr.Unavailable, "the knowledge base is not configured")
		}
		out, err := s.Knowledge.Lesson(ctx, tx, sc, knowledge.LessonRequest{LessonInput: *in.Lesson, ThreadID: tid,
			Canceled: res.Status == StatusCanceled, AlreadyDecided: t.LessonOutcome != nil})
		if err != nil {
			return err // infrastructure: the close fails with it
		}
		res.Lesson = &out
		if t.LessonOutcome == nil && out.Settles() {
			o := out.Outcome()
			return s.Q.ThreadSetLessonOutcome(ctx, tx, db.ThreadSetLessonOutcomeParams{Outcome: &o, ProjectID: sc.ProjectID, ID: tid})
		}
		return nil
	})
	if err != nil {
		return CloseResult{}, pg.Classify("close", err)
	}
	return res, nil
}

// endThread takes a finished thread out of every inbox, marks its unread read and cancels
// its pending wakes.
func (s *Service) endThread(ctx context.Context, tx *pg.Tx, projectID, threadID uuid.UUID, now time.Time) error {
	s.changed(tx, projectID)
	if err := s.Q.DeliveryClose(ctx, tx, db.DeliveryCloseParams{Now: &now, ProjectID: projectID, ThreadID: threadID}); err != nil {
		return err
	}
	if s.Waker == nil {
		return nil
	}
	return s.Waker.CancelThread(ctx, tx, projectID, threadID)
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// endedReason is the reason of a reply refused because the thread ended: it names the
// thread's status.
func endedReason(status string) string {
	if status == StatusCanceled {
		return ReasonThreadCanceled
	}
	return ReasonThreadClosed
}
