package dashboard

import (
	"crypto/subtle"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// uploadOverhead is what a multipart upload may carry beyond the file itself (the CSRF
// field, boundaries and part headers).
const uploadOverhead = 1 << 20

// maxCSRFField bounds the CSRF part read before the file.
const maxCSRFField = 256

// Messages of an upload refused before the rooms service sees it.
const (
	msgChooseFile   = "Choose a file to upload."
	msgUploadFormat = "The upload could not be read: send the form as multipart/form-data with the csrf field first and the file field after it."
)

// isUpload reports POST /app/rooms/{id}/tasks/{task}/attachments.
func isUpload(parts []string) bool {
	return len(parts) == 5 && parts[0] == "rooms" && parts[2] == "tasks" && parts[4] == "attachments"
}

// upload stores a file a person attaches to a task, through the same rooms service call,
// limit and storage as the agents' upload API (rooms.Service.Upload): only the sending
// company's or the host's people, at most the attachment limit. The body is read as a
// stream: the CSRF field must come first (a browser sends fields in the form's order), so
// a forged post is refused before a byte of the file is read, and so is a task the person
// may not attach to.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, sess web.Session, parts []string) {
	sc, ok := h.room(w, r, sess, parts[1])
	if !ok {
		return
	}
	taskID := parts[3]
	limit := h.deps.Rooms.MaxAttachment()
	r.Body = http.MaxBytesReader(w, r.Body, limit+uploadOverhead)
	mr, err := r.MultipartReader()
	if err != nil {
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusBadRequest, msgUploadFormat)
		return
	}
	if !h.uploadCSRF(mr, sess) {
		h.message(w, http.StatusForbidden, &sess, "Form expired", web.MsgFormExpired)
		return
	}
	if err := h.deps.Rooms.CanAttach(r.Context(), sc, taskID); err != nil {
		h.uploadError(w, r, sess, sc, taskID, err)
		return
	}
	part, err := mr.NextPart()
	for err == nil && part.FormName() != "file" {
		part, err = mr.NextPart()
	}
	if err != nil || part.FileName() == "" {
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusBadRequest, msgChooseFile)
		return
	}
	body, err := io.ReadAll(io.LimitReader(part, limit+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || int64(len(body)) > limit:
		h.uploadError(w, r, sess, sc, taskID, h.deps.Rooms.TooLarge())
		return
	case err != nil:
		if _, budget := apperr.As(err); budget { // the server's in-flight byte budget
			h.uploadError(w, r, sess, sc, taskID, err)
			return
		}
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusBadRequest, msgUploadFormat)
		return
	}
	if len(body) == 0 {
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusBadRequest, msgChooseFile)
		return
	}
	ctx := intendInRoom(r.Context(), sc, audit.KindTask, taskID, "file_attached", map[string]string{"file": part.FileName()})
	if _, err := h.deps.Rooms.Upload(ctx, sc, taskID, part.FileName(), part.Header.Get("Content-Type"), body); err != nil {
		h.uploadError(w, r, sess, sc, taskID, err)
		return
	}
	http.Redirect(w, r, pageURL(roomURL(sc.ProjectID, "tasks"), orgQuery(r, sc.OrgID), "uploaded")+"#task-"+url.PathEscape(taskID), http.StatusSeeOther)
}

// uploadCSRF reads the first part of the upload, which must be the session's CSRF token.
func (h *Handler) uploadCSRF(mr *multipart.Reader, sess web.Session) bool {
	p, err := mr.NextPart()
	if err != nil || p.FormName() != "csrf" {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(p, maxCSRFField))
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(string(b))), []byte(sess.CSRF())) == 1
}

// uploadError answers a refusal of the rooms service: a task the person may not see is
// 404, as a missing one; any other refusal is shown beside the task's file field.
func (h *Handler) uploadError(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, taskID string, err error) {
	e, ok := apperr.As(err)
	switch {
	case ok && e.Code == apperr.NotFound:
		h.notFound(w, &sess)
	case ok && e.Code == apperr.Forbidden:
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusForbidden, e.Message)
	case ok && e.Code == apperr.RateLimited:
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusTooManyRequests, e.Message)
	case ok && e.Code != apperr.Unavailable:
		h.uploadRefused(w, r, sess, sc, taskID, http.StatusBadRequest, e.Message)
	default:
		h.unavailable(w, r, &sess, "upload attachment", err)
	}
}

func (h *Handler) uploadRefused(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, taskID string, status int, msg string) {
	h.tasksPageWith(w, r, sess, sc, status, "", uploadRefusal{Task: taskID, Message: msg})
}
