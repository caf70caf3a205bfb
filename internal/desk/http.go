package desk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// HandlerDeps is what the desk's HTTP routes need.
type HandlerDeps struct {
	Service *Service
	Log     *slog.Logger
}

// Paths of the ingest API.
const (
	RouteIngestConversations = "/api/desk/conversations"
	RouteIngestMessages      = "/api/desk/conversations/{conversation_id}/messages"
)

// ingestChallenge is the WWW-Authenticate of a refused ingest token.
const ingestChallenge = `Bearer realm="relaydesk-ingest", scope="` + ScopeIngestWrite + `"`

// NewHandler serves the desk's HTTP API beside MCP: the ingest API, with which a
// workspace's mail gateway or sync brings conversations and messages in
// (docs/desk.md). Every route is authenticated with a personal access token carrying
// ingest:write, sent as Authorization: Bearer.
func NewHandler(d HandlerDeps) *httpapi.Mux {
	h := &httpHandler{svc: d.Service, errs: httpapi.Errors{Log: d.Log, Challenge: ingestChallenge, Coded: true}}
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: RouteIngestConversations, Credential: auth.BearerToken, Coded: true},
		route(h, func(r *http.Request, sc tenancy.Scope, in IngestConversation) (IngestResult, error) {
			return h.svc.IngestConversation(r.Context(), sc, in)
		}))
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: RouteIngestMessages, Credential: auth.BearerToken, Coded: true},
		route(h, func(r *http.Request, sc tenancy.Scope, in IngestAppend) (IngestResult, error) {
			return h.svc.IngestMessage(r.Context(), sc, r.PathValue("conversation_id"), in)
		}))
	return m
}

type httpHandler struct {
	svc  *Service
	errs httpapi.Errors
}

// decode reads a JSON body of at most MaxIngestBytes holding one object with only known
// fields.
// decodeMessage says what is wrong with a body in the API's words: the decoder's own
// error names Go's types and fields ("Go struct field IngestConversation.messages of type
// []desk.IngestMessage"), which mean nothing to an integrator.
func decodeMessage(err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	var tp *time.ParseError
	switch {
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Sprintf("the body must be a JSON object, not %s", article(typ.Value))
	case errors.As(err, &typ):
		return fmt.Sprintf("%q must be %s, not %s", typ.Field, jsonKind(typ.Type), article(typ.Value))
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the body is not valid JSON"
	case errors.As(err, &tp):
		return fmt.Sprintf("a time is not an RFC 3339 timestamp such as 2026-11-06T17:00:00Z (got %q)", tp.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "the body is not the expected JSON object"
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == reflect.TypeFor[wiretime.Arg]() {
		return "an RFC 3339 timestamp" // a struct in Go, a string on the wire
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// article is the decoder's name of a JSON value ("string", "array", "number …") with its
// article.
func article(v string) string {
	v, _, _ = strings.Cut(v, " ")
	if v == "array" || v == "object" {
		return "an " + v
	}
	return "a " + v
}

func decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxIngestBytes))
	if err != nil {
		return httpapi.BodyError(err, "body")
	}
	// The raw bytes are checked: decoding would hide invalid UTF-8 behind U+FFFD, and a
	// NUL would fail inside the database as an internal error.
	if path, err := text.CheckJSON(raw); err != nil && !errors.Is(err, text.ErrSyntax) {
		if path == "" {
			path = "body"
		}
		return apperr.New(apperr.Invalid, "%s %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apperr.New(apperr.Invalid, "%s", decodeMessage(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apperr.New(apperr.Invalid, "the body holds more than one JSON value")
	}
	return nil
}

// answer writes an ingest result: 201 when something was stored, 200 when the external
// id was already known and nothing was.
func answer(w http.ResponseWriter, res IngestResult) {
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	httpapi.WriteJSON(w, status, res)
}

// route answers an ingest route: the token, then the body as T, then the call.
func route[T any](h *httpHandler, call func(r *http.Request, sc tenancy.Scope, in T) (IngestResult, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc, err := h.svc.Authenticate(r.Context(), auth.BearerToken(r))
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		var in T
		if err := decode(w, r, &in); err != nil {
			h.errs.Write(w, r, err)
			return
		}
		res, err := call(r, sc, in)
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		answer(w, res)
	}
}
