package dashboard

// deskReplies lists the workspace's saved replies, with the form that adds one for owners
// and admins (GET /app/desk/replies). pre carries a refused form.
func (h *Handler) deskReplies(c deskCtx, status int, pre *deskPageView, msg string) {
	v := withPre(c.view("Saved replies", "replies"), pre, msg)
	var err error
	v.DeskPage.Replies, err = h.deps.Desk.SavedReplies(c.r.Context(), c.m)
	h.deskShow(c, status, v, err)
}
