package dashboard

import "net/http"

// deskReplyCreate adds a saved reply (POST /app/desk/replies: title, body) and opens it.
func (h *Handler) deskReplyCreate(c deskCtx) {
	id, err := h.deps.Desk.CreateSavedReply(c.r.Context(), c.m, c.r.PostFormValue("title"), c.r.PostFormValue("body"))
	if err != nil {
		h.deskRefused(c, err, func(status int, pre *deskPageView, msg string) { h.deskReplies(c, status, pre, msg) })
		return
	}
	http.Redirect(c.w, c.r, c.url("/replies/"+id, noticeReplyCreated), http.StatusSeeOther)
}
