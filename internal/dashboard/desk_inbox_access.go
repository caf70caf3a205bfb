package dashboard

import (
	"net/http"

	"github.com/google/uuid"
)

// deskInboxAccess saves who may see an inbox (POST /app/desk/inboxes/{inbox_N}/access):
// visibility=restricted with members=<user id>… restricts it to them, visibility=everyone
// opens it. Owners and admins only.
func (h *Handler) deskInboxAccess(c deskCtx, id string) {
	restricted := c.r.PostFormValue("visibility") == "restricted"
	var members []uuid.UUID
	for _, s := range c.r.PostForm["members"] {
		u, err := uuid.Parse(s)
		if err != nil {
			u = uuid.Nil // not a member: the service refuses it beside the field
		}
		members = append(members, u)
	}
	if err := h.deps.Desk.SetInboxAccess(c.r.Context(), c.m, id, restricted, members); err != nil {
		h.deskRefused(c, err, func(status int, pre *deskPageView, msg string) { h.deskInbox(c, id, status, pre, msg) })
		return
	}
	http.Redirect(c.w, c.r, c.url("/inboxes/"+id, noticeInboxAccessSaved), http.StatusSeeOther)
}
