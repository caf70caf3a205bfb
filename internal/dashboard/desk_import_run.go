package dashboard

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
)

// progressMark is where the import page's progress list is filled in as the import runs
// (a literal of the template, so never anything a person typed).
const progressMark = "RELAYROOM-IMPORT-PROGRESS"

// importStep is one line of the progress list.
type importStep struct {
	Done, Total int
	Summary     *desk.ImportSummary
	Problems    []desk.RowProblem
	Failure     string
	InboxURL    string
}

// deskImportRun imports a previewed file without a bad row (POST /app/desk/import/run)
// and answers with a page streamed as the import goes: a progress line after every chunk
// (desk.ImportProgressEvery rows, each its own transaction), then what it did. Each chunk
// has a statement budget of its own, as each of a live stream's reads does.
func (h *Handler) deskImportRun(c deskCtx, p *importPreview, file []byte, now time.Time) {
	p.Data = "" // the page does not carry the file back
	v := c.view("Importing into "+p.Inbox.Name, "imported")
	v.DeskPage.Preview = p
	var buf bytes.Buffer
	t := h.pages["deskpages"]
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		h.unavailable(c.w, c.r, &c.sess, "import page", err)
		return
	}
	head, tail, ok := bytes.Cut(buf.Bytes(), []byte(progressMark))
	if !ok {
		h.unavailable(c.w, c.r, &c.sess, "import page", errors.New("dashboard: the import page has no progress list"))
		return
	}
	SecurityHeaders(c.w.Header())
	c.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	write := func(b []byte) {
		if _, err := c.w.Write(b); err == nil {
			_ = rc.Flush() // a writer that cannot flush sends it all at the end
		}
	}
	step := func(s importStep) {
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, "import-step", s); err != nil {
			h.deps.Log.ErrorContext(c.r.Context(), "render import step", "error", err.Error())
			return
		}
		write(b.Bytes())
	}
	write(head)
	chunks := (p.Good + desk.ImportProgressEvery - 1) / desk.ImportProgressEvery
	ctx := pg.WithBudget(c.r.Context(), time.Duration(max(chunks, 1))*h.deps.StatementTimeout)
	step(importStep{Total: p.Good})
	sum, err := h.deps.Desk.ImportAs(ctx, c.m, p.Inbox.ID, file, now, func(done, total int) { step(importStep{Done: done, Total: total}) })
	last := importStep{Done: sum.Rows, Total: p.Good, InboxURL: c.url("/inboxes/"+p.Inbox.ID, "")}
	var bad *desk.ImportError
	switch {
	case errors.As(err, &bad):
		last.Problems = bad.Problems
	case err != nil:
		h.deps.Log.ErrorContext(c.r.Context(), "desk import", "error", err.Error())
		last.Failure = "The import stopped: the rows before the chunk that failed are imported, and importing the file again adds only the rest."
	default:
		last.Summary = &sum
	}
	step(last)
	write(tail)
}
