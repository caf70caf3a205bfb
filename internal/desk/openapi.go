package desk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/mcp"
)

// OpenAPIPath is where `make generate` writes the ingest API's description, from the
// repository's root.
const OpenAPIPath = "api/desk-ingest.openapi.json"

// The ingest API's description is derived from the Go types its handlers decode and
// answer (IngestConversation, IngestAppend, IngestResult, httpapi.CodedError), by the
// same derivation as the tools' input schemas (mcp.SchemaFor), with the bounds of the
// constants the handlers check. docs/desk.md is its prose.

func ingestMessageOptions() []mcp.SchemaOption {
	return []mcp.SchemaOption{
		mcp.Prop("external_id", mcp.MinLength(1), mcp.MaxLength(MaxExternalID),
			mcp.Description("The sender's id of the message: the same id again on the same conversation writes nothing.")),
		mcp.Prop("type", mcp.Enum(TypeCustomer, TypeReply, TypeAutomated),
			mcp.Description("customer: from the customer; reply: a member's public reply (author_email names an active member); automated: a notification.")),
		mcp.Prop("body", mcp.MinLength(1), mcp.MaxLength(MaxMessageBody)),
		mcp.Prop("author_email", mcp.StringFormat("email"), mcp.MaxLength(MaxEmail)),
		mcp.Prop("attachments", mcp.MaxItems(MaxAttachments), mcp.Description("Metadata only: nothing is downloaded or stored but the name and size."),
			mcp.Items(mcp.Prop("filename", mcp.MinLength(1), mcp.MaxLength(MaxFilename)), mcp.Prop("size", mcp.Minimum(0)))),
		mcp.Prop("created_at", mcp.StringFormat("date-time"),
			mcp.Description(fmt.Sprintf("Defaults to now; at most %d minutes in the future, not before the conversation, not before %s.", int(MaxIngestSkew.Minutes()), earliest().Format(time.DateOnly)))),
	}
}

func statusOption() mcp.SchemaOption {
	return mcp.Prop("status", mcp.Enum(StatusOpen, StatusPending, StatusResolved))
}

// IngestOpenAPI is the OpenAPI 3.1 document of the ingest API (api/desk-ingest.openapi.json).
func IngestOpenAPI() ([]byte, error) {
	conv, err := mcp.SchemaFor[IngestConversation](
		mcp.Prop("external_id", mcp.MinLength(1), mcp.MaxLength(MaxExternalID),
			mcp.Description("The sender's id of the conversation: the same id again writes nothing and answers the stored conversation.")),
		mcp.Prop("inbox_id", mcp.Description("An inbox of the token's workspace, as relaydesk_list_inboxes names it (inbox_2).")),
		mcp.Prop("subject", mcp.MaxLength(MaxSubject)),
		mcp.Prop("status", mcp.Enum(StatusOpen, StatusPending, StatusResolved), mcp.Default(StatusOpen)),
		mcp.Prop("customer_email", mcp.StringFormat("email"), mcp.MaxLength(MaxEmail)),
		mcp.Prop("customer_name", mcp.MaxLength(MaxCustomerName)),
		mcp.Prop("assignee_email", mcp.StringFormat("email"), mcp.MaxLength(MaxEmail), mcp.Description("An active member of the workspace.")),
		mcp.Prop("created_at", mcp.StringFormat("date-time"), mcp.Description("Defaults to now.")),
		mcp.Prop("resolved_at", mcp.StringFormat("date-time"),
			mcp.Description("When a resolved conversation was resolved; defaults to its last message's time.")),
		mcp.Prop("messages", mcp.MaxItems(MaxIngestMessages), mcp.Items(ingestMessageOptions()...)),
	)
	if err != nil {
		return nil, fmt.Errorf("desk: openapi: conversation: %w", err)
	}
	appendBody, err := mcp.SchemaFor[IngestAppend](append(ingestMessageOptions(),
		mcp.Prop("status", mcp.Enum(StatusOpen, StatusPending, StatusResolved),
			mcp.Description("Sets the conversation's status in the same transaction (resolving it at the message's time).")))...)
	if err != nil {
		return nil, fmt.Errorf("desk: openapi: message: %w", err)
	}
	result, err := mcp.SchemaFor[IngestResult]()
	if err != nil {
		return nil, fmt.Errorf("desk: openapi: result: %w", err)
	}
	failure, err := mcp.SchemaFor[httpapi.CodedError]()
	if err != nil {
		return nil, fmt.Errorf("desk: openapi: error: %w", err)
	}
	type media struct {
		Schema json.RawMessage `json:"schema"`
	}
	type response struct {
		Description string            `json:"description"`
		Content     map[string]media  `json:"content"`
		Headers     map[string]header `json:"headers,omitempty"`
	}
	ref := func(name string) json.RawMessage {
		return json.RawMessage(`{"$ref":"#/components/schemas/` + name + `"}`)
	}
	jsonOf := func(name string) map[string]media { return map[string]media{"application/json": {Schema: ref(name)}} }
	errorsOf := func(extra map[int]string) map[string]response {
		out := map[string]response{}
		for status, when := range map[int]string{
			http.StatusBadRequest:   "invalid: the body is not one JSON object of the fields above, or a field is out of bounds (the message names it).",
			http.StatusUnauthorized: "unauthenticated: a missing, unknown, revoked or expired token (with WWW-Authenticate), or AUTH_REQUIRED when its holder was removed or deactivated.",
			http.StatusForbidden:    "forbidden: the token lacks " + ScopeIngestWrite + ", or its holder is not an owner or admin.",
			http.StatusNotFound:     "not_found: the inbox or conversation is absent or in another workspace, alike.",
			http.StatusTooManyRequests: fmt.Sprintf("rate_limited: more than %d ingest calls a minute in the workspace; Retry-After says when to retry.",
				IngestPerWindow),
			http.StatusServiceUnavailable: "unavailable: the database is unreachable or timed out; retry.",
		} {
			out[strconv.Itoa(status)] = response{Description: when, Content: jsonOf("Error")}
		}
		for status, when := range extra {
			out[strconv.Itoa(status)] = response{Description: when, Content: jsonOf("Error")}
		}
		out["429"] = response{Description: out["429"].Description, Content: jsonOf("Error"),
			Headers: map[string]header{"Retry-After": {Description: "Seconds until the window ends.", Schema: json.RawMessage(`{"type":"integer","minimum":1}`)}}}
		return out
	}
	type operation struct {
		OperationID string                `json:"operationId"`
		Summary     string                `json:"summary"`
		Parameters  []parameter           `json:"parameters,omitempty"`
		RequestBody map[string]any        `json:"requestBody"`
		Responses   map[string]response   `json:"responses"`
		Security    []map[string][]string `json:"security"`
	}
	body := func(name string) map[string]any { return map[string]any{"required": true, "content": jsonOf(name)} }
	created := func(what string, extra map[int]string) map[string]response {
		r := errorsOf(extra)
		r["201"] = response{Description: "The " + what + " was stored.", Content: jsonOf("Result")}
		r["200"] = response{Description: "The external id was already stored: nothing was written; the stored " + what + " is answered.", Content: jsonOf("Result")}
		return r
	}
	security := []map[string][]string{{"token": {ScopeIngestWrite}}}
	doc := struct {
		OpenAPI    string                          `json:"openapi"`
		Info       map[string]string               `json:"info"`
		Paths      map[string]map[string]operation `json:"paths"`
		Components map[string]any                  `json:"components"`
	}{
		OpenAPI: "3.1.0",
		Info: map[string]string{"title": "relayroom desk ingest API", "version": "1",
			"description": "A workspace's mail gateway, or a sync from another helpdesk, writes conversations and messages (docs/desk.md, \"The ingest API\"). " +
				"The token fixes the workspace; nothing is sent and nothing is triggered."},
		Paths: map[string]map[string]operation{
			RouteIngestConversations: {"post": {OperationID: "createConversation", Summary: fmt.Sprintf("Create a conversation with its history (at most %d messages).", MaxIngestMessages),
				RequestBody: body("Conversation"), Security: security,
				Responses: created("conversation", map[int]string{http.StatusConflict: ReasonExternalIDConflict + ": the external_id names a stored conversation with another inbox, subject or customer_email, or a message's external_id names a message of another conversation; nothing was written."})}},
			RouteIngestMessages: {"post": {OperationID: "appendMessage", Summary: "Append one message to a conversation, optionally setting its status.",
				Parameters:  []parameter{{Name: "conversation_id", In: "path", Required: true, Schema: json.RawMessage(`{"type":"string"}`)}},
				RequestBody: body("Message"), Security: security,
				Responses: created("message", map[int]string{http.StatusConflict: ReasonExternalIDConflict + ": the message's external_id names a message of another conversation, or one with another type or body; nothing was written."})}},
		},
		Components: map[string]any{
			"schemas": map[string]json.RawMessage{"Conversation": conv, "Message": appendBody, "Result": result, "Error": failure},
			"securitySchemes": map[string]any{"token": map[string]string{"type": "http", "scheme": "bearer",
				"description": fmt.Sprintf("A personal access token with the %s scope (relayroom admin desk token create --scopes %s), of an owner or admin; at most %d bytes of body.",
					ScopeIngestWrite, ScopeIngestWrite, MaxIngestBytes)}},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("desk: openapi: %w", err)
	}
	return append(b, '\n'), nil
}

type header struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

type parameter struct {
	Name     string          `json:"name"`
	In       string          `json:"in"`
	Required bool            `json:"required"`
	Schema   json.RawMessage `json:"schema"`
}
