// Package httpapi is the one way the service answers HTTP beside MCP: a surface package
// (rooms, wake, knowledge) exports NewHandler(deps) returning a Mux of its routes, writes
// its JSON with WriteJSON and its failures with an Errors; internal/app mounts every Mux
// in one file. The MCP endpoints have their own wire (internal/mcp).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
)

// Route is one route of a surface: its method, its path in net/http pattern syntax
// ({name} is a path value, read with r.PathValue), and, for a route that checks a
// credential itself, how it reads that credential, so that the mount can put the route
// under the failed-authentication limits. Coded says the route answers its failures in
// Errors' Coded format, so that the mount's own refusals of it (those limits' 429) are
// in that format too.
type Route struct {
	Method     string
	Path       string
	Credential func(*http.Request) string
	Coded      bool
}

// Handler is what a surface's NewHandler returns and the mount serves.
type Handler interface {
	http.Handler
	Routes() []Route
}

// Mux is a surface's handler: its routes, served by a net/http ServeMux.
type Mux struct {
	mux    http.ServeMux
	routes []Route
}

// Handle adds a route.
func (m *Mux) Handle(rt Route, h http.HandlerFunc) {
	m.mux.Handle(rt.Method+" "+rt.Path, h)
	m.routes = append(m.routes, rt)
}

// Routes lists the routes in the order they were added, for the mount.
func (m *Mux) Routes() []Route { return slices.Clone(m.routes) }

func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent: a failed write means the client is gone, and nothing is left
	// to tell it.
	_ = json.NewEncoder(w).Encode(v)
}

// Errors answers a surface's failures. The status is the apperr code's (apperr.HTTPStatus);
// anything that is not an apperr, or is internal, is logged and answered "internal error".
// The body is {"error": message} with "reason" when the error has one and "request_id"
// when the request has one, or, for a surface whose contract says so (Coded), the threads
// wire's {"error": {"code", "message"}}.
type Errors struct {
	Log *slog.Logger
	// Challenge is the WWW-Authenticate value of a 401 ("" for none).
	Challenge string
	// Coded selects {"error": {"code": reason or code, "message": …}}.
	Coded bool
}

// CodedError is the body of a Coded surface's failure (its API description derives its
// schema from this type).
type CodedError struct {
	Error CodedErrorBody `json:"error"`
}

// CodedErrorBody is CodedError's error: the reason (or apperr code) and the message.
type CodedErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RetryAfterDetail is the apperr Details key whose whole seconds a 429 sends as Retry-After.
const RetryAfterDetail = "retry_after_seconds"

// Write answers err.
func (e Errors) Write(w http.ResponseWriter, r *http.Request, err error) {
	ae, ok := apperr.As(err)
	status := http.StatusInternalServerError
	if ok {
		status = apperr.HTTPStatus(ae.Code)
	}
	if status >= http.StatusInternalServerError && e.Log != nil {
		e.Log.ErrorContext(r.Context(), "http route", "path", r.URL.Path, "error", err.Error())
	}
	if status == http.StatusInternalServerError {
		ae = apperr.New(apperr.Internal, "internal error")
	}
	h := w.Header()
	if status == http.StatusUnauthorized && e.Challenge != "" {
		h.Set("WWW-Authenticate", e.Challenge)
	}
	if status == http.StatusTooManyRequests {
		BoundDrain(w, r, e.Log)
		if secs, ok := ae.Details[RetryAfterDetail].(int); ok {
			h.Set("Retry-After", strconv.Itoa(secs))
		}
	}
	if e.Coded {
		code := ae.Reason
		if code == "" {
			code = string(ae.Code)
		}
		WriteJSON(w, status, CodedError{Error: CodedErrorBody{Code: code, Message: ae.Message}})
		return
	}
	writeFlat(w, r, status, ae.Message, ae.Reason)
}

// StatusCode is the code of a coded failure that is an HTTP status rather than an apperr
// (the router's 405): its text in lower case, words joined by "_" ("method_not_allowed").
func StatusCode(status int) string {
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}

// WriteError answers status with {"error": message, "request_id"}: for failures that are
// not an apperr (the router's 404 and 405, a panic, a refused origin).
func WriteError(w http.ResponseWriter, r *http.Request, status int, message string) {
	writeFlat(w, r, status, message, "")
}

func writeFlat(w http.ResponseWriter, r *http.Request, status int, message, reason string) {
	body := map[string]string{"error": message}
	if reason != "" {
		body["reason"] = reason
	}
	if id := RequestID(r.Context()); id != "" {
		body["request_id"] = id
	}
	WriteJSON(w, status, body)
}

// RefusalDrain bounds how long a refused request's unread body is drained.
const RefusalDrain = time.Second

// BoundDrain is for a refusal written before the body was read: net/http reads what is
// left of a small unread body before it answers, and a short read deadline keeps a slow
// sender from holding the refusal (and its connection) longer.
func BoundDrain(w http.ResponseWriter, r *http.Request, log *slog.Logger) {
	err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(RefusalDrain))
	if err != nil && !errors.Is(err, http.ErrNotSupported) && log != nil {
		log.WarnContext(r.Context(), "cannot bound the refused request's body", "error", err.Error())
	}
}

type ctxKey int

const requestIDKey ctxKey = iota

// WithRequestID returns ctx carrying the request's id, which error bodies and every log
// line of the request show.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// BodyError is how a route answers a request body it could not read (what names it:
// "body", "upload"): the in-flight byte budget's refusal (an apperr: a 429 with
// Retry-After, so that a sender retries rather than drops what it sent) as it is, a body
// past an http.MaxBytesReader as too large, and anything else (cut short, too slow) with
// a fixed message. Go's read errors name the server's socket addresses; they stay in the
// error's cause, never in the answer.
func BodyError(err error, what string) error {
	if _, ok := apperr.As(err); ok {
		return err
	}
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return apperr.New(apperr.Invalid, "the %s is larger than %d bytes", what, mbe.Limit)
	}
	e := apperr.New(apperr.Invalid, "cannot read the %s: it was cut short or sent too slowly", what)
	e.Err = err
	return e
}
