package desk

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
)

func itoa(n int) string { return strconv.Itoa(n) }

// The schemas are the contract's, with the bounds written from the constants the service
// checks.
var (
	limitProp  = `"limit":{"type":"integer","minimum":1,"maximum":` + itoa(MaxLimit) + `,"default":` + itoa(DefaultLimit) + `}`
	cursorProp = `"cursor":{"type":"string"}`
	queryProp  = `"query":{"type":"string","minLength":` + itoa(MinQueryLen) + `,"maxLength":` + itoa(MaxQueryLen) + `}`
)

// tool declares one desk tool whose handler decodes its arguments into In.
func tool[In, Out any](name, title, description, schema string, ann mcp.Annotations, run func(context.Context, tenancy.Scope, In) (Out, error)) mcp.Tool[tenancy.Scope] {
	return mcp.Tool[tenancy.Scope]{
		Name: name, Title: title, Description: description, InputSchema: json.RawMessage(schema), Annotations: ann,
		Handler: func(ctx context.Context, sc tenancy.Scope, args json.RawMessage) (any, error) {
			var in In
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, apperr.New(apperr.Invalid, "invalid arguments: %v", err)
			}
			return run(ctx, sc, in)
		},
	}
}

var (
	read  = mcp.Annotations{ReadOnly: true, Idempotent: true}
	write = mcp.Annotations{Idempotent: true} // appends; the same idempotency_key never appends twice
)

// Tools declares the six tools of /desk/mcp.
func (s *Service) Tools() []mcp.Tool[tenancy.Scope] {
	return []mcp.Tool[tenancy.Scope]{
		tool(ToolSearchConversations, "Search conversations",
			"Search the workspace's conversations by words in their subject and public messages (customer messages, member "+
				"replies, automated notifications; never private notes). Every word must match, as a word or the start of one, in "+
				"any order. Optional filters, combined with AND: status (open, pending, resolved) and inbox_id (from "+
				"relaydesk_list_inboxes). Only conversations in inboxes you can see are returned. Results are summaries, not "+
				"transcripts: read one with relaydesk_get_conversation. Sorted by updated_at descending, then id ascending; "+
				"limit defaults to 20 (at most 50). When next_cursor is not null, call again with the same arguments and that "+
				"cursor (it expires after 15 minutes). Requires the conversations:read scope.",
			`{"type":"object","properties":{`+queryProp+`,`+
				`"status":{"type":"string","enum":["open","pending","resolved"]},"inbox_id":{"type":"string"},`+
				limitProp+`,`+cursorProp+`},"required":["query"],"additionalProperties":false}`,
			read, s.SearchConversations),
		tool(ToolGetConversation, "Read a conversation",
			"Read one conversation (subject, status, inbox, assignee, customer, times) and a page of its messages, oldest "+
				"first. Each message has its type (customer, reply, note, automated), body, author and attachments as filename "+
				"and size only (never a download link or content). Private notes are left out unless include_private_notes is "+
				"true, which adds the internal notes you can already see. limit defaults to 20 (at most 50); when next_cursor is "+
				"not null, call again with the same arguments and that cursor (it expires after 15 minutes). A conversation that "+
				"does not exist or that you cannot access is NOT_FOUND either way. Requires the conversations:read scope.",
			`{"type":"object","properties":{"conversation_id":{"type":"string"},`+
				`"include_private_notes":{"type":"boolean","default":false},`+
				limitProp+`,`+cursorProp+`},"required":["conversation_id"],"additionalProperties":false}`,
			read, s.GetConversation),
		tool(ToolListInboxes, "List inboxes",
			"List the inboxes you can see, with each one's id, name and open_count (its conversations with status open). "+
				"Nothing of an inbox's mail connection (secrets, forwarding addresses) or other settings is returned. Sorted by "+
				"name, then id; limit defaults to 20 (at most 50); page on with next_cursor (valid 15 minutes, same arguments). "+
				"Use an inbox id to filter relaydesk_search_conversations or relaydesk_get_report. Requires the inboxes:read scope.",
			`{"type":"object","properties":{`+limitProp+`,`+cursorProp+`},"required":[],"additionalProperties":false}`,
			read, s.ListInboxes),
		tool(ToolFindSavedReplies, "Find saved replies",
			"Find the workspace's saved replies (reusable reply templates) whose title or body holds every word of the query. "+
				"Returns each template's id, title and editable body; reading one sends nothing to anybody: adapt it in your "+
				"draft. Sorted by title, then id; limit defaults to 20 (at most 50); page on with next_cursor (valid 15 "+
				"minutes, same arguments). Requires the saved_replies:read scope.",
			`{"type":"object","properties":{`+queryProp+`,`+limitProp+`,`+cursorProp+`},"required":["query"],"additionalProperties":false}`,
			read, s.FindSavedReplies),
		tool(ToolGetReport, "Daily support report",
			"Daily aggregate metrics for an inclusive date range of at most 31 days within the last 24 months, in the "+
				"workspace's timezone (one point per calendar day, including days that change to or from daylight saving). "+
				"conversation_volume counts conversations created that day; first_response_time is the mean, in elapsed "+
				"seconds, from creation to the first public reply by a member, over the conversations first answered that day "+
				"(private notes and automated notifications never count as a response); resolution_time is the mean seconds "+
				"from creation to resolution over the conversations resolved that day. A null value means nothing qualified, not "+
				"zero. No SLA or business-hours calculations. Optional inbox_id narrows to one inbox. Workspace owners and "+
				"admins only. Requires the reports:read scope.",
			`{"type":"object","properties":{"metric":{"type":"string","enum":["conversation_volume","first_response_time","resolution_time"]},`+
				`"start_date":{"type":"string","format":"date"},"end_date":{"type":"string","format":"date"},"inbox_id":{"type":"string"}},`+
				`"required":["metric","start_date","end_date"],"additionalProperties":false}`,
			read, s.GetReport),
		tool(ToolAddPrivateNote, "Add a private note",
			"Append one internal note to an existing conversation, visible to the team only. Call it only after the user "+
				"explicitly approved the note's text. A note never emails the customer, never changes the status, and triggers "+
				"no rule. Send a new unique idempotency_key (8-128 characters) per note and the same key when retrying it: within "+
				"24 hours the same key with the same arguments returns the original note with replayed true; the same key with "+
				"other arguments is IDEMPOTENCY_CONFLICT. Needs the Scale plan (PLAN_REQUIRED on Growth: the user adds the note in "+
				"RelayDesk). Notes holding a credential are refused. Requires the notes:write scope.",
			`{"type":"object","properties":{"conversation_id":{"type":"string"},`+
				`"body":{"type":"string","minLength":1,"maxLength":`+itoa(MaxNoteBody)+`},`+
				`"idempotency_key":{"type":"string","minLength":`+itoa(MinIdempotencyKey)+`,"maxLength":`+itoa(MaxIdempotencyKey)+`}},`+
				`"required":["conversation_id","body","idempotency_key"],"additionalProperties":false}`,
			write, s.AddPrivateNote),
	}
}
