package dashboard

import (
	"encoding/base64"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/web"
)

// CSV import (docs/dashboard.md, "Desk"): the file is uploaded for a preview, which
// writes nothing; the preview carries the file back (base64, in a hidden field, so any
// replica can import it) with the Import button, which only a file without a bad row
// gets. Owners and admins only, as `relayroom admin desk import`.

// importPreview is the preview page's part of the view.
type importPreview struct {
	desk.ImportPreview
	Inbox     desk.PeopleInbox
	FileName  string
	Data      string // the file, base64, posted back by the Import form
	Truncated bool   // more good rows than the preview shows
}

// maxImportBody bounds an import's multipart body: the file base64-encoded (the Import
// form) with the fields, boundaries and headers.
const maxImportBody = (desk.MaxImportBytes+2)/3*4 + uploadOverhead

const msgChooseCSV = "Choose a CSV file to import."

// isDeskImport reports POST /app/desk/import/preview and …/run, multipart bodies read as
// a stream (the CSRF field first) rather than as a form.
func isDeskImport(parts []string) bool {
	return len(parts) == 3 && parts[0] == "desk" && parts[1] == "import" && (parts[2] == "preview" || parts[2] == "run")
}

// deskImportForm is the upload form (GET /app/desk/import): the inboxes to import into.
func (h *Handler) deskImportForm(c deskCtx, status int, pre *deskPageView, msg string) {
	v := withPre(c.view("Import conversations", "import"), pre, msg)
	var err error
	if !v.DeskPage.CanChange {
		err = apperr.New(apperr.Forbidden, "%s", desk.MsgChangeRole)
	} else {
		v.DeskPage.Inboxes, err = h.deps.Desk.Inboxes(c.r.Context(), c.m)
	}
	h.deskShow(c, status, v, err)
}

// deskImport answers POST /app/desk/import/preview and …/run.
func (h *Handler) deskImport(w http.ResponseWriter, r *http.Request, sess web.Session, step string) {
	c, ok := h.deskMember(w, r, sess)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxImportBody)
	mr, err := r.MultipartReader()
	if err != nil {
		h.deskImportForm(c, http.StatusBadRequest, &deskPageView{Fields: map[string]string{"file": msgUploadFormat}}, msgUploadFormat)
		return
	}
	if !h.uploadCSRF(mr, sess) {
		h.message(w, http.StatusForbidden, &sess, "Form expired", web.MsgFormExpired)
		return
	}
	if c.m.Role != desk.RoleOwner && c.m.Role != desk.RoleAdmin { // refused before the file is read
		h.message(w, http.StatusForbidden, &sess, "Desk", desk.MsgChangeRole)
		return
	}
	up, err := readImport(mr)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		h.deskImportForm(c, http.StatusRequestEntityTooLarge, &deskPageView{Fields: map[string]string{"file": "The file is larger than the import's limit."}}, "Nothing was imported.")
		return
	case err != nil:
		h.deskImportForm(c, http.StatusBadRequest, &deskPageView{Fields: map[string]string{"file": msgUploadFormat}}, msgUploadFormat)
		return
	case len(up.file) == 0:
		h.deskImportForm(c, http.StatusBadRequest, &deskPageView{Fields: map[string]string{"file": msgChooseCSV}}, msgChooseCSV)
		return
	}
	inboxes, err := h.deps.Desk.Inboxes(r.Context(), c.m)
	if err != nil {
		h.unavailable(w, r, &sess, "desk inboxes", err)
		return
	}
	p := &importPreview{FileName: up.name, Data: base64.StdEncoding.EncodeToString(up.file)}
	found := false
	for _, in := range inboxes {
		if in.ID == up.inbox {
			p.Inbox, found = in, true
		}
	}
	if !found { // another workspace's, or none: as a missing page
		h.notFound(w, &sess)
		return
	}
	now := time.Now()
	if p.ImportPreview, err = desk.PreviewCSV(up.file, now); err != nil {
		h.unavailable(w, r, &sess, "import preview", err)
		return
	}
	p.Truncated = p.Good > len(p.Rows)
	if step == "run" && len(p.Problems) == 0 {
		h.deskImportRun(c, p, up.file, now)
		return
	}
	v := c.view("Import preview", "import")
	v.DeskPage.Inboxes, v.DeskPage.Preview = inboxes, p
	status := http.StatusOK
	if len(p.Problems) > 0 {
		status, v.Error = http.StatusBadRequest, "The file has bad rows (below): nothing was imported. Fix them and upload it again."
	}
	h.render(w, status, "deskpages", v)
}

// importUpload is what an import form posted.
type importUpload struct {
	inbox, name string
	file        []byte
}

// readImport reads the fields after the CSRF token: inbox, and the file as an upload
// (file, the preview's form) or base64 (data, the Import form of the preview).
func readImport(mr *multipart.Reader) (importUpload, error) {
	var up importUpload
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return up, nil
		}
		if err != nil {
			return up, err
		}
		switch part.FormName() {
		case "inbox":
			b, err := io.ReadAll(io.LimitReader(part, 64))
			if err != nil {
				return up, err
			}
			up.inbox = strings.TrimSpace(string(b))
		case "name":
			b, err := io.ReadAll(io.LimitReader(part, 255))
			if err != nil {
				return up, err
			}
			up.name = string(b)
		case "file":
			up.name = part.FileName()
			if up.file, err = io.ReadAll(io.LimitReader(part, desk.MaxImportBytes+1)); err != nil {
				return up, err
			}
		case "data":
			dec := base64.NewDecoder(base64.StdEncoding, io.LimitReader(part, maxImportBody))
			if up.file, err = io.ReadAll(io.LimitReader(dec, desk.MaxImportBytes+1)); err != nil {
				return up, err
			}
		}
	}
}
