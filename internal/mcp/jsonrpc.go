package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/relayroom/relayroom/internal/text"
)

// JSON-RPC error codes. The -32000 range is ours: -32001 is the authentication failure
// the rooms spec documents; -32020 and -32022 are the stateless era's header-mismatch and
// unsupported-version codes, numbered as the go-sdk defines them.
const (
	codeParseError                 = -32700
	codeInvalidRequest             = -32600
	codeMethodNotFound             = -32601
	codeInvalidParams              = -32602
	codeInternalError              = -32603
	codeServerError                = -32000
	codeUnauthorized               = -32001
	codeHeaderMismatch             = -32020
	codeUnsupportedProtocolVersion = -32022
)

// protocolError is a failure answered as a JSON-RPC error rather than a tool result.
// status is the HTTP status to send; zero means the era decides (see statusFor).
type protocolError struct {
	status  int
	code    int
	message string
	data    any
	header  http.Header
	// auth, when set, is a refusal of the caller's credential found while settling a
	// provisional scope (caller.settle): answered as Authenticate's refusal.
	auth error
}

// statusFor gives a JSON-RPC error its HTTP status. Handshake-era method errors travel
// with 200; the stateless era gives them the statuses its spec requires (and the go-sdk
// server sends): 404 for an unknown method, 400 for bad params, versions and headers.
func statusFor(e *protocolError, er era) int {
	if e.status != 0 {
		return e.status
	}
	if er != eraStateless {
		return http.StatusOK
	}
	switch e.code {
	case codeMethodNotFound:
		return http.StatusNotFound
	case codeInvalidParams, codeHeaderMismatch, codeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// message is one parsed JSON-RPC message. Fields are kept raw so that unknown members
// are tolerated and ids are echoed byte for byte.
type message struct {
	id     json.RawMessage // nil when absent (a notification or a response)
	method string
	params json.RawMessage // nil when absent or null
	// response is true for a JSON-RPC response (result or error, no method): we never
	// send requests, so it is accepted and ignored.
	response bool
}

func (m *message) isCall() bool { return m.id != nil && !m.response }

// replyID is the id an error response carries: the request's, or null when there is none.
func (m *message) replyID() json.RawMessage {
	if m == nil || m.id == nil {
		return nullID
	}
	return m.id
}

var nullID = json.RawMessage("null")

// parseMessage decodes one JSON-RPC message. Errors carry HTTP 400: the spec sends
// -32700 and -32600 with it in both eras. On error the returned message, when not nil,
// holds the id so that the answer can echo it.
func parseMessage(body []byte) (*message, *protocolError) {
	// One pass: Unmarshal checks the whole body is valid JSON before it decodes any of
	// it, and says so with a SyntaxError; any other error is valid JSON of another shape.
	var fields map[string]json.RawMessage
	err := json.Unmarshal(body, &fields)
	var syntax *json.SyntaxError
	switch trimmed := bytes.TrimLeft(body, " \t\r\n"); {
	case errors.As(err, &syntax) && strings.Contains(syntax.Error(), "exceeded max depth"):
		// Valid JSON, but deeper than encoding/json reads: not a syntax fault of the client.
		return nil, &protocolError{status: http.StatusBadRequest, code: codeParseError,
			message: fmt.Sprintf("Parse error: the body nests more than %d levels deep", text.MaxDepth)}
	case errors.As(err, &syntax):
		return nil, &protocolError{status: http.StatusBadRequest, code: codeParseError, message: "Parse error: the body is not valid JSON"}
	case err != nil && len(trimmed) > 0 && trimmed[0] == '[':
		return nil, &protocolError{status: http.StatusBadRequest, code: codeInvalidRequest, message: "Batch requests are not supported"}
	case err != nil || fields == nil:
		return nil, invalidRequest("a JSON-RPC message must be a JSON object")
	}
	// A member named twice in the message (two methods, two tool names, two ids, two
	// arguments objects): encoding/json kept the last, while a gateway or a log may read
	// the first and see another call than the one that runs. Inside the arguments it is
	// the tool's argument error instead (checkText), as any fault of the arguments is.
	if path, err := text.CheckNames(body); errors.Is(err, text.ErrDuplicate) && !strings.HasPrefix(path, "params.arguments.") {
		return nil, invalidRequest(fmt.Sprintf("%s %v", path, err))
	}
	m := &message{}
	if raw, ok := fields["id"]; ok {
		if !validID(raw) {
			return nil, invalidRequest("id must be a string or a number")
		}
		m.id = raw
	}
	if v, ok := fields["jsonrpc"]; !ok || !bytes.Equal(bytes.TrimSpace(v), []byte(`"2.0"`)) {
		return m, invalidRequest(`jsonrpc must be "2.0"`)
	}
	rawMethod, hasMethod := fields["method"]
	if !hasMethod {
		_, hasResult := fields["result"]
		_, hasError := fields["error"]
		if m.id != nil && (hasResult || hasError) {
			m.response = true
			return m, nil
		}
		return m, invalidRequest("method is required")
	}
	if err := json.Unmarshal(rawMethod, &m.method); err != nil || m.method == "" {
		return m, invalidRequest("method must be a non-empty string")
	}
	if p, ok := fields["params"]; ok && !isNull(p) {
		m.params = p
	}
	return m, nil
}

func invalidRequest(msg string) *protocolError {
	return &protocolError{status: http.StatusBadRequest, code: codeInvalidRequest, message: "Invalid Request: " + msg}
}

// validID accepts what MCP allows as a request id: a string or a number, never null. A
// string must be text (valid UTF-8, no lone surrogate): the id is echoed as sent, and one
// with invalid bytes made the answer itself invalid JSON.
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; {
	case c == '"':
		_, err := text.CheckJSON(raw)
		return err == nil
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := strconv.ParseFloat(string(raw), 64)
		return err == nil
	}
	return false
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// rpcResponse is the one shape every JSON-RPC answer takes.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func resultResponse(id json.RawMessage, result any) rpcResponse {
	return rpcResponse{JSONRPC: "2.0", ID: id, Result: result}
}

func errorResponse(id json.RawMessage, e *protocolError) rpcResponse {
	return rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: e.code, Message: e.message, Data: e.data}}
}

// encodeJSON marshals without HTML escaping: the text is read by models and people, and
// "<" is not a hazard in an application/json body.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// quote renders a client-supplied string inside a message the way JSON would, its first
// text.MaxEcho bytes (cut at a character's start) and "…" when it is longer.
func quote(s string) string {
	s = text.Cut(s, text.MaxEcho)
	b, err := encodeJSON(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return string(b)
}

// WriteHTTPError answers an MCP request that middleware refuses before the handler
// runs (a forbidden Origin, a limit): a JSON-RPC error without id, code -32000, so that
// a client reads the refusal the same way it reads every other.
func WriteHTTPError(w http.ResponseWriter, status int, message string) {
	body, err := encodeJSON(errorResponse(nullID, &protocolError{code: codeServerError, message: message}))
	if err != nil {
		// Encoding a string message cannot fail; keep the status even so.
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client is gone if this fails; nothing else to tell
}
