package desk

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Tool names of the contract.
const (
	ToolSearchConversations = "relaydesk_search_conversations"
	ToolGetConversation     = "relaydesk_get_conversation"
	ToolListInboxes         = "relaydesk_list_inboxes"
	ToolFindSavedReplies    = "relaydesk_find_saved_replies"
	ToolGetReport           = "relaydesk_get_report"
	ToolAddPrivateNote      = "relaydesk_add_private_note"
)

// Messages of NOT_FOUND: the same for an id that does not exist, one of another
// workspace, one the member may not see and one that is not an id at all.
const (
	MsgConversationNotFound = "Conversation not found, or not accessible to you."
	MsgInboxNotFound        = "Inbox not found, or not accessible to you."
)

func conversationNotFound() error { return apperr.New(apperr.NotFound, MsgConversationNotFound) }
func inboxNotFound() error        { return apperr.New(apperr.NotFound, MsgInboxNotFound) }

// visibleInbox resolves an inbox_id argument to an inbox the caller sees; NOT_FOUND
// otherwise, the same for an absent, a foreign, a hidden and a malformed id.
func (s *Service) visibleInbox(ctx context.Context, tx *pg.Tx, c caller, public string) (int64, error) {
	id, ok := parseID(PrefixInbox, public)
	if !ok {
		return 0, inboxNotFound()
	}
	visible, err := s.q.DeskInboxVisible(ctx, tx, db.DeskInboxVisibleParams{OrgID: c.org, ID: id, SeesAll: c.seesAll(), UserID: c.user})
	if err != nil {
		return 0, err
	}
	if !visible {
		return 0, inboxNotFound()
	}
	return id, nil
}

// pager is one page of a list tool. Every list tool pages the same way: a limit
// (DefaultLimit when absent, at most MaxLimit), rows fetched limit+1 so that the extra
// one tells a next page exists, and a cursor signed for the tool, the member and the
// call's other arguments (cursor.go).
type pager struct {
	s     *Service
	c     caller
	tool  string
	args  any // the call's arguments, limit defaulted and cursor cleared: what a cursor binds
	limit int
	after cursorPayload // the position the call's cursor names; zero on the first page
}

// pagedInput is a list tool's input: it holds a page size and a cursor.
type pagedInput[In any] interface {
	*In
	paging() (limit *int, cursor *string)
}

// openList is how every list tool begins, in the order a call is told of its faults: it
// admits the caller for the tool's scope, runs check (nil: none) on the arguments a
// cursor does not stand for, then defaults the input's limit and checks its cursor, if
// any, against the tool, the caller and the other arguments.
func openList[In any, P pagedInput[In]](ctx context.Context, s *Service, sc tenancy.Scope, scope, tool string, in P,
	check func() error) (caller, pager, error) {
	c, err := s.admit(ctx, sc, scope, false)
	if err != nil {
		return caller{}, pager{}, err
	}
	if check != nil {
		if err := check(); err != nil {
			return caller{}, pager{}, err
		}
	}
	limit, cursor := in.paging()
	*limit = pageLimit(*limit)
	args := *in
	_, argsCursor := P(&args).paging()
	*argsCursor = ""
	p := pager{s: s, c: c, tool: tool, args: args, limit: *limit}
	if *cursor != "" {
		at, err := s.readCursor(tool, c, args, *cursor)
		if err != nil {
			return caller{}, pager{}, err
		}
		p.after = at
	}
	return c, p, nil
}

func pageLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// lim is how many rows a page's query fetches: one more than the page holds.
func (p pager) lim() int32 { return int32(p.limit + 1) }

// readPage runs a page's query in the caller's tenant, after before's statements (nil:
// none), the query carrying the COMMIT (a read), and turns the rows into the page's items
// and, when the extra row came, the cursor after the page's last row. op names the read
// in a classified error.
func readPage[R, T any](ctx context.Context, p pager, op string, before func(tx *pg.Tx) error, query func(tx *pg.Tx) ([]R, error),
	item func(R) (T, error), after func(R) cursorPayload) ([]T, *string, error) {
	var rows []R
	err := p.s.db.InTenant(ctx, p.c.tenant(), func(tx *pg.Tx) (err error) {
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		tx.CommitWithNext(ctx) // a read: its last statement carries the COMMIT
		rows, err = query(tx)
		return err
	})
	if err != nil {
		return nil, nil, pg.Classify(op, err)
	}
	out := make([]T, 0, min(len(rows), p.limit))
	var next *string
	size := 0
	for i, r := range rows {
		if i == p.limit {
			next = new(p.s.issueCursor(p.tool, p.c, p.args, after(rows[i-1])))
			break
		}
		v, err := item(r)
		if err != nil {
			return nil, nil, err
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", op, err)
		}
		if size += len(enc); i > 0 && size > MaxPageBytes {
			// The page is full by bytes: the cursor goes on from the last item it holds.
			next = new(p.s.issueCursor(p.tool, p.c, p.args, after(rows[i-1])))
			break
		}
		out = append(out, v)
	}
	return out, next, nil
}

// MaxPageBytes bounds the encoded items of one page (at least one item is given), with
// the cursor going on from there: a message's body is up to 100,000 characters, each
// written as six bytes when it is a control character, and an answer holds the page
// twice (its text and its structured content): one page of 50 such messages was 64 MB.
const MaxPageBytes = 1 << 20

// SearchInput is relaydesk_search_conversations' arguments.
type SearchInput struct {
	Query  string `json:"query"`
	Status string `json:"status,omitempty"`
	// InboxID is a pointer so that "" is an inbox that does not exist (NOT_FOUND),
	// not the absence of the filter.
	InboxID *string `json:"inbox_id,omitempty"`
	Limit   int     `json:"limit,omitempty"`
	Cursor  string  `json:"cursor,omitempty"`
}

func (in *SearchInput) paging() (*int, *string) { return &in.Limit, &in.Cursor }

// ConversationSummary is one search result.
type ConversationSummary struct {
	ID            string  `json:"id"`
	Subject       string  `json:"subject"`
	Status        string  `json:"status"`
	InboxID       string  `json:"inbox_id"`
	AssigneeID    *string `json:"assignee_id"`
	CustomerEmail string  `json:"customer_email"`
	CustomerName  string  `json:"customer_name"`
	CreatedAt     string  `json:"created_at"`
	UpdatedAt     string  `json:"updated_at"`
}

// SearchResult is relaydesk_search_conversations' structuredContent.
type SearchResult struct {
	Conversations []ConversationSummary `json:"conversations"`
	NextCursor    *string               `json:"next_cursor"`
}

// SearchConversations finds conversations whose subject and public messages hold every
// word of the query, in the inboxes the member sees.
func (s *Service) SearchConversations(ctx context.Context, sc tenancy.Scope, in SearchInput) (SearchResult, error) {
	c, pgr, err := openList(ctx, s, sc, ScopeConversationsRead, ToolSearchConversations, &in, func() error { return checkQuery(in.Query) })
	if err != nil {
		return SearchResult{}, err
	}
	p := db.DeskConversationSearchParams{OrgID: c.org, Query: in.Query, SeesAll: c.seesAll(), UserID: c.user, Lim: pgr.lim(),
		Cap: int32(s.searchCap), AfterUpdated: pgr.after.Time, AfterID: pgr.after.ID}
	if in.Status != "" {
		p.Status = &in.Status
	}
	var out SearchResult
	out.Conversations, out.NextCursor, err = readPage(ctx, pgr, "desk: search conversations",
		func(tx *pg.Tx) error {
			if in.InboxID != nil {
				id, err := s.visibleInbox(ctx, tx, c, *in.InboxID)
				if err != nil {
					return err
				}
				p.InboxID = &id
			}
			if !s.db.Citus() {
				return nil
			}
			// On Citus the search is sent whole to the workspace's shard, where the
			// candidates function could not query the distributed table: the coordinator
			// reads them first (one more round trip, and the full-text index read even
			// when the first rows hold the page). Plain PostgreSQL reads them inside the
			// search, only when needed.
			ids, err := s.q.DeskSearchCandidates(ctx, tx, db.DeskSearchCandidatesParams{Query: p.Query, Status: p.Status,
				InboxID: p.InboxID, AfterUpdated: p.AfterUpdated, AfterID: p.AfterID, Cap: p.Cap})
			if err != nil {
				return fmt.Errorf("search candidates: %w", err)
			}
			p.Candidates = ids
			if p.Candidates == nil {
				p.Candidates = []int64{} // none found, which is not "not read" (NULL)
			}
			return nil
		},
		func(tx *pg.Tx) ([]db.DeskConversationSearchRow, error) { return s.q.DeskConversationSearch(ctx, tx, p) },
		func(r db.DeskConversationSearchRow) (ConversationSummary, error) {
			return ConversationSummary{
				ID: publicID(PrefixConversation, r.ID), Subject: r.Subject, Status: r.Status, InboxID: publicID(PrefixInbox, r.InboxID),
				AssigneeID: userIDp(c.org, r.AssigneeUserID), CustomerEmail: r.CustomerEmail, CustomerName: r.CustomerName,
				CreatedAt: ts(r.CreatedAt), UpdatedAt: ts(r.UpdatedAt),
			}, nil
		},
		func(r db.DeskConversationSearchRow) cursorPayload { return cursorPayload{Time: &r.UpdatedAt, ID: r.ID} })
	return out, err
}

// GetConversationInput is relaydesk_get_conversation's arguments.
type GetConversationInput struct {
	ConversationID      string `json:"conversation_id"`
	IncludePrivateNotes bool   `json:"include_private_notes,omitempty"`
	Limit               int    `json:"limit,omitempty"`
	Cursor              string `json:"cursor,omitempty"`
}

func (in *GetConversationInput) paging() (*int, *string) { return &in.Limit, &in.Cursor }

// Conversation is a conversation as get_conversation shows it: its search summary's
// fields, in the same order, then its first reply and resolution times.
type Conversation struct {
	ConversationSummary
	FirstReplyAt *string `json:"first_reply_at"`
	ResolvedAt   *string `json:"resolved_at"`
}

// Attachment is an attachment's metadata: never a link or its content.
type Attachment struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
}

// Message is one message of a conversation.
type Message struct {
	ID          string       `json:"id"`
	Type        string       `json:"type"`
	Body        string       `json:"body"`
	AuthorID    *string      `json:"author_id"`
	Attachments []Attachment `json:"attachments"`
	CreatedAt   string       `json:"created_at"`
}

// GetConversationResult is relaydesk_get_conversation's structuredContent.
type GetConversationResult struct {
	Conversation Conversation `json:"conversation"`
	Messages     []Message    `json:"messages"`
	NextCursor   *string      `json:"next_cursor"`
}

// GetConversation reads a conversation and a page of its messages, oldest first. Notes
// are left out unless asked for; a member who sees the conversation sees its notes.
func (s *Service) GetConversation(ctx context.Context, sc tenancy.Scope, in GetConversationInput) (GetConversationResult, error) {
	var id int64
	c, pgr, err := openList(ctx, s, sc, ScopeConversationsRead, ToolGetConversation, &in, func() error {
		var ok bool
		if id, ok = parseID(PrefixConversation, in.ConversationID); !ok {
			return conversationNotFound()
		}
		return nil
	})
	if err != nil {
		return GetConversationResult{}, err
	}
	p := db.DeskMessagePageParams{OrgID: c.org, ConversationID: id, IncludeNotes: in.IncludePrivateNotes, Lim: pgr.lim(),
		AfterCreated: pgr.after.Time, AfterID: pgr.after.ID}
	var conv db.DeskConversationGetRow
	messages, next, err := readPage(ctx, pgr, "desk: get conversation",
		func(tx *pg.Tx) (err error) {
			conv, err = s.q.DeskConversationGet(ctx, tx, db.DeskConversationGetParams{OrgID: c.org, ID: id, SeesAll: c.seesAll(), UserID: c.user})
			if pg.IsNoRows(err) {
				return conversationNotFound()
			}
			return err
		},
		func(tx *pg.Tx) ([]db.DeskMessagePageRow, error) { return s.q.DeskMessagePage(ctx, tx, p) },
		func(r db.DeskMessagePageRow) (Message, error) {
			m := Message{ID: messageID(r.Type, r.ID), Type: r.Type, Body: r.Body, AuthorID: userIDp(c.org, r.AuthorUserID),
				Attachments: []Attachment{}, CreatedAt: ts(r.CreatedAt)}
			if err := json.Unmarshal(r.Attachments, &m.Attachments); err != nil {
				return m, fmt.Errorf("desk: attachments of message %d: %w", r.ID, err)
			}
			return m, nil
		},
		func(r db.DeskMessagePageRow) cursorPayload { return cursorPayload{Time: &r.CreatedAt, ID: r.ID} })
	if err != nil {
		return GetConversationResult{}, err
	}
	return GetConversationResult{Conversation: Conversation{ConversationSummary: ConversationSummary{
		ID: publicID(PrefixConversation, conv.ID), Subject: conv.Subject, Status: conv.Status, InboxID: publicID(PrefixInbox, conv.InboxID),
		AssigneeID: userIDp(c.org, conv.AssigneeUserID), CustomerEmail: conv.CustomerEmail, CustomerName: conv.CustomerName,
		CreatedAt: ts(conv.CreatedAt), UpdatedAt: ts(conv.UpdatedAt),
	}, FirstReplyAt: tsp(conv.FirstReplyAt), ResolvedAt: tsp(conv.ResolvedAt)}, Messages: messages, NextCursor: next}, nil
}

// PageInput is relaydesk_list_inboxes' arguments.
type PageInput struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

func (in *PageInput) paging() (*int, *string) { return &in.Limit, &in.Cursor }

// Inbox is one inbox: nothing of its mail connection.
type Inbox struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	OpenCount int64  `json:"open_count"`
}

// InboxesResult is relaydesk_list_inboxes' structuredContent.
type InboxesResult struct {
	Inboxes    []Inbox `json:"inboxes"`
	NextCursor *string `json:"next_cursor"`
}

// ListInboxes lists the inboxes the member sees, by name then id.
func (s *Service) ListInboxes(ctx context.Context, sc tenancy.Scope, in PageInput) (InboxesResult, error) {
	c, pgr, err := openList(ctx, s, sc, ScopeInboxesRead, ToolListInboxes, &in, nil)
	if err != nil {
		return InboxesResult{}, err
	}
	p := db.DeskInboxListParams{OrgID: c.org, SeesAll: c.seesAll(), UserID: c.user, Lim: pgr.lim(), AfterName: pgr.after.Text, AfterID: pgr.after.ID}
	var out InboxesResult
	out.Inboxes, out.NextCursor, err = readPage(ctx, pgr, "desk: list inboxes", nil,
		func(tx *pg.Tx) ([]db.DeskInboxListRow, error) { return s.q.DeskInboxList(ctx, tx, p) },
		func(r db.DeskInboxListRow) (Inbox, error) {
			return Inbox{ID: publicID(PrefixInbox, r.ID), Name: r.Name, OpenCount: r.OpenCount}, nil
		},
		func(r db.DeskInboxListRow) cursorPayload { return cursorPayload{Text: &r.Name, ID: r.ID} })
	return out, err
}

// FindSavedRepliesInput is relaydesk_find_saved_replies' arguments.
type FindSavedRepliesInput struct {
	Query  string `json:"query"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

func (in *FindSavedRepliesInput) paging() (*int, *string) { return &in.Limit, &in.Cursor }

// SavedReply is a reply template; reading it sends nothing.
type SavedReply struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

// SavedRepliesResult is relaydesk_find_saved_replies' structuredContent.
type SavedRepliesResult struct {
	SavedReplies []SavedReply `json:"saved_replies"`
	NextCursor   *string      `json:"next_cursor"`
}

// FindSavedReplies finds the saved replies whose title or body holds every word of the
// query, by title then id.
func (s *Service) FindSavedReplies(ctx context.Context, sc tenancy.Scope, in FindSavedRepliesInput) (SavedRepliesResult, error) {
	c, pgr, err := openList(ctx, s, sc, ScopeSavedRepliesRead, ToolFindSavedReplies, &in, func() error { return checkQuery(in.Query) })
	if err != nil {
		return SavedRepliesResult{}, err
	}
	p := db.DeskSavedReplyFindParams{OrgID: c.org, Query: in.Query, Lim: pgr.lim(), AfterTitle: pgr.after.Text, AfterID: pgr.after.ID}
	var out SavedRepliesResult
	out.SavedReplies, out.NextCursor, err = readPage(ctx, pgr, "desk: find saved replies", nil,
		func(tx *pg.Tx) ([]db.DeskSavedReplyFindRow, error) { return s.q.DeskSavedReplyFind(ctx, tx, p) },
		func(r db.DeskSavedReplyFindRow) (SavedReply, error) {
			return SavedReply{ID: publicID(PrefixReply, r.ID), Title: r.Title, Body: r.Body}, nil
		},
		func(r db.DeskSavedReplyFindRow) cursorPayload { return cursorPayload{Text: &r.Title, ID: r.ID} })
	return out, err
}

// checkQuery bounds a search's query, in characters, as both search tools' schemas do.
func checkQuery(q string) error {
	if n := len([]rune(q)); n < MinQueryLen || n > MaxQueryLen {
		return invalid("argument \"query\" must hold %d to %d characters", MinQueryLen, MaxQueryLen)
	}
	return nil
}
