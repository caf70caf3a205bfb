package dashboard

import "github.com/relayroom/relayroom/internal/audit"

// deskInbox is an inbox's page (GET /app/desk/inboxes/{inbox_N}): who may see it, the
// form that changes it (owners and admins), its history. pre carries a refused form.
func (h *Handler) deskInbox(c deskCtx, id string, status int, pre *deskPageView, msg string) {
	v := withPre(c.view("Inbox", "inbox"), pre, msg)
	in, err := h.deps.Desk.Inbox(c.r.Context(), c.m, id)
	if err == nil {
		v.Title = "Inbox " + in.Inbox.Name
		v.DeskPage.Inbox = &in
		if v.DeskPage.CanChange {
			// Its history names whom it was restricted to, which only owners and admins
			// see (desk.PeopleInbox.Members).
			err = h.deskHistory(c, &v, audit.KindDeskInbox, in.Inbox.ID, "this inbox")
		}
	}
	h.deskShow(c, status, v, err)
}
