package dashboard

import (
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// knowledgeList bounds each list of the Knowledge tab.
const knowledgeList = 50

// knowledgePage is the review queue (candidates to approve or reject), the trusted
// entries, and the Learning panel's recall hit rate (used / returned, day and week).
func (h *Handler) knowledgePage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, errMsg string) {
	v := view{Title: sc.ProjectName + " · Knowledge", Person: sess.Person, CSRF: sess.CSRF(), Error: errMsg,
		Room: h.roomView(sc, "knowledge"), CanDecide: sc.IsHost() && sc.IsOrgAdmin()}
	if r.URL.Query().Get("notice") != "" {
		v.Notice = "Decision saved."
	}
	ctx := r.Context()
	var err error
	if v.Candidates, err = h.deps.Know.ReviewQueue(ctx, sc, knowledge.StatusCandidate, knowledgeList); err == nil {
		if v.Trusted, err = h.deps.Know.ReviewQueue(ctx, sc, knowledge.StatusTrusted, knowledgeList); err == nil {
			v.HitRates, err = h.deps.Know.LearningHitRates(ctx, sc, time.Now())
		}
	}
	if e, ok := apperr.As(err); ok && e.Code == apperr.Forbidden {
		v.Message = e.Message
		h.render(w, http.StatusForbidden, "knowledge", v)
		return
	}
	if err != nil {
		h.unavailable(w, r, &sess, "knowledge", err)
		return
	}
	h.render(w, status, "knowledge", v)
}

// decide approves or rejects an entry: a person's approval makes it trusted, so recall
// returns it.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, idText string, approve bool) {
	id, err := uuid.Parse(idText)
	if err != nil {
		h.notFound(w, &sess)
		return
	}
	_, err = h.deps.Know.Decide(r.Context(), sc, id, approve)
	e, isApp := apperr.As(err)
	switch {
	case err == nil:
		http.Redirect(w, r, roomURL(sc.ProjectID, "knowledge")+"?notice="+url.QueryEscape("decided"), http.StatusSeeOther)
	case isApp && e.Code == apperr.NotFound:
		h.notFound(w, &sess)
	case isApp && e.Code == apperr.Forbidden:
		h.knowledgePage(w, r, sess, sc, http.StatusForbidden, e.Message)
	case isApp && e.Code == apperr.Conflict:
		h.knowledgePage(w, r, sess, sc, http.StatusConflict, e.Message)
	default:
		h.unavailable(w, r, &sess, "decide knowledge", err)
	}
}
