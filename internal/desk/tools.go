package desk

import (
	"fmt"

	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Tools declares the six tools of /desk/mcp, in the contract's order.
func (s *Service) Tools() []mcp.Tool[tenancy.Scope] {
	return []mcp.Tool[tenancy.Scope]{
		searchTool(s), getConversationTool(s), listInboxesTool(s), findSavedRepliesTool(s), reportTool(s), noteTool(s),
	}
}

var (
	readOnly = mcp.Annotations{ReadOnly: true, Idempotent: true}
	// The note appends; the same idempotency_key never appends twice.
	appends = mcp.Annotations{Idempotent: true}
)

// The arguments every paged tool shares, bounded by the constants the service holds.
func pageArgs() []mcp.SchemaOption {
	return []mcp.SchemaOption{mcp.Prop("limit", mcp.Minimum(1), mcp.Maximum(MaxLimit), mcp.Default(DefaultLimit))}
}

func queryArg() mcp.SchemaOption {
	return mcp.Prop("query", mcp.MinLength(MinQueryLen), mcp.MaxLength(MaxQueryLen))
}

// paging is what every paged tool's description says about its pages.
var paging = fmt.Sprintf("limit defaults to %d (at most %d); when next_cursor is not null, call again with the same arguments "+
	"and that cursor (it expires after %d minutes).", DefaultLimit, MaxLimit, int(CursorTTL.Minutes()))

func searchTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{
		Name: ToolSearchConversations, Title: "Search conversations",
		Description: "Search the workspace's conversations by words in their subject and public messages (customer messages, member " +
			"replies, automated notifications; never private notes). Every word must match, as a word or the start of one, in any " +
			"order. Optional filters, combined with AND: status (open, pending, resolved) and inbox_id (from relaydesk_list_inboxes). " +
			"Only conversations in inboxes you can see are returned. Results are summaries, not transcripts: read one with " +
			"relaydesk_get_conversation. Sorted by updated_at descending, then id ascending; " + paging +
			" Requires the conversations:read scope.",
		Annotations: readOnly,
	}, s.SearchConversations,
		append([]mcp.SchemaOption{queryArg(), mcp.Prop("status", mcp.Enum(StatusOpen, StatusPending, StatusResolved))}, pageArgs()...)...)
}

func getConversationTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{
		Name: ToolGetConversation, Title: "Read a conversation",
		Description: "Read one conversation (subject, status, inbox, assignee, customer, times) and a page of its messages, oldest first. " +
			"Each message has its type (customer, reply, note, automated), body, author and attachments as filename and size only " +
			"(never a download link or content). Private notes are left out unless include_private_notes is true, which adds the " +
			"internal notes you can already see. " + paging + " A conversation that does not exist and one you cannot access are " +
			"both NOT_FOUND. Requires the conversations:read scope.",
		Annotations: readOnly,
	}, s.GetConversation, append([]mcp.SchemaOption{mcp.Prop("include_private_notes", mcp.Default(false))}, pageArgs()...)...)
}

func listInboxesTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{
		Name: ToolListInboxes, Title: "List inboxes",
		Description: "List the inboxes you can see, each with its id, name and open_count (its conversations with status open). " +
			"Nothing of an inbox's mail connection (secrets, forwarding addresses) or other settings is returned. Sorted by name, " +
			"then id; " + paging + " Use an inbox id to filter relaydesk_search_conversations or relaydesk_get_report. Requires " +
			"the inboxes:read scope.",
		Annotations: readOnly,
	}, s.ListInboxes, pageArgs()...)
}

func findSavedRepliesTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{
		Name: ToolFindSavedReplies, Title: "Find saved replies",
		Description: "Find the workspace's saved replies (reusable reply templates) whose title or body holds every word of the query. " +
			"Returns each template's id, title and editable body. Reading one sends nothing to anybody: adapt it in your draft. " +
			"Sorted by title, then id; " + paging + " Requires the saved_replies:read scope.",
		Annotations: readOnly,
	}, s.FindSavedReplies, append([]mcp.SchemaOption{queryArg()}, pageArgs()...)...)
}

func reportTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{
		Name: ToolGetReport, Title: "Daily support report",
		Description: fmt.Sprintf("Daily aggregate metrics for an inclusive date range of at most %d days, within the last %d months, "+
			"in the workspace's timezone: one point per calendar day, days that change to or from daylight saving time included. ",
			MaxReportDays, ReportHistoryMonths) +
			"conversation_volume counts the conversations created that day; first_response_time is the mean, in elapsed seconds, " +
			"from creation to the first public reply by a member, over the conversations first answered that day (private notes " +
			"and automated notifications never count as a response); resolution_time is the mean seconds from creation to " +
			"resolution, over the conversations resolved that day. A null value means nothing qualified that day, not zero. No SLA " +
			"or business-hours calculations. Optional inbox_id narrows to one inbox. Workspace owners and admins only. Requires " +
			"the reports:read scope.",
		Annotations: readOnly,
	}, s.GetReport,
		mcp.Prop("metric", mcp.Enum(Metrics...)),
		mcp.Prop("start_date", mcp.StringFormat("date")),
		mcp.Prop("end_date", mcp.StringFormat("date")),
	)
}

func noteTool(s *Service) mcp.Tool[tenancy.Scope] {
	return mcp.NewTool(mcp.Tool[tenancy.Scope]{
		Name: ToolAddPrivateNote, Title: "Add a private note",
		Description: "Append one internal note, visible to the team only, to an existing conversation. Call it only after the user " +
			"explicitly approved the note's text. A note never emails the customer, never changes the status and triggers no rule. " +
			fmt.Sprintf("Send a new unique idempotency_key (%d-%d characters) with each note and the same key when retrying it: ", MinIdempotencyKey, MaxIdempotencyKey) +
			fmt.Sprintf("within %d hours the same key with the same arguments returns the original note with replayed true, and ", int(NoteKeyRetention.Hours())) +
			"the same key with other arguments is IDEMPOTENCY_CONFLICT. Needs the Scale plan (on Growth, PLAN_REQUIRED: the user " +
			"adds the note in RelayDesk). A note holding a credential is refused. Requires the notes:write scope.",
		Annotations: appends,
	}, s.AddPrivateNote,
		mcp.Prop("body", mcp.MinLength(1), mcp.MaxLength(MaxNoteBody)),
		mcp.Prop("idempotency_key", mcp.MinLength(MinIdempotencyKey), mcp.MaxLength(MaxIdempotencyKey)),
	)
}
