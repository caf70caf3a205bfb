package knowledge

import (
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/httpapi"
)

// HandlerDeps is what the knowledge HTTP routes need.
type HandlerDeps struct {
	Service *Service
	Log     *slog.Logger
}

// ciChallenge is the WWW-Authenticate of a refused CI token.
const ciChallenge = `Bearer realm="relayroom-ci"`

// NewHandler serves the knowledge routes beside MCP: a project's CI confirming a candidate.
func NewHandler(d HandlerDeps) *httpapi.Mux {
	h := &httpHandler{svc: d.Service, errs: httpapi.Errors{Log: d.Log, Challenge: ciChallenge, Coded: true}}
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: "/api/projects/{project_id}/knowledge/{id}/confirm", Credential: auth.BearerToken, Coded: true}, h.confirm)
	return m
}

type httpHandler struct {
	svc  *Service
	errs httpapi.Errors
}

// confirm answers POST /api/projects/{project_id}/knowledge/{id}/confirm: the project's
// CI, authenticated with its CI token (Authorization: Bearer qyt_ci_…), makes a candidate
// trusted. 200 {knowledgeId, status, confidence}; 401 for a missing, bad or other
// project's token; 404 for an entry not in the project; 409 when the entry is already
// decided (trusted or rejected).
func (h *httpHandler) confirm(w http.ResponseWriter, r *http.Request) {
	token := auth.BearerToken(r)
	if token == "" {
		h.errs.Write(w, r, errBadCIToken())
		return
	}
	pid, err1 := uuid.Parse(r.PathValue("project_id"))
	kid, err2 := uuid.Parse(r.PathValue("id"))
	if err1 != nil || err2 != nil {
		h.errs.Write(w, r, apperr.New(apperr.NotFound, "no such knowledge entry"))
		return
	}
	d, err := h.svc.ConfirmCI(r.Context(), token, pid, kid)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, d)
}
