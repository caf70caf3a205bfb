package dashboard

import "net/http"

// deskReplyEdit saves a saved reply's title and body (POST /app/desk/replies/{reply_N}).
func (h *Handler) deskReplyEdit(c deskCtx, id string) {
	if err := h.deps.Desk.UpdateSavedReply(c.r.Context(), c.m, id, c.r.PostFormValue("title"), c.r.PostFormValue("body")); err != nil {
		h.deskRefused(c, err, func(status int, pre *deskPageView, msg string) { h.deskReply(c, id, status, pre, msg) })
		return
	}
	http.Redirect(c.w, c.r, c.url("/replies/"+id, noticeSaved), http.StatusSeeOther)
}
