package dashboard

// deskInboxes lists the inboxes the person sees (GET /app/desk/inboxes).
func (h *Handler) deskInboxes(c deskCtx) {
	v := c.view("Inboxes", "inboxes")
	var err error
	v.DeskPage.Inboxes, err = h.deps.Desk.Inboxes(c.r.Context(), c.m)
	h.deskShow(c, 200, v, err)
}
