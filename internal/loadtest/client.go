package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// IdempotencyHeader is the header a client sends so that a retried write is applied once
// (the IETF draft's name). A server that does not know it ignores it.
const IdempotencyHeader = "Idempotency-Key"

// Client calls MCP tools over plain HTTP: one JSON-RPC message per POST, as any client of
// the stateless transport does.
type Client struct {
	HTTP *http.Client
}

// NewClient keeps up to conns connections open to the server (one per worker) and bounds
// every call by timeout. local, when not nil, is the source address (a second loopback
// address makes a flood come from another client).
func NewClient(conns int, timeout time.Duration, local net.Addr) *Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: local}
	return &Client{HTTP: &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
	}}
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.HTTP.CloseIdleConnections() }

// Call is one tools/call.
type Call struct {
	URL            string
	Key            string // sent as X-Agent-Key
	Tool           string
	Args           any    // JSON-encoded as the arguments
	IdempotencyKey string // sent when not empty
}

// Answer is a successful tool result. It keeps the result's JSON as it came and reads a
// field only when asked: a measured call discards its answer, and decoding every answer
// into maps would spend the load generator's CPU (on the server's two cores) on nothing.
type Answer struct {
	structured json.RawMessage // structuredContent (threads), absent for rooms
	content    json.RawMessage // the content blocks
}

// Text returns the first text block ("" when there is none).
func (a Answer) Text() string {
	var blocks []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(a.content, &blocks) != nil || len(blocks) == 0 {
		return ""
	}
	return blocks[0].Text
}

// Field returns a top-level string field of the result ("" when absent): of
// structuredContent, or of the text parsed as a JSON object (rooms results are one text
// block of JSON; an unparsable one just has no fields).
func (a Answer) Field(name string) string {
	obj := []byte(a.structured)
	if len(obj) == 0 || string(obj) == "null" {
		obj = []byte(strings.TrimSpace(a.Text()))
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return ""
	}
	var v string
	if json.Unmarshal(fields[name], &v) != nil {
		return ""
	}
	return v
}

// CallError is a call that reached the server and was refused or failed there.
type CallError struct {
	Status     int    // HTTP status
	Code       int    // JSON-RPC error code, 0 when the failure is a tool result with isError
	Msg        string // first bytes of the message
	RetryAfter string // the Retry-After header, when the server sent one
}

func (e *CallError) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("HTTP %d, JSON-RPC %d: %s", e.Status, e.Code, e.Msg)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Msg)
}

// maxErrorText bounds the text an error keeps: enough to recognise it in a table.
const maxErrorText = 120

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxErrorText {
		return s[:maxErrorText] + "…"
	}
	return s
}

// Do makes one call. It fails on a transport error, a non-200 status, a JSON-RPC error
// and a tool result with isError (*CallError for the last three).
func (c *Client) Do(ctx context.Context, call Call) (Answer, error) {
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": call.Tool, "arguments": args},
	})
	if err != nil {
		return Answer{}, fmt.Errorf("encode %s: %w", call.Tool, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if call.Key != "" {
		req.Header.Set("X-Agent-Key", call.Key)
	}
	if call.IdempotencyKey != "" {
		req.Header.Set(IdempotencyHeader, call.IdempotencyKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, fmt.Errorf("read answer: %w", err)
	}
	var msg struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result *struct {
			Content    json.RawMessage `json:"content"`
			Structured json.RawMessage `json:"structuredContent"`
			IsError    bool            `json:"isError"`
		} `json:"result"`
	}
	retry := resp.Header.Get("Retry-After")
	if err := json.Unmarshal(raw, &msg); err != nil {
		return Answer{}, &CallError{Status: resp.StatusCode, Msg: clip(string(raw)), RetryAfter: retry}
	}
	if msg.Error != nil {
		return Answer{}, &CallError{Status: resp.StatusCode, Code: msg.Error.Code, Msg: clip(msg.Error.Message), RetryAfter: retry}
	}
	if resp.StatusCode != http.StatusOK || msg.Result == nil {
		return Answer{}, &CallError{Status: resp.StatusCode, Msg: clip(string(raw)), RetryAfter: retry}
	}
	a := Answer{structured: msg.Result.Structured, content: msg.Result.Content}
	if msg.Result.IsError {
		return a, &CallError{Status: resp.StatusCode, Msg: clip(a.Text())}
	}
	return a, nil
}
