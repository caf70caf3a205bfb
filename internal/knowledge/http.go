package knowledge

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
)

// ServeConfirm answers POST /api/projects/{project_id}/knowledge/{id}/confirm: the
// project's CI, authenticated with its CI token (Authorization: Bearer qyt_ci_…), makes a
// candidate trusted. 200 {knowledgeId, status, confidence}; 401 for a missing, bad or
// other project's token; 404 for an entry not in the project; 409 when the entry is
// already decided (trusted or rejected).
func (s *Service) ServeConfirm(w http.ResponseWriter, r *http.Request, projectID, id string) {
	token := ""
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		token = strings.TrimSpace(h[7:])
	}
	if token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="relayroom-ci"`)
		writeJSON(w, http.StatusUnauthorized, errBody(errBadCIToken()))
		return
	}
	pid, err1 := uuid.Parse(projectID)
	kid, err2 := uuid.Parse(id)
	if err1 != nil || err2 != nil {
		writeJSON(w, http.StatusNotFound, errBody(apperr.New(apperr.NotFound, "no such knowledge entry")))
		return
	}
	d, err := s.ConfirmCI(r.Context(), token, pid, kid)
	if err != nil {
		e, ok := apperr.As(err)
		if !ok {
			e = apperr.New(apperr.Internal, "internal error")
		}
		status := apperr.HTTPStatus(e.Code)
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relayroom-ci"`)
		}
		if e.Code == apperr.Internal {
			e = apperr.New(apperr.Internal, "internal error")
		}
		writeJSON(w, status, errBody(e))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func errBody(e *apperr.Error) map[string]any {
	code := e.Reason
	if code == "" {
		code = string(e.Code)
	}
	return map[string]any{"error": map[string]string{"code": code, "message": e.Message}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
