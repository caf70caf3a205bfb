package threads

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// noArgs is the schema of a tool without arguments: an empty object, nothing else.
const noArgs = `{"type":"object","properties":{},"additionalProperties":false}`

// Tools declares the threads toolset. Descriptions are written for the model that reads
// them: when to call the tool, what it returns, its limits.
// Input schemas. Bounds and defaults live here; the MCP core validates before a handler
// runs, and every root refuses unknown properties.
const (
	idSchema   = `{"type":"string","pattern":"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"}`
	sendSchema = `{"type":"object","properties":{
"to":{"type":"array","minItems":1,"maxItems":50,"items":{"type":"string","minLength":1,"maxLength":63},"description":"Part names to address (see roster), or [\"*\"] for every other part (a broadcast)."},
"subject":{"type":"string","minLength":1,"maxLength":200},
"body":{"type":"string","minLength":1,"maxLength":20000},
"urgent":{"type":"boolean","default":false,"description":"Wake the recipients even past their wake budget. Needs the urgent capability; refused without it."},
"needsHuman":{"type":"boolean","default":false,"description":"Flag the thread for people. Needs the needsHuman capability; silently ignored without it."}},
"required":["to","subject","body"],"additionalProperties":false}`
	replySchema = `{"type":"object","properties":{
"threadId":` + idSchema + `,
"body":{"type":"string","minLength":1,"maxLength":20000},
"urgent":{"type":"boolean","default":false},
"needsHuman":{"type":"boolean","default":false}},
"required":["threadId","body"],"additionalProperties":false}`
	ackSchema      = `{"type":"object","properties":{"messageId":` + idSchema + `},"required":["messageId"],"additionalProperties":false}`
	threadIDSchema = `{"type":"object","properties":{"threadId":` + idSchema + `},"required":["threadId"],"additionalProperties":false}`
	closeSchema    = `{"type":"object","properties":{
"threadId":` + idSchema + `,
"lesson":{"type":"object","description":"Optional: what someone should do differently next time (not a transcript). Recorded as a candidate citing this thread.","properties":{
  "title":{"type":"string","minLength":1,"maxLength":200},
  "body":{"type":"string","minLength":1,"maxLength":5000},
  "kind":{"type":"string","enum":["fact","procedure","pitfall","decision"]}},
 "required":["title","body","kind"],"additionalProperties":false}},
"required":["threadId"],"additionalProperties":false}`
	searchSchema = `{"type":"object","properties":{"query":{"type":"string","minLength":2,"maxLength":200}},"required":["query"],"additionalProperties":false}`
	learnSchema  = `{"type":"object","properties":{
"title":{"type":"string","minLength":1,"maxLength":200},
"body":{"type":"string","minLength":1,"maxLength":5000},
"kind":{"type":"string","enum":["fact","procedure","pitfall","decision"]},
"expiresAt":{"type":"string","format":"date-time","description":"When the entry stops being true (ISO 8601); it is never recalled after."}},
"required":["title","body","kind"],"additionalProperties":false}`
	recallUsedSchema = `{"type":"object","properties":{"queryId":` + idSchema + `,"knowledgeId":` + idSchema + `},"required":["queryId","knowledgeId"],"additionalProperties":false}`
)

// The schemas with numeric arguments are built from the Go constants the service
// checks, so that a bound can never differ between what a client is told and what holds.

func inboxSchema() string {
	return `{"type":"object","properties":{
"unreadOnly":{"type":"boolean","default":false},
"limit":{"type":"integer","minimum":1,"maximum":` + itoa(MaxInbox) + `,"default":` + itoa(DefaultInbox) + `},
"before":{"type":"string","minLength":36,"maxLength":36,"description":"A messageId: list only messages older than it (to page)."}},
"additionalProperties":false}`
}

// eventSchema bounds every usage number by what one report may hold (see MaxUsageTokens).
func eventSchema() string {
	tokens := `{"type":"integer","minimum":0,"maximum":` + itoa(MaxUsageTokens) + `}`
	return `{"type":"object","properties":{
"type":{"type":"string","pattern":"^[a-z][a-z0-9_.-]{0,39}$","description":"composing, limited, error, or any short lower-case word for other work events (e.g. progress, done)."},
"detail":{"type":"object","description":"composing: {threadId}. limited: {resetAt?} (ISO 8601). error: {contradicts?: knowledgeId, message?}."},
"usage":{"type":"object","properties":{
  "input_tokens":` + tokens + `,"output_tokens":` + tokens + `,
  "cache_tokens":` + tokens + `,"cost_usd":{"type":"number","minimum":0,"maximum":` + itoa(MaxUsageCostUSD) + `},
  "model":{"type":"string","minLength":1,"maxLength":200}},
 "required":["model"],"additionalProperties":false}},
"required":["type"],"additionalProperties":false}`
}

func threadsSchema() string {
	return `{"type":"object","properties":{
"query":{"type":"string","minLength":1,"maxLength":200,"description":"Only threads whose subject or any message contains this text (case-insensitive)."},
"status":{"type":"string","enum":["open","closed","canceled"]},
"limit":{"type":"integer","minimum":1,"maximum":` + itoa(MaxThreads) + `,"default":` + itoa(MaxThreads) + `}},
"additionalProperties":false}`
}

func recallSchema() string {
	return `{"type":"object","properties":{
"query":{"type":"string","minLength":2,"maxLength":500},
"limit":{"type":"integer","minimum":1,"maximum":` + itoa(knowledge.MaxRecall) + `,"default":` + itoa(knowledge.DefaultRecall) + `},
"kind":{"type":"string","enum":["fact","procedure","pitfall","decision"]}},
"required":["query"],"additionalProperties":false}`
}

func itoa[N int | int64](n N) string { return strconv.FormatInt(int64(n), 10) }

// decode reads validated arguments into v.
func decode(args json.RawMessage, v any) error {
	if len(args) == 0 {
		return nil
	}
	if err := json.Unmarshal(args, v); err != nil {
		return apperr.New(apperr.Invalid, "arguments: %v", err).WithReason("invalid_argument")
	}
	return nil
}

// handle adapts a typed service call to a tool handler.
func handle[In any](fn func(ctx context.Context, sc tenancy.Scope, in In) (any, error)) func(context.Context, tenancy.Scope, json.RawMessage) (any, error) {
	return func(ctx context.Context, sc tenancy.Scope, args json.RawMessage) (any, error) {
		var in In
		if err := decode(args, &in); err != nil {
			return nil, err
		}
		return fn(ctx, sc, in)
	}
}

// Tools declares the threads toolset. Descriptions are written for the model that reads
// them: when to call the tool, what it returns, its limits.
func (s *Service) Tools() []mcp.Tool[tenancy.Scope] {
	write := mcp.Annotations{}
	read := mcp.Annotations{ReadOnly: true, Idempotent: true}
	return []mcp.Tool[tenancy.Scope]{
		{
			Name:  "send",
			Title: "Start a thread",
			Description: "Start a new thread addressed to one or more parts of this project (names from roster), or to every other part with " +
				`to:["*"] (a broadcast: it costs each recipient's wake budget, use sparingly). Returns {threadId, messageId, to}; continue it with reply. ` +
				"All or nothing: if any part name is unknown the call fails and nothing is sent. urgent and needsHuman are capabilities a " +
				"manager grants: without them urgent is refused and needsHuman is ignored (the message is still delivered). " +
				"Limits: 1-50 parts, subject 1-200 characters, body 1-20000.",
			InputSchema: json.RawMessage(sendSchema),
			Annotations: write,
			Handler:     handle(func(ctx context.Context, sc tenancy.Scope, in SendInput) (any, error) { return s.Send(ctx, sc, in) }),
		},
		{
			Name:  "reply",
			Title: "Reply in a thread",
			Description: "Add a reply to an existing open thread of this project; every other participant gets it in their inbox, and you become " +
				"a participant. Refused on a closed or canceled thread (start a new one with send). Returns {threadId, messageId}. " +
				"urgent/needsHuman behave as in send.",
			InputSchema: json.RawMessage(replySchema),
			Annotations: write,
			Handler:     handle(func(ctx context.Context, sc tenancy.Scope, in ReplyInput) (any, error) { return s.Reply(ctx, sc, in) }),
		},
		{
			Name:  "inbox",
			Title: "List your inbox",
			Description: "List messages addressed to your part in open threads, newest first, as token-lean previews: {messageId, threadId, " +
				"subject, from, unread, at, preview}, the preview being the body on one line cut to ~160 characters. Call show with the " +
				"threadId to read full bodies. Reading never marks anything read: call ack for that. Messages of closed threads are not " +
				"listed. unreadOnly filters; limit 1-50 (default 20); before=<messageId> pages to older messages.",
			InputSchema: json.RawMessage(inboxSchema()),
			Annotations: read,
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in InboxInput) (any, error) {
				items, err := s.Inbox(ctx, sc, in)
				if err != nil {
					return nil, err
				}
				return mcp.Structured{Object: map[string]any{"messages": items}, Text: items}, nil
			}),
		},
		{
			Name:        "ack",
			Title:       "Mark a message read",
			Description: "Mark one message of your inbox as read. Acking an already-read message is fine. Returns {messageId, unread:false}.",
			InputSchema: json.RawMessage(ackSchema),
			Annotations: mcp.Annotations{Idempotent: true},
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in struct {
				MessageID string `json:"messageId"`
			}) (any, error) {
				return s.Ack(ctx, sc, in.MessageID)
			}),
		},
		{
			Name:  "event",
			Title: "Record a work event",
			Description: "Record a work event for the dashboard's activity feed and usage charts. usage {input_tokens, output_tokens, " +
				"cache_tokens, cost_usd, model} is optional, but model is required when usage is given. Special types: " +
				"composing (detail.threadId: shows you as typing in that thread for ~10 s; wakes nobody, not stored as activity); " +
				"limited (detail.resetAt: the ISO time your provider rate limit lifts; parks your wakes until then, at most 24 h; " +
				"omit resetAt or pass a past time to unpark; messages keep arriving in your inbox meanwhile); " +
				"error (detail.contradicts: a knowledgeId your work proved wrong; lowers its confidence and may demote it). " +
				"Returns {eventId, type} plus the park state for limited.",
			InputSchema: json.RawMessage(eventSchema()),
			Annotations: write,
			Handler:     handle(func(ctx context.Context, sc tenancy.Scope, in EventInput) (any, error) { return s.Event(ctx, sc, in) }),
		},
		{
			Name:  "threads",
			Title: "List your threads",
			Description: "List the threads you take part in, newest first: {threads:[{id, subject, status, createdAt}]}, up to 50. " +
				"Filter with status (open, closed, canceled) and query (text in the subject or any message, case-insensitive). " +
				"To find threads you are not in, use search.",
			InputSchema: json.RawMessage(threadsSchema()),
			Annotations: read,
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in ThreadsInput) (any, error) {
				list, err := s.Threads(ctx, sc, in)
				if err != nil {
					return nil, err
				}
				return map[string]any{"threads": list}, nil
			}),
		},
		{
			Name:  "show",
			Title: "Read a thread",
			Description: "Fetch a thread of this project and all its messages in order: {thread:{id, subject, status, createdAt}, " +
				"messages:[{id, from, body, createdAt}], composing?}. This is how you read full bodies after inbox. It marks nothing read.",
			InputSchema: json.RawMessage(threadIDSchema),
			Annotations: read,
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in struct {
				ThreadID string `json:"threadId"`
			}) (any, error) {
				return s.Show(ctx, sc, in.ThreadID)
			}),
		},
		{
			Name:  "close",
			Title: "Close a thread",
			Description: "End a thread you take part in the moment it is resolved: it leaves every participant's inbox, its unread is marked " +
				"read, it wakes nobody again and rejects further replies. Close early and often: it is the best way to avoid wake loops " +
				"(idle threads auto-close after 30 minutes anyway). Idempotent. Returns {ok, threadId, status, lesson?}, status being " +
				"what the thread really ended as (canceled if a person canceled it). Optional lesson {title, body, kind}: what someone " +
				"should do differently, recorded as a candidate; lesson.recorded false with a code is not an error, the close happened. " +
				"Close without a lesson when the thread taught nothing durable.",
			InputSchema: json.RawMessage(closeSchema),
			// Closing is terminal: it cannot be taken back (repeating it changes nothing).
			Annotations: mcp.Annotations{Destructive: true, Idempotent: true},
			Handler:     handle(func(ctx context.Context, sc tenancy.Scope, in CloseInput) (any, error) { return s.Close(ctx, sc, in) }),
		},
		{
			Name:  "search",
			Title: "Search other threads",
			Description: "Find threads of this project you are NOT a participant in, by a case-insensitive substring (2-200 characters) of " +
				"the subject or any message body, to pull context from conversations you were not sent. Returns " +
				"{threads:[{threadId, subject, status, createdAt}]}, newest first, up to 50; call show for full content.",
			InputSchema: json.RawMessage(searchSchema),
			Annotations: read,
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in struct {
				Query string `json:"query"`
			}) (any, error) {
				list, err := s.Search(ctx, sc, in.Query)
				if err != nil {
					return nil, err
				}
				return map[string]any{"threads": list}, nil
			}),
		},
		{
			Name:  "roster",
			Title: "List the parts of this project",
			Description: "List the parts (agents) in this project and whether each is online, so you know who to send or reply to: " +
				"send and reply address parts by name, and this is how you discover them. No arguments. Returns {parts:[{part, isMain, " +
				"nickname?, online, lastSeen, you, limitedUntil?}]}: online means seen in the last minute; you marks your own part; " +
				"limitedUntil appears while a part is parked on a provider rate limit (messages still reach it).",
			InputSchema: json.RawMessage(noArgs),
			Annotations: read,
			Handler: func(ctx context.Context, sc tenancy.Scope, _ json.RawMessage) (any, error) {
				parts, err := s.Roster(ctx, sc)
				if err != nil {
					return nil, err
				}
				return map[string]any{"parts": parts}, nil
			},
		},
		{
			Name:  "whoami",
			Title: "Report your own part",
			Description: "Report your own part, project, and whether you are the project's main agent: handy for re-orienting after a " +
				"context compaction or a restart. No arguments. Returns {part, project, projectId, isMain, nickname?}.",
			InputSchema: json.RawMessage(noArgs),
			Annotations: read,
			Handler: func(ctx context.Context, sc tenancy.Scope, _ json.RawMessage) (any, error) {
				return s.WhoAmI(ctx, sc), nil
			},
		},
		{
			Name:  "recall",
			Title: "Recall trusted knowledge",
			Description: "Search this project's trusted knowledge before starting non-trivial work. Returns only entries a person or CI " +
				"confirmed and that have not expired, ranked by trigram similarity to the query weighted by confidence: " +
				"{queryId, entries:[{knowledgeId, kind, title, body, confidence, score, createdAt, expiresAt?}]}. query 2-500 characters, " +
				"limit 1-20 (default 5), kind optional. If an entry shaped what you did, report it with recall_used and the queryId. " +
				"A guest company's part needs its agreement's read_memory grant.",
			InputSchema: json.RawMessage(recallSchema()),
			Annotations: mcp.Annotations{ReadOnly: true},
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in knowledge.RecallInput) (any, error) {
				return s.knowledge().Recall(ctx, sc, in)
			}),
		},
		{
			Name:  "learn",
			Title: "Propose knowledge",
			Description: "Record something worth remembering for this project: a fact, procedure, pitfall or decision. It is always stored " +
				"as a candidate that people (or CI) must confirm before recall returns it; nothing you write reaches another agent on " +
				"its own. Secrets are redacted on write. Needs write access (and, for a guest company's part, its agreement's write_memory " +
				"grant). Returns {knowledgeId, status:\"candidate\", duplicateOf?} " +
				"(duplicateOf links a near-identical existing entry). title 1-200, body 1-5000 characters; expiresAt optional.",
			InputSchema: json.RawMessage(learnSchema),
			Annotations: write,
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in knowledge.LearnInput) (any, error) {
				return s.knowledge().Learn(ctx, sc, in)
			}),
		},
		{
			Name:  "recall_used",
			Title: "Report a recalled entry as used",
			Description: "Report that an entry returned by recall actually shaped what you did (optional, best-effort; it measures recall " +
				"quality). Only an entry that the named query returned is accepted, once. Returns {ok:true}.",
			InputSchema: json.RawMessage(recallUsedSchema),
			Annotations: mcp.Annotations{Idempotent: false},
			Handler: handle(func(ctx context.Context, sc tenancy.Scope, in struct {
				QueryID     string `json:"queryId"`
				KnowledgeID string `json:"knowledgeId"`
			}) (any, error) {
				if err := s.knowledge().RecallUsed(ctx, sc, in.QueryID, in.KnowledgeID); err != nil {
					return nil, err
				}
				return map[string]any{"ok": true}, nil
			}),
		},
	}
}

// knowledge returns the knowledge service; a Service built without one answers its
// knowledge tools as unavailable rather than panicking.
func (s *Service) knowledge() knowledgeAPI {
	if s.Knowledge == nil {
		return noKnowledge{}
	}
	return s.Knowledge
}

type knowledgeAPI interface {
	Recall(ctx context.Context, sc tenancy.Scope, in knowledge.RecallInput) (knowledge.RecallResult, error)
	Learn(ctx context.Context, sc tenancy.Scope, in knowledge.LearnInput) (knowledge.LearnResult, error)
	RecallUsed(ctx context.Context, sc tenancy.Scope, queryID, knowledgeID string) error
}

type noKnowledge struct{}

func errNoKnowledge() error {
	return apperr.New(apperr.Unavailable, "the knowledge base is not configured")
}

func (noKnowledge) Recall(context.Context, tenancy.Scope, knowledge.RecallInput) (knowledge.RecallResult, error) {
	return knowledge.RecallResult{}, errNoKnowledge()
}
func (noKnowledge) Learn(context.Context, tenancy.Scope, knowledge.LearnInput) (knowledge.LearnResult, error) {
	return knowledge.LearnResult{}, errNoKnowledge()
}
func (noKnowledge) RecallUsed(context.Context, tenancy.Scope, string, string) error {
	return errNoKnowledge()
}
