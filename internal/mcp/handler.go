package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
)

// Endpoint is one MCP endpoint: its toolset, how a request becomes a caller's scope, and
// how its results look. S is the scope type the toolset's handlers receive.
type Endpoint[S any] struct {
	Name          string // "threads" | "rooms" | "all_rooms" | "desk": the metrics and log label
	Service       string // "service" in the plain-GET description; ServerName when empty
	ServerName    string // serverInfo.name
	ServerVersion string // serverInfo.version
	Instructions  string // sent by initialize and server/discover when not empty

	// Authenticate resolves the request's credential. It runs on every POST before any
	// method. Errors are *apperr.Error: Unauthenticated (401), Forbidden (403), NotFound
	// (404), Invalid (400), RateLimited (429), Unavailable (503); anything else is an
	// internal error.
	Authenticate func(ctx context.Context, r *http.Request) (S, error)
	// Challenge returns the WWW-Authenticate value for a 401 or 403 refusal; "" sends
	// none on a 403 and a bare "Bearer" on a 401 (a 401 must carry one).
	Challenge func(r *http.Request, err *apperr.Error) string
	// Describe adds fields to the plain-GET description (e.g. project_id). It runs
	// without authentication: return only what the URL itself reveals. An error (an
	// *apperr.Error, answered like Authenticate's) says the URL cannot name anything
	// this endpoint serves; return the error a caller gets for something it cannot see.
	Describe func(r *http.Request) (map[string]any, error)

	Tools  []Tool[S]
	Format Format

	// Provisional, when set, lets Authenticate return scopes whose verification travels
	// with the call's first database work (see Provisional).
	Provisional *Provisional[S]
}

// Options are the parts of the handler that come from the running service rather
// than from the endpoint's definition.
type Options struct {
	Logger *slog.Logger
	// RequestID returns the request id the service assigned (for logs and for the
	// message of internal errors). When nil or empty the handler makes one up.
	RequestID func(ctx context.Context) string
	// OnToolCall observes every call of a known tool: outcome is one of the
	// Outcome constants. Unknown tool names are not reported (unbounded labels).
	OnToolCall func(ctx context.Context, endpoint, tool, outcome string, d time.Duration)
	// MaxBodyBytes bounds a POST body; beyond it the answer is HTTP 413 with a
	// JSON-RPC -32600 error. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Formats adds JSON Schema "format" checks to the built-in ones (date, date-time),
	// or replaces them by name.
	Formats map[string]FormatChecker
	// Idempotency, when set, serves the Idempotency-Key header on write tools.
	Idempotency Idempotency
}

// DefaultMaxBodyBytes is the POST body limit when Options.MaxBodyBytes is zero; the same
// as the go-sdk's server default.
const DefaultMaxBodyBytes = 4 << 20

// Outcomes reported to Options.OnToolCall.
const (
	OutcomeOK          = "ok"          // the tool succeeded
	OutcomeInvalid     = "invalid"     // the arguments did not pass the schema
	OutcomeToolError   = "tool_error"  // the tool refused with an apperr (not found, conflict, …)
	OutcomeUnavailable = "unavailable" // infrastructure trouble worth retrying
	OutcomeInternal    = "internal"    // a bug: unexpected error, panic, bad result
)

type handler[S any] struct {
	ep      Endpoint[S]
	opts    Options
	log     *slog.Logger
	tools   []*compiledTool[S]
	byName  map[string]*compiledTool[S]
	listing []toolInfo
	server  implementation
}

// NewHandler checks an endpoint (tool names, schemas, annotations) and returns its
// handler. Every check that can fail at startup does, so that a call never finds a
// broken schema.
func NewHandler[S any](ep Endpoint[S], opts Options) (http.Handler, error) {
	if ep.Name == "" {
		return nil, errors.New("mcp: new handler: endpoint name is required")
	}
	if ep.ServerName == "" || ep.ServerVersion == "" {
		return nil, fmt.Errorf("mcp: new handler %s: ServerName and ServerVersion are required", ep.Name)
	}
	if ep.Authenticate == nil {
		return nil, fmt.Errorf("mcp: new handler %s: Authenticate is required", ep.Name)
	}
	if !ep.Format.valid() {
		return nil, fmt.Errorf("mcp: new handler %s: unknown format %v", ep.Name, ep.Format)
	}
	if ep.Service == "" {
		ep.Service = ep.ServerName
	}
	formats := builtinFormats()
	maps.Copy(formats, opts.Formats)
	tools, byName, err := compileTools(ep.Tools, ep.Format, formats)
	if err != nil {
		return nil, fmt.Errorf("mcp: new handler %s: %w", ep.Name, err)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler[S]{
		ep:     ep,
		opts:   opts,
		log:    log.With("endpoint", ep.Name),
		tools:  tools,
		byName: byName,
		server: implementation{Name: ep.ServerName, Version: ep.ServerVersion},
	}
	for _, t := range tools {
		h.listing = append(h.listing, t.info())
	}
	return h, nil
}

// reply is a complete HTTP answer, built before anything is written so that a panic
// anywhere still leaves room for a clean JSON-RPC error.
type reply struct {
	status int
	header http.Header
	body   any // encoded as JSON; nil sends no body
}

func (h *handler[S]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := h.requestID(r.Context())
	rep := h.serve(w, r, rid)
	if err := writeReply(w, rep, rid); err != nil {
		h.log.Error("mcp: encode response", "request_id", rid, "error", err)
	}
}

// serve routes by HTTP method and turns any panic into an internal JSON-RPC error.
func (h *handler[S]) serve(w http.ResponseWriter, r *http.Request, rid string) (rep reply) {
	defer func() {
		if p := recover(); p != nil {
			h.log.ErrorContext(r.Context(), "mcp: panic while serving", "request_id", rid, "panic", fmt.Sprint(p))
			rep = rpcReply(http.StatusOK, nullID, internalError(rid))
		}
	}()
	switch r.Method {
	case http.MethodPost:
		return h.servePost(w, r, rid)
	case http.MethodGet, http.MethodHead:
		if acceptsEventStream(r) {
			return methodNotAllowed("this endpoint offers no server-initiated stream and issues no sessions")
		}
		return h.describe(r, rid)
	case http.MethodDelete:
		return methodNotAllowed("this endpoint issues no sessions, so there is none to delete")
	}
	return methodNotAllowed("use POST for JSON-RPC or GET for the endpoint's description")
}

// writeReply sends rep. A body that does not encode is answered with an internal error
// instead, and the encoding error is returned for the log.
func writeReply(w http.ResponseWriter, rep reply, rid string) error {
	for k, vs := range rep.header {
		w.Header()[k] = vs
	}
	if rep.body == nil {
		w.WriteHeader(rep.status)
		return nil
	}
	body, err := encodeBody(rep.body)
	if err != nil {
		rep.status = http.StatusOK
		body, _ = encodeJSON(errorResponse(nullID, internalError(rid)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(rep.status)
	_, _ = w.Write(body) // the client went away: nothing left to tell it
	return err
}

// encodeBody encodes a reply's body: a tool's answer by appendToolAnswer, written once
// into a buffer of its size, anything else by encodeJSON.
func encodeBody(body any) ([]byte, error) {
	if r, ok := body.(rpcResponse); ok && r.Error == nil {
		if res, ok := r.Result.(toolResult); ok {
			return appendToolAnswer(make([]byte, 0, toolAnswerSize(r.ID, res)), r.ID, res)
		}
	}
	return encodeJSON(body)
}

// refusal is the answer to a request the service refuses before any message of it is
// read (a limit on what a client may hold of the server): a JSON-RPC -32000 error with
// id null, the HTTP status of the apperr's code, and Retry-After from its
// retry_after_seconds detail.
func refusal(e *apperr.Error) reply {
	pe := &protocolError{code: codeServerError, message: e.Message, header: http.Header{}}
	status := apperr.HTTPStatus(e.Code)
	if secs, ok := retryAfter(e); ok && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		pe.header.Set("Retry-After", strconv.Itoa(secs))
	}
	return rpcReply(status, nullID, pe)
}

// WriteRefusal writes refusal(e): the JSON-RPC answer of an MCP endpoint to a request
// the service refuses before the endpoint's handler sees it.
func WriteRefusal(w http.ResponseWriter, e *apperr.Error) {
	_ = writeReply(w, refusal(e), "") // refusal's body always encodes
}

// MsgContentCoding refuses a body sent with a Content-Encoding, on every route.
const MsgContentCoding = "Content-Encoding is not supported: send the body uncompressed"

// IdentityCoded reports whether a request's body is sent as it is: no route of the
// service decodes a Content-Encoding (a gzip-coded attachment was stored as its
// compressed bytes under the client's file name).
func IdentityCoded(r *http.Request) bool {
	ce := strings.TrimSpace(r.Header.Get("Content-Encoding"))
	return ce == "" || strings.EqualFold(ce, "identity")
}

// servePost handles one JSON-RPC message. The order is fixed: transport checks (media
// type, declared size), authentication, the body (read only for an authenticated caller),
// parsing, the version header, the era's own checks, then the method. Authentication
// needs only the headers and the URL, so a caller without a valid credential costs one
// credential check and at most peekBytes of its body, however much it sends.
func (h *handler[S]) servePost(w http.ResponseWriter, r *http.Request, rid string) reply {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return rpcReply(http.StatusUnsupportedMediaType, nullID, &protocolError{
				code: codeInvalidRequest, message: "Content-Type must be application/json",
			})
		}
	}
	if !IdentityCoded(r) {
		// Nothing decodes a coded body: it would be refused as JSON that is not valid.
		w.Header().Set("Accept-Encoding", "identity")
		return rpcReply(http.StatusUnsupportedMediaType, nullID, &protocolError{code: codeInvalidRequest, message: MsgContentCoding})
	}
	if r.ContentLength > h.opts.MaxBodyBytes {
		return h.tooLarge() // declared too large: refused unread
	}
	scope, err := h.ep.Authenticate(r.Context(), r)
	if err != nil {
		return h.authFailure(r, peekMessage(w, r), err, rid)
	}
	c := &caller[S]{r: r, scope: scope, prov: h.ep.Provisional}
	// early answers a request without running a method: only once its caller is settled
	// (a cached caller's key may have been revoked since), as every answer is.
	early := func(msg *message, rep reply) reply {
		if _, err := c.settle(r.Context()); err != nil {
			return h.authFailure(r, msg, err, rid)
		}
		return rep
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.opts.MaxBodyBytes+1))
	if err != nil {
		// The service's in-flight byte budget refuses a body it cannot hold with an apperr.
		if e, ok := apperr.As(err); ok {
			endReading(w)
			return early(nil, refusal(e))
		}
		// A body the client did not deliver (cut short, the connection reset, the read
		// timeout) runs nothing and tells nothing: answered without settling the scope,
		// whose check would run on the request's context, which net/http cancels as soon
		// as the read fails, and came out as an internal error logged at ERROR.
		return rpcReply(http.StatusBadRequest, nullID, &protocolError{code: codeParseError, message: "Parse error: cannot read the body"})
	}
	if int64(len(body)) > h.opts.MaxBodyBytes {
		return early(nil, h.tooLarge())
	}
	msg, perr := parseMessage(body)
	if perr != nil {
		return early(msg, rpcReply(perr.status, msg.replyID(), perr))
	}
	if perr := headerVersionError(r, msg); perr != nil {
		return early(msg, rpcReply(http.StatusBadRequest, msg.replyID(), perr))
	}
	if msg.response {
		return early(msg, reply{status: http.StatusAccepted})
	}
	er, perr := checkEra(r, msg)
	if perr != nil {
		return early(msg, rpcReply(statusFor(perr, er), msg.replyID(), perr))
	}
	if !msg.isCall() {
		// Notifications change nothing on a stateless server: accepted, no body.
		return early(msg, reply{status: http.StatusAccepted})
	}
	result, perr := h.dispatch(withIdempotencyKey(r), c, msg, er, rid)
	if perr != nil && perr.auth != nil {
		return h.authFailure(r, msg, perr.auth, rid)
	}
	if perr != nil {
		return rpcReply(statusFor(perr, er), msg.id, perr)
	}
	return reply{status: http.StatusOK, body: resultResponse(msg.id, result)}
}

func (h *handler[S]) tooLarge() reply {
	return rpcReply(http.StatusRequestEntityTooLarge, nullID, &protocolError{
		code: codeInvalidRequest, message: "Request body too large: the limit is " + strconv.FormatInt(h.opts.MaxBodyBytes, 10) + " bytes",
	})
}

// peekBytes bounds what a refused request's body is read for: enough for the id and the
// method of any ordinary message, which come first in every client we know.
const peekBytes = 1024

// peekWait bounds how long a refused request's peek waits for those bytes; the read
// deadline it sets also ends the connection's reading of the rest of the body.
const peekWait = time.Second

// peekMessage reads at most peekBytes of a refused request's body to echo its id (and to
// know whether it is the server/discover probe). Whatever cannot be read in time or
// parsed gives nil: the refusal then carries id null.
func peekMessage(w http.ResponseWriter, r *http.Request) *message {
	endReading(w)
	prefix, _ := io.ReadAll(io.LimitReader(r.Body, peekBytes)) // a short or failed read still gives what arrived
	if msg, perr := parseMessage(prefix); perr == nil || msg != nil {
		return msg
	}
	return scanHead(prefix)
}

// endReading gives a refused request peekWait more to send its body: net/http reads what
// is left of an unread body before it answers, and a slow sender must not hold the
// refusal (and its connection) until the server's read timeout.
func endReading(w http.ResponseWriter) {
	// ErrNotSupported (a recorder in tests) leaves the server's own read deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(peekWait))
}

// scanHead finds the top-level "id" and "method" of a JSON object cut short, stopping at
// the first member it cannot read whole.
func scanHead(prefix []byte) *message {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	m := &message{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		switch key {
		case "id":
			if validID(raw) {
				m.id = raw
			}
		case "method":
			_ = json.Unmarshal(raw, &m.method) // not a string: no method, as parseMessage would say
		}
	}
	return m
}

// authFailure answers a refused credential. Every refusal is a JSON-RPC error (never an
// HTML page) so that a client can read it.
func (h *handler[S]) authFailure(r *http.Request, msg *message, err error, rid string) reply {
	ctx := r.Context()
	e, ok := apperr.As(err)
	if (!ok || e.Code == apperr.Internal) && ctx.Err() != nil {
		// The client went away (or the server is stopping) while its credential was
		// checked: nobody reads the answer, and nothing failed in the service.
		h.log.InfoContext(ctx, "mcp: request abandoned before its credential was checked", "request_id", rid, "error", err)
		return rpcReply(http.StatusOK, msg.replyID(), internalError(rid))
	}
	if !ok || e.Code == apperr.Internal {
		h.log.ErrorContext(ctx, "mcp: authentication failed unexpectedly", "request_id", rid, "error", err)
		return rpcReply(http.StatusOK, msg.replyID(), internalError(rid))
	}
	pe := &protocolError{code: codeUnauthorized, message: e.Message, header: http.Header{}}
	status := apperr.HTTPStatus(e.Code)
	switch e.Code {
	case apperr.Unavailable:
		h.log.WarnContext(ctx, "mcp: authentication unavailable", "request_id", rid, "error", err)
		pe.code = codeInternalError
		status = http.StatusServiceUnavailable
		// A client probing server/discover falls back to initialize on a 4xx but may
		// give up on a 5xx; the probe gets the error with 200 and the initialize
		// that follows carries the 503.
		if msg != nil && msg.method == methodDiscover {
			status = http.StatusOK
		}
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		challenge := ""
		if h.ep.Challenge != nil {
			challenge = h.ep.Challenge(r, e)
		}
		if challenge == "" && status == http.StatusUnauthorized {
			challenge = "Bearer"
		}
		if challenge != "" {
			pe.header.Set("WWW-Authenticate", challenge)
		}
	}
	if secs, ok := retryAfter(e); ok && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		pe.header.Set("Retry-After", strconv.Itoa(secs))
	}
	return rpcReply(status, msg.replyID(), pe)
}

// retryAfter reads the retry_after_seconds detail the desk spec defines.
func retryAfter(e *apperr.Error) (int, bool) {
	switch v := e.Details["retry_after_seconds"].(type) {
	case int:
		return v, v > 0
	case int64:
		return int(v), v > 0
	case float64:
		return int(v), v > 0
	}
	return 0, false
}

func rpcReply(status int, id json.RawMessage, e *protocolError) reply {
	return reply{status: status, header: e.header, body: errorResponse(id, e)}
}

func methodNotAllowed(why string) reply {
	return reply{
		status: http.StatusMethodNotAllowed,
		header: http.Header{"Allow": {"GET, HEAD, POST"}},
		body:   errorResponse(nullID, &protocolError{code: codeServerError, message: "Method not allowed: " + why}),
	}
}

func internalError(rid string) *protocolError {
	return &protocolError{code: codeInternalError, message: internalMessage(rid)}
}

func internalMessage(rid string) string { return "internal error (request id: " + rid + ")" }

func (h *handler[S]) requestID(ctx context.Context) string {
	if h.opts.RequestID != nil {
		if id := h.opts.RequestID(ctx); id != "" {
			return id
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
