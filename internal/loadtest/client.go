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

// Answer is a successful tool result.
type Answer struct {
	Structured map[string]any // structuredContent (threads), or the text parsed as a JSON object (rooms)
	Text       string         // the first text block
}

// Field returns a top-level string field of the result ("" when absent).
func (a Answer) Field(name string) string {
	s, _ := a.Structured[name].(string)
	return s
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
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Structured map[string]any `json:"structuredContent"`
			IsError    bool           `json:"isError"`
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
	a := Answer{Structured: msg.Result.Structured}
	if len(msg.Result.Content) > 0 {
		a.Text = msg.Result.Content[0].Text
	}
	if msg.Result.IsError {
		return a, &CallError{Status: resp.StatusCode, Msg: clip(a.Text)}
	}
	if a.Structured == nil && strings.HasPrefix(strings.TrimSpace(a.Text), "{") {
		// Rooms results are one text block of JSON; an unparsable one just has no fields.
		if err := json.Unmarshal([]byte(a.Text), &a.Structured); err != nil {
			a.Structured = nil
		}
	}
	return a, nil
}
