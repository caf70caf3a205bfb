package threads

import (
	"context"
	"fmt"
	"strings"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Bounds that only the tools' schemas state: the core refuses an argument beyond them
// before a handler runs. The other bounds are the service's own limits (MaxSubject, …).
const (
	MaxPartName    = 63  // a part name, as admin's part pattern allows
	MinSearchQuery = 2   // search's query, in characters (Search checks it too)
	MaxQuery       = 200 // the text query of threads and search
	MaxModelName   = 200 // usage.model of an event
	idLength       = 36  // an id in text form (inbox's before)
	// idPattern is an id in text form, any case.
	idPattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
	// eventTypePattern is a work event's type: a short lower-case word.
	eventTypePattern = "^[a-z][a-z0-9_.-]{0,39}$"
)

// Tools declares the threads toolset, in the order tools/list shows it. Descriptions are
// written for the model that reads them: when to call the tool, what it returns, its
// limits (stated from the same constants the service and the schemas hold).
func (s *Service) Tools() []mcp.Tool[tenancy.Scope] {
	return []mcp.Tool[tenancy.Scope]{
		sendTool(s), replyTool(s), inboxTool(s), ackTool(s), eventTool(s), threadsTool(s), showTool(s),
		closeTool(s), searchTool(s), rosterTool(s), whoamiTool(s), recallTool(s), learnTool(s), recallUsedTool(s),
	}
}

// idArg is the schema of every id argument.
func idArg() mcp.SchemaOption { return mcp.Pattern(idPattern) }

// urgencyArgs are send's and reply's capability flags; descriptions are send's.
func urgencyArgs(described bool) []mcp.SchemaOption {
	urgent := []mcp.SchemaOption{mcp.Default(false)}
	needsHuman := []mcp.SchemaOption{mcp.Default(false)}
	if described {
		urgent = append(urgent, mcp.Description("Wake the recipients even past their wake budget. Needs the urgent capability; refused without it."))
		needsHuman = append(needsHuman, mcp.Description("Flag the thread for people. Needs the needsHuman capability; silently ignored without it."))
	}
	return []mcp.SchemaOption{mcp.Prop("urgent", urgent...), mcp.Prop("needsHuman", needsHuman...)}
}

// entryArgs bound a knowledge entry's title, body and kind (learn; close decides its lesson's itself).
func entryArgs() []mcp.SchemaOption {
	return []mcp.SchemaOption{
		mcp.Prop("title", mcp.MinLength(1), mcp.MaxLength(knowledge.MaxTitle)),
		mcp.Prop("body", mcp.MinLength(1), mcp.MaxLength(knowledge.MaxBody)),
		mcp.Prop("kind", mcp.Enum(knowledge.Kinds...)),
	}
}

func sendTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "send", Title: "Start a thread",
		Description: "Start a new thread addressed to one or more parts of this project (names from roster), or to every other part with " +
			`to:["` + Broadcast + `"] (a broadcast: it costs each recipient's wake budget, use sparingly). Returns {threadId, messageId, to}; continue it with reply. ` +
			"All or nothing: if any part name is unknown the call fails and nothing is sent. urgent and needsHuman are capabilities a " +
			"manager grants: without them urgent is refused and needsHuman is ignored (the message is still delivered). " +
			fmt.Sprintf("Limits: 1-%d parts, subject 1-%d characters, body 1-%d.", MaxRecipients, MaxSubject, MaxBody),
		Annotations: mcp.Annotations{},
	}, s.Send, append([]mcp.SchemaOption{
		mcp.Prop("to", mcp.MinItems(1), mcp.MaxItems(MaxRecipients), mcp.Items(mcp.MinLength(1), mcp.MaxLength(MaxPartName)),
			mcp.Description(`Part names to address (see roster), or ["`+Broadcast+`"] for every other part (a broadcast).`)),
		mcp.Prop("subject", mcp.MinLength(1), mcp.MaxLength(MaxSubject)),
		mcp.Prop("body", mcp.MinLength(1), mcp.MaxLength(MaxBody)),
	}, urgencyArgs(true)...)...)
}

func replyTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "reply", Title: "Reply in a thread",
		Description: "Add a reply to an existing open thread of this project; every other participant gets it in their inbox, and you become " +
			"a participant. Refused on a closed or canceled thread (start a new one with send). Returns {threadId, messageId}. " +
			"urgent/needsHuman behave as in send.",
		Annotations: mcp.Annotations{},
	}, s.Reply, append([]mcp.SchemaOption{
		mcp.Prop("threadId", idArg()),
		mcp.Prop("body", mcp.MinLength(1), mcp.MaxLength(MaxBody)),
	}, urgencyArgs(false)...)...)
}

func inboxTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "inbox", Title: "List your inbox",
		Description: "List messages addressed to your part in open threads, newest first, as token-lean previews: {messageId, threadId, " +
			fmt.Sprintf("subject, from, unread, at, preview}, the preview being the body on one line cut to ~%d characters. Call show with the ", PreviewRunes) +
			"threadId to read full bodies. Reading never marks anything read: call ack for that. Messages of closed threads are not " +
			fmt.Sprintf("listed. unreadOnly filters; limit 1-%d (default %d); before=<messageId> pages to older messages.", MaxInbox, DefaultInbox),
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
	}, func(ctx context.Context, sc tenancy.Scope, in InboxInput) (any, error) {
		items, err := s.Inbox(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		return mcp.Structured{Object: map[string]any{"messages": items}, Text: items}, nil
	},
		mcp.Prop("unreadOnly", mcp.Default(false)),
		mcp.Prop("limit", mcp.Minimum(1), mcp.Maximum(MaxInbox), mcp.Default(DefaultInbox)),
		mcp.Prop("before", mcp.MinLength(idLength), mcp.MaxLength(idLength), mcp.Description("A messageId: list only messages older than it (to page).")),
	)
}

type ackInput struct {
	MessageID string `json:"messageId"`
}

func ackTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "ack", Title: "Mark a message read",
		Description: "Mark one message of your inbox as read. Acking an already-read message is fine. Returns {messageId, unread:false}.",
		Annotations: mcp.Annotations{Idempotent: true},
	}, func(ctx context.Context, sc tenancy.Scope, in ackInput) (AckResult, error) {
		return s.Ack(ctx, sc, in.MessageID)
	}, mcp.Prop("messageId", idArg()))
}

func eventTool(s *Service) mcp.Tool[tenancy.Scope] {
	tokens := []mcp.SchemaOption{mcp.Minimum(0), mcp.Maximum(MaxUsageTokens)}
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "event", Title: "Record a work event",
		Description: "Record a work event for the dashboard's activity feed and usage charts. usage {input_tokens, output_tokens, " +
			"cache_tokens, cost_usd, model} is optional, but model is required when usage is given. Special types: " +
			fmt.Sprintf("composing (detail.threadId: shows you as typing in that thread for ~%d s; wakes nobody, not stored as activity); ", int(ComposingFor.Seconds())) +
			fmt.Sprintf("limited (detail.resetAt: the ISO time your provider rate limit lifts; parks your wakes until then, at most %d h; ", int(MaxParkWindow.Hours())) +
			"omit resetAt or pass a past time to unpark; messages keep arriving in your inbox meanwhile); " +
			"error (detail.contradicts: a knowledgeId your work proved wrong; lowers its confidence and demotes it, out of recall until a person approves it again). " +
			"Returns {eventId, type} plus the park state for limited.",
		Annotations: mcp.Annotations{},
	}, s.Event,
		mcp.Prop("type", mcp.Pattern(eventTypePattern),
			mcp.Description("composing, limited, error, or any short lower-case word for other work events (e.g. progress, done).")),
		mcp.Prop("detail", mcp.Description("composing: {threadId}. limited: {resetAt?} (ISO 8601). error: {contradicts?: knowledgeId, message?}.")),
		mcp.Prop("usage",
			mcp.Prop("input_tokens", tokens...),
			mcp.Prop("output_tokens", tokens...),
			mcp.Prop("cache_tokens", tokens...),
			mcp.Prop("cost_usd", mcp.Minimum(0), mcp.Maximum(MaxUsageCostUSD)),
			mcp.Prop("model", mcp.MinLength(1), mcp.MaxLength(MaxModelName))),
	)
}

func threadsTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "threads", Title: "List your threads",
		Description: fmt.Sprintf("List the threads you take part in, newest first: {threads:[{id, subject, status, createdAt}]}, up to %d. ", MaxThreads) +
			"Filter with status (open, closed, canceled) and query (text in the subject or any message, case-insensitive). " +
			"Older threads: call threads again with before set to the last id of the page. " +
			"To find threads you are not in, use search.",
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
	}, func(ctx context.Context, sc tenancy.Scope, in ThreadsInput) (any, error) {
		list, err := s.Threads(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		return map[string]any{"threads": list}, nil
	},
		mcp.Prop("query", mcp.MinLength(1), mcp.MaxLength(MaxQuery),
			mcp.Description("Only threads whose subject or any message contains this text (case-insensitive).")),
		mcp.Prop("status", mcp.Enum(StatusOpen, StatusClosed, StatusCanceled)),
		mcp.Prop("limit", mcp.Minimum(1), mcp.Maximum(MaxThreads), mcp.Default(MaxThreads)),
		mcp.Prop("before", idArg(), mcp.Description("Only threads older than this thread id (the last id of a previous page).")),
	)
}

type threadIDInput struct {
	ThreadID string `json:"threadId"`
}

func showTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "show", Title: "Read a thread",
		Description: "Fetch a thread of this project and all its messages in order: {thread:{id, subject, status, createdAt}, " +
			"messages:[{id, from, body, createdAt}], composing?, before?}. This is how you read full bodies after inbox. It marks nothing read. " +
			fmt.Sprintf("A long thread comes in pages, newest last: at most %d messages and %d MiB of bodies; ", ShowMaxMessages, ShowMaxBytes>>20) +
			"before in the answer means older messages exist: call show again with it as before to read them.",
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
	}, s.ShowPage,
		mcp.Prop("threadId", idArg()),
		mcp.Prop("before", idArg(), mcp.Description("Only messages older than this message id (a previous answer's before).")))
}

func closeTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "close", Title: "Close a thread",
		Description: "End a thread you take part in the moment it is resolved: it leaves every participant's inbox, its unread is marked " +
			"read, it wakes nobody again and rejects further replies. Close early and often: it is the best way to avoid wake loops " +
			fmt.Sprintf("(idle threads auto-close after %d minutes anyway). Idempotent. Returns {ok, threadId, status, lesson?}, status being ", int(DefaultIdle.Minutes())) +
			"what the thread really ended as (canceled if a person canceled it). Optional lesson {title, body, kind}: what someone " +
			"should do differently, recorded as a candidate; lesson.recorded false with a code is not an error, the close happened. " +
			"Close without a lesson when the thread taught nothing durable.",
		// Closing is terminal: it cannot be taken back (repeating it changes nothing).
		Annotations: mcp.Annotations{Destructive: true, Idempotent: true},
	}, s.Close,
		mcp.Prop("threadId", idArg()),
		// The lesson's bounds are not in the schema: a call refused for its lesson would
		// lose the close, and losing the lesson never costs the close. The lesson decides
		// them and answers recorded false (storage_failed) with the reason.
		mcp.Prop("lesson",
			mcp.Description("Optional: what someone should do differently next time (not a transcript). Recorded as a candidate citing this thread."),
			mcp.Prop("title", mcp.Description(fmt.Sprintf("1-%d characters.", knowledge.MaxTitle))),
			mcp.Prop("body", mcp.Description(fmt.Sprintf("1-%d characters.", knowledge.MaxBody))),
			mcp.Prop("kind", mcp.Description("One of "+strings.Join(knowledge.Kinds, ", ")+"."))),
	)
}

func searchTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "search", Title: "Search other threads",
		Description: fmt.Sprintf("Find threads of this project you are NOT a participant in, by a case-insensitive substring (%d-%d characters) of ", MinSearchQuery, MaxQuery) +
			"the subject or any message body, to pull context from conversations you were not sent. Returns " +
			fmt.Sprintf("{threads:[{threadId, subject, status, createdAt}]}, newest first, up to %d; call show for full content. ", MaxThreads) +
			"Older matches: call search again with before set to the last threadId of the page.",
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
	}, func(ctx context.Context, sc tenancy.Scope, in SearchInput) (any, error) {
		list, err := s.Search(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		return map[string]any{"threads": list}, nil
	}, mcp.Prop("query", mcp.MinLength(MinSearchQuery), mcp.MaxLength(MaxQuery)),
		mcp.Prop("before", idArg(), mcp.Description("Only threads older than this thread id (the last threadId of a previous page).")))
}

func rosterTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "roster", Title: "List the parts of this project",
		Description: "List the parts (agents) in this project and whether each is online, so you know who to send or reply to: " +
			"send and reply address parts by name, and this is how you discover them. No arguments. Returns {parts:[{part, isMain, " +
			"nickname?, online, lastSeen, you, limitedUntil?}]}: online means seen in the last minute; you marks your own part; " +
			"limitedUntil appears while a part is parked on a provider rate limit (messages still reach it).",
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
	}, func(ctx context.Context, sc tenancy.Scope, _ struct{}) (any, error) {
		parts, err := s.Roster(ctx, sc)
		if err != nil {
			return nil, err
		}
		return map[string]any{"parts": parts}, nil
	})
}

func whoamiTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "whoami", Title: "Report your own part",
		Description: "Report your own part, project, and whether you are the project's main agent: handy for re-orienting after a " +
			"context compaction or a restart. No arguments. Returns {part, project, projectId, isMain, nickname?}.",
		Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
	}, func(ctx context.Context, sc tenancy.Scope, _ struct{}) (Identity, error) {
		return s.WhoAmI(ctx, sc), nil
	})
}

func recallTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "recall", Title: "Recall trusted knowledge",
		Description: "Search this project's trusted knowledge before starting non-trivial work. Returns only entries a person or CI " +
			"confirmed and that have not expired, ranked by trigram similarity to the query weighted by confidence: " +
			fmt.Sprintf("{queryId, entries:[{knowledgeId, kind, title, body, confidence, score, createdAt, expiresAt?}]}. query %d-%d characters, ", knowledge.MinRecallQuery, knowledge.MaxRecallQuery) +
			fmt.Sprintf("limit 1-%d (default %d), kind optional. If an entry shaped what you did, report it with recall_used and the queryId. ", knowledge.MaxRecall, knowledge.DefaultRecall) +
			"A guest company's part needs its agreement's read_memory grant.",
		Annotations: mcp.Annotations{ReadOnly: true},
	}, func(ctx context.Context, sc tenancy.Scope, in knowledge.RecallInput) (knowledge.RecallResult, error) {
		return s.knowledge().Recall(ctx, sc, in)
	},
		mcp.Prop("query", mcp.MinLength(knowledge.MinRecallQuery), mcp.MaxLength(knowledge.MaxRecallQuery)),
		mcp.Prop("limit", mcp.Minimum(1), mcp.Maximum(knowledge.MaxRecall), mcp.Default(knowledge.DefaultRecall)),
		mcp.Prop("kind", mcp.Enum(knowledge.Kinds...)),
	)
}

func learnTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "learn", Title: "Propose knowledge",
		Description: "Record something worth remembering for this project: a fact, procedure, pitfall or decision. It is always stored " +
			"as a candidate that people (or CI) must confirm before recall returns it; nothing you write reaches another agent on " +
			"its own. Secrets are redacted on write. Needs write access (and, for a guest company's part, its agreement's write_memory " +
			"grant). Returns {knowledgeId, status:\"candidate\", duplicateOf?} " +
			fmt.Sprintf("(duplicateOf names a near-identical entry you could read: a trusted one, or your own). title 1-%d, body 1-%d characters; expiresAt optional.", knowledge.MaxTitle, knowledge.MaxBody),
		Annotations: mcp.Annotations{},
	}, func(ctx context.Context, sc tenancy.Scope, in knowledge.LearnInput) (knowledge.LearnResult, error) {
		return s.knowledge().Learn(ctx, sc, in)
	}, append(entryArgs(),
		mcp.Prop("expiresAt", mcp.StringFormat("date-time"),
			mcp.Description("When the entry stops being true (ISO 8601); it is never recalled after.")))...)
}

type recallUsedInput struct {
	QueryID     string `json:"queryId"`
	KnowledgeID string `json:"knowledgeId"`
}

func recallUsedTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{Name: "recall_used", Title: "Report a recalled entry as used",
		Description: "Report that an entry returned by recall actually shaped what you did (optional, best-effort; it measures recall " +
			"quality). Only an entry that the named query returned is accepted, once. Returns {ok:true}.",
		Annotations: mcp.Annotations{Idempotent: false},
	}, func(ctx context.Context, sc tenancy.Scope, in recallUsedInput) (any, error) {
		if err := s.knowledge().RecallUsed(ctx, sc, in.QueryID, in.KnowledgeID); err != nil {
			return nil, err
		}
		return map[string]any{"ok": true}, nil
	}, mcp.Prop("queryId", idArg()), mcp.Prop("knowledgeId", idArg()))
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
