package dashboard

import "github.com/relayroom/relayroom/internal/audit"

// deskReply is a saved reply's page (GET /app/desk/replies/{reply_N}): its text, the edit
// form for owners and admins, its history. pre carries a refused form.
func (h *Handler) deskReply(c deskCtx, id string, status int, pre *deskPageView, msg string) {
	v := withPre(c.view("Saved reply", "reply"), pre, msg)
	rep, err := h.deps.Desk.SavedReplyByID(c.r.Context(), c.m, id)
	if err == nil {
		v.Title = "Saved reply: " + rep.Title
		v.DeskPage.Reply = &rep
		if pre == nil {
			v.DeskPage.Form = map[string]string{"title": rep.Title, "body": rep.Body}
		}
		err = h.deskHistory(c, &v, audit.KindSavedReply, rep.ID, "this saved reply")
	}
	h.deskShow(c, status, v, err)
}
