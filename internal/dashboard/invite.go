package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/web"
)

// An invitation link (/app/invite/qyt_iv_…) is opened by someone who may have no account
// yet, so it is served before the session check. Its form is protected by a
// double-submit token (a cookie of its own and the same value in the form) when nobody
// is signed in, and by the session's token when someone is.

const inviteCSRFCookie = "rr_invite_csrf"

// inviteView is the invitation page's part of the view.
type inviteView struct {
	admin.OpenInvitation
	Link     string
	SignedIn bool
	Fields   map[string]string
	Name     string
}

func (h *Handler) invitePage(w http.ResponseWriter, r *http.Request, link string) {
	sess, signedIn, err := h.deps.Site.Session(r)
	if err != nil {
		h.unavailable(w, r, nil, "session", err)
		return
	}
	var sp *web.Session
	if signedIn {
		sp = &sess
	}
	if err := web.ParseForm(w, r, maxFormBytes); err != nil {
		h.message(w, http.StatusBadRequest, sp, "Bad request", "The form could not be read.")
		return
	}
	inv, err := h.deps.Admin.Invitation(r.Context(), link)
	if e, ok := apperr.As(err); ok && e.Code == apperr.NotFound {
		h.message(w, http.StatusNotFound, sp, "Invitation", e.Message)
		return
	}
	if err != nil {
		h.unavailable(w, r, sp, "invitation", err)
		return
	}
	v := view{Title: "Join " + inv.OrgName, Invite: &inviteView{OpenInvitation: inv, Link: link, SignedIn: signedIn, Fields: map[string]string{}}}
	if signedIn {
		v.Person, v.CSRF = sess.Person, sess.CSRF()
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		if !h.inviteCSRF(r, sp) {
			v.Error = web.MsgFormExpired
			h.renderInvite(w, r, http.StatusForbidden, v, signedIn)
			return
		}
		j := admin.Joiner{Name: r.PostForm.Get("name"), Password: r.PostForm.Get("password")}
		if signedIn {
			j.SignedIn, j.SignedInEmail = sess.Person.ID, sess.Person.Email
		}
		err := h.deps.Admin.AcceptInvitation(r.Context(), link, j)
		var in *admin.InputError
		e, isApp := apperr.As(err)
		switch {
		case err == nil && signedIn:
			http.Redirect(w, r, Prefix, http.StatusSeeOther)
		case err == nil:
			http.Redirect(w, r, web.LoginURL(Prefix), http.StatusSeeOther)
		case errors.As(err, &in):
			v.Invite.Fields, v.Invite.Name = in.Fields, j.Name
			v.Error = "Please correct the fields marked below; nothing was saved."
			h.renderInvite(w, r, http.StatusBadRequest, v, signedIn)
		case isApp && e.Code == apperr.NotFound:
			h.message(w, http.StatusNotFound, sp, "Invitation", e.Message)
		case isApp && e.Code == apperr.Conflict:
			h.message(w, http.StatusConflict, sp, "Invitation", e.Message)
		case isApp && e.Code == apperr.Forbidden:
			v.Error = e.Message
			h.renderInvite(w, r, http.StatusForbidden, v, signedIn)
		default:
			h.unavailable(w, r, sp, "accept invitation", err)
		}
		return
	default:
		h.notFound(w, sp)
		return
	}
	h.renderInvite(w, r, http.StatusOK, v, signedIn)
}

// inviteCSRF checks the form's token: the session's for a signed-in person, else the
// double-submit cookie's.
func (h *Handler) inviteCSRF(r *http.Request, sess *web.Session) bool {
	if sess != nil {
		return sess.CheckCSRF(r)
	}
	c, err := r.Cookie(inviteCSRFCookie)
	got := r.PostFormValue("csrf")
	return err == nil && len(c.Value) == 32 && subtle.ConstantTimeCompare([]byte(c.Value), []byte(got)) == 1
}

// renderInvite renders the page, giving a signed-out visitor a fresh double-submit token.
func (h *Handler) renderInvite(w http.ResponseWriter, r *http.Request, status int, v view, signedIn bool) {
	if !signedIn {
		// The visitor's token stays the same while its cookie lives, so a form opened in
		// another tab is not expired by this one.
		if c, err := r.Cookie(inviteCSRFCookie); err == nil && len(c.Value) == 32 {
			v.CSRF = c.Value
			h.render(w, status, "invite", v)
			return
		}
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			h.unavailable(w, r, nil, "invitation token", err)
			return
		}
		v.CSRF = hex.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: inviteCSRFCookie, Value: v.CSRF, Path: admin.RouteInvite, HttpOnly: true,
			Secure: h.deps.Site.SecureCookies(), SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	}
	h.render(w, status, "invite", v)
}
