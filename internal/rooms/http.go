package rooms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// HandlerDeps is what the rooms HTTP routes need.
type HandlerDeps struct {
	Service *Service
	Log     *slog.Logger
}

// maxReviewBody bounds an accept or reject body: a comment, not a document.
const maxReviewBody = 64 << 10

// Review verdicts of the accept and reject routes.
const (
	VerdictAccepted = "accepted"
	VerdictRejected = "rejected"
)

// NewHandler serves the rooms toolset's HTTP API beside MCP: task attachments (upload with
// an agent key, download by signed link) and accepting or rejecting a task's result.
func NewHandler(d HandlerDeps) *httpapi.Mux {
	h := &httpHandler{svc: d.Service, errs: httpapi.Errors{Log: d.Log, Challenge: `Bearer scope="rooms"`}}
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: "/api/rooms/{project_id}/tasks/{task_id}/attachments", Credential: auth.AgentKey}, h.upload)
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: "/api/rooms/{project_id}/attachments/{attachment_id}"}, h.download)
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: "/api/rooms/{project_id}/tasks/{task_id}/accept", Credential: auth.AgentKey}, h.review(VerdictAccepted))
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: "/api/rooms/{project_id}/tasks/{task_id}/reject", Credential: auth.AgentKey}, h.review(VerdictRejected))
	return m
}

type httpHandler struct {
	svc  *Service
	errs httpapi.Errors
}

// scope authenticates an agent key for the room in the path and refuses a guest whose
// agreement is not active.
func (h *httpHandler) scope(ctx context.Context, r *http.Request) (tenancy.Scope, error) {
	key := auth.AgentKey(r)
	if key == "" {
		return tenancy.Scope{}, apperr.New(apperr.Unauthenticated, tenancy.MsgUnauthorized)
	}
	id, err := uuid.Parse(r.PathValue("project_id"))
	if err != nil {
		if _, err := h.svc.Resolver.Agent(ctx, key); err != nil {
			return tenancy.Scope{}, err
		}
		return tenancy.Scope{}, apperr.New(apperr.Forbidden, tenancy.MsgNotParticipant)
	}
	sc, err := h.svc.Resolver.RoomByKey(ctx, key, id)
	if err != nil {
		return tenancy.Scope{}, err
	}
	// These routes are not MCP tools, so the agreement check the tools get is made here.
	if err := sc.Admitted(); err != nil {
		return tenancy.Scope{}, err
	}
	return sc, nil
}

// readError answers an upload whose body could not be read (httpapi.BodyError).
func (h *httpHandler) readError(w http.ResponseWriter, r *http.Request, err error) {
	h.errs.Write(w, r, httpapi.BodyError(err, "upload"))
}

func (h *httpHandler) upload(w http.ResponseWriter, r *http.Request) {
	sc, err := h.scope(r.Context(), r)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	taskID := r.PathValue("task_id")
	// Refuse before reading up to 25 MB that would be thrown away.
	if err := h.svc.CanAttach(r.Context(), sc, taskID); err != nil {
		h.errs.Write(w, r, err)
		return
	}
	limit := h.svc.MaxAttachment()
	if n := r.ContentLength; n > 0 && n <= limit+1<<20 {
		// The server's read timeout bounds a whole request; a file near the limit takes
		// longer than that on a slow link, and would be cut off on every try.
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(transferTime(n))); err != nil && !errors.Is(err, http.ErrNotSupported) {
			h.errs.Write(w, r, fmt.Errorf("extend the upload's read deadline: %w", err))
			return
		}
	}
	var (
		name, ctype string
		body        []byte
	)
	// Media types are case-insensitive: "Multipart/Form-Data" was stored as a file
	// holding the form's envelope.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		// The form's overhead is allowed on top of the file's own limit.
		r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20)
		f, fh, err := r.FormFile("file")
		if err != nil {
			var mbe *http.MaxBytesError
			switch _, budget := apperr.As(err); {
			case errors.As(err, &mbe):
				h.errs.Write(w, r, h.svc.TooLarge())
			case budget: // the in-flight byte budget
				h.errs.Write(w, r, err)
			default:
				h.errs.Write(w, r, apperr.New(apperr.Invalid, "multipart upload needs a file field named \"file\""))
			}
			return
		}
		defer f.Close()
		if body, err = io.ReadAll(io.LimitReader(f, limit+1)); err != nil {
			h.readError(w, r, err)
			return
		}
		name, ctype = fh.Filename, fh.Header.Get("Content-Type")
	} else {
		if body, err = io.ReadAll(io.LimitReader(r.Body, limit+1)); err != nil {
			h.readError(w, r, err)
			return
		}
		name, ctype = r.URL.Query().Get("filename"), r.Header.Get("Content-Type")
	}
	if int64(len(body)) > limit {
		h.errs.Write(w, r, h.svc.TooLarge())
		return
	}
	res, err := h.svc.Upload(r.Context(), sc, taskID, name, ctype, body)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, res)
}

func (h *httpHandler) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := h.svc.Download(r.Context(), r.PathValue("project_id"), r.PathValue("attachment_id"), q.Get("exp"), q.Get("sig"))
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	defer f.Close()
	// As for an upload: a large file on a slow link takes longer than the server's write
	// timeout. A reader that does not read holds one chunk of the download budget.
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(transferTime(f.Size))); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.errs.Write(w, r, fmt.Errorf("extend the download's write deadline: %w", err))
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	hd.Set("Content-Type", f.ContentType)
	// Ranges (a download resumed), HEAD and Content-Length. The file's date is not sent:
	// a link lives a minute, and no-store keeps copies from being revalidated.
	http.ServeContent(&rangeRefusal{ResponseWriter: w, r: r, size: f.Size}, r, "", time.Time{}, f)
}

// MsgRangeNotSatisfiable is a download's answer to a Range it cannot serve (416).
const MsgRangeNotSatisfiable = "the Range asked for is not within this file of %d bytes: ask for bytes=FROM-TO, counted from 0"

// rangeRefusal is the writer http.ServeContent writes a download to. ServeContent refuses
// a Range it cannot serve (past the end, or not parsed) with a 416 in plain text under
// the headers already set, so the answer carried the attachment's Content-Disposition and
// a browser saved "invalid range" as the file. The 416 goes out as the API's JSON error
// instead, with ServeContent's Content-Range (bytes */size) and no attachment headers.
type rangeRefusal struct {
	http.ResponseWriter
	r       *http.Request
	size    int64
	refused bool
}

func (w *rangeRefusal) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.refused = true
	h := w.Header()
	h.Del("Content-Disposition")
	h.Set("Cache-Control", "no-store") // ServeContent drops it before an error
	httpapi.WriteError(w.ResponseWriter, w.r, code, fmt.Sprintf(MsgRangeNotSatisfiable, w.size))
}

// Write drops ServeContent's plain-text refusal: the JSON answer is written already.
func (w *rangeRefusal) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach the connection's writer.
func (w *rangeRefusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// minTransferRate is the slowest link a file transfer's deadline allows for, on top of
// the server's usual minute: 25 MB at 32 KiB/s is about 13 minutes.
const minTransferRate = 32 << 10

// transferTime is how long moving n bytes may take. (A writer without deadlines, as in
// a test's recorder, answers http.ErrNotSupported: it has none to extend.)
func transferTime(n int64) time.Duration {
	return time.Minute + time.Duration(n/minTransferRate)*time.Second
}

func (h *httpHandler) review(verdict string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc, err := h.scope(r.Context(), r)
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		comment, err := reviewComment(w, r)
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		res, err := h.svc.ReviewTask(r.Context(), sc, r.PathValue("task_id"), verdict, comment)
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, res)
	}
}

// reviewComment reads the optional {"comment": "…"} of an accept or reject. A body over
// maxReviewBody is refused as too large: cut at the limit, a valid comment was answered
// "body must be JSON", which sent the caller looking for a syntax error.
func reviewComment(w http.ResponseWriter, r *http.Request) (string, error) {
	var body struct {
		Comment string `json:"comment"`
	}
	if r.ContentLength == 0 {
		return "", nil
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBody))
	if err != nil {
		return "", httpapi.BodyError(err, "body")
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return "", nil
	}
	// The raw bytes are checked: decoding would hide invalid UTF-8 behind U+FFFD.
	if path, err := text.CheckJSON(raw); err != nil && !errors.Is(err, text.ErrSyntax) {
		if path == "" {
			path = "body"
		}
		return "", apperr.New(apperr.Invalid, "%s %v", path, err)
	}
	// Only "comment", as the tools refuse an argument they do not know: a misspelt
	// field ("coment") was dropped without a word.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.Decode(&struct{}{}) != io.EOF {
		return "", apperr.New(apperr.Invalid, "body must be JSON: {\"comment\": \"…\"} (optional), and nothing else")
	}
	return body.Comment, nil
}
