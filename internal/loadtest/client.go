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

// Call is one tools/call, or one call of another JSON-RPC method without parameters.
type Call struct {
	URL            string
	Key            string // sent as X-Agent-Key
	Tool           string
	Args           any    // JSON-encoded as the arguments
	IdempotencyKey string // sent when not empty
	// Method, when set, is the JSON-RPC method called instead of tools/call (ping, as a
	// reference row); Tool and Args are then not sent.
	Method string
}

// Answer is a successful tool result. It keeps the result's JSON as it came and reads a
// field only when asked: a measured call discards its answer, and decoding every answer
// would spend the load generator's CPU (on the server's two cores) on nothing.
type Answer struct {
	result json.RawMessage // the JSON-RPC result object
}

// parts decodes the result's content blocks and structuredContent.
func (a Answer) parts() (content, structured json.RawMessage) {
	var r struct {
		Content    json.RawMessage `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(a.result, &r) != nil {
		return nil, nil
	}
	return r.Content, r.Structured
}

// Text returns the first text block ("" when there is none).
func (a Answer) Text() string {
	content, _ := a.parts()
	return firstText(content)
}

func firstText(content json.RawMessage) string {
	var blocks []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil || len(blocks) == 0 {
		return ""
	}
	return blocks[0].Text
}

// Field returns a top-level string field of the result ("" when absent): of
// structuredContent, or of the text parsed as a JSON object (rooms results are one text
// block of JSON; an unparsable one just has no fields).
func (a Answer) Field(name string) string {
	content, structured := a.parts()
	obj := []byte(structured)
	if len(obj) == 0 || string(obj) == "null" {
		obj = []byte(strings.TrimSpace(firstText(content)))
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

// Get fetches url and fails unless it answers 200; the body is read and discarded, as a
// measured call's answer is.
func (c *Client) Get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := readAnswer(resp)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return &CallError{Status: resp.StatusCode, Msg: clip(string(raw))}
	}
	return nil
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

// maxAnswerPresize bounds the buffer sized from an answer's Content-Length before it is read.
const maxAnswerPresize = 1 << 20

// readAnswer reads the body in one allocation when its length is declared (io.ReadAll
// grows its buffer step by step).
func readAnswer(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxAnswerPresize {
		raw := make([]byte, n)
		_, err := io.ReadFull(resp.Body, raw)
		return raw, err
	}
	return io.ReadAll(resp.Body)
}

// Do makes one call. It fails on a transport error, a non-200 status, a JSON-RPC error
// and a tool result with isError (*CallError for the last three).
func (c *Client) Do(ctx context.Context, call Call) (Answer, error) {
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	rpc := map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": call.Tool, "arguments": args},
	}
	if call.Method != "" {
		rpc = map[string]any{"jsonrpc": "2.0", "id": 1, "method": call.Method}
	}
	body, err := json.Marshal(rpc)
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
	raw, err := readAnswer(resp)
	if err != nil {
		return Answer{}, fmt.Errorf("read answer: %w", err)
	}
	retry := resp.Header.Get("Retry-After")
	if resp.StatusCode == http.StatusOK {
		if result, ok := plainSuccess(raw); ok {
			return Answer{result: result}, nil
		}
	}
	var msg struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return Answer{}, &CallError{Status: resp.StatusCode, Msg: clip(string(raw)), RetryAfter: retry}
	}
	if msg.Error != nil {
		return Answer{}, &CallError{Status: resp.StatusCode, Code: msg.Error.Code, Msg: clip(msg.Error.Message), RetryAfter: retry}
	}
	if resp.StatusCode != http.StatusOK || len(msg.Result) == 0 || string(msg.Result) == "null" {
		return Answer{}, &CallError{Status: resp.StatusCode, Msg: clip(string(raw)), RetryAfter: retry}
	}
	a := Answer{result: msg.Result}
	var flag struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(msg.Result, &flag); err != nil {
		return Answer{}, &CallError{Status: resp.StatusCode, Msg: clip(string(raw))}
	}
	if flag.IsError {
		return a, &CallError{Status: resp.StatusCode, Msg: clip(a.Text())}
	}
	return a, nil
}

// The layout of a successful answer as relayroom writes it: the result object last, its
// isError member after content and structuredContent.
const (
	answerHead    = `{"jsonrpc":"2.0","id":1,"result":{`
	answerIsError = `,"isError":false`
)

// plainSuccess recognises a successful tool answer in relayroom's own layout without
// decoding it, and returns its result object. Decoding a 13 KB inbox answer with
// encoding/json took about a third of the load generator's CPU per call, on the cores the
// server is measured on. Only the result's own isError member can be the last
// `,"isError":` of the body: it follows content and structuredContent (a member inside
// them is written before it), and inside a JSON string the quotes would be escaped. The
// answer's validity as JSON is the server's tests' concern (TestToolAnswerBytes); any
// other layout, an error or an isError of true takes the decoding path.
func plainSuccess(raw []byte) (json.RawMessage, bool) {
	body := bytes.TrimRight(raw, " \t\r\n")
	if !bytes.HasPrefix(body, []byte(answerHead)) || !bytes.HasSuffix(body, []byte("}}")) {
		return nil, false
	}
	result := body[len(answerHead)-1 : len(body)-1]
	i := bytes.LastIndex(result, []byte(`,"isError":`))
	if i < 0 || !bytes.HasPrefix(result[i:], []byte(answerIsError)) {
		return nil, false
	}
	// After isError only resultType, a fixed word, may follow.
	if rest := result[i+len(answerIsError):]; len(rest) > 1 && !bytes.HasPrefix(rest, []byte(`,"resultType":"`)) {
		return nil, false
	}
	return json.RawMessage(result), true
}
