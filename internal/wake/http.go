package wake

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/httpapi"
)

// HandlerDeps is what the pager's routes need.
type HandlerDeps struct {
	Service *Service
	Log     *slog.Logger
}

// DefaultWait is a long poll's wait when the pager names none.
const DefaultWait = 25 * time.Second

// pagerChallenge is the WWW-Authenticate of a refused key: a 401 must name a scheme
// (RFC 9110 11.6.1), and the pager's routes take the agent key as a bearer token (or
// X-Agent-Key).
const pagerChallenge = `Bearer realm="relayroom-pager"`

// NewHandler serves what `relayroom pager` talks to, authenticated by the agent key
// (X-Agent-Key or Authorization: Bearer). No answer of these routes is cached.
func NewHandler(d HandlerDeps) *httpapi.Mux {
	h := &httpHandler{svc: d.Service, errs: httpapi.Errors{Log: d.Log, Challenge: pagerChallenge}}
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: "/api/wakes/next", Credential: auth.AgentKey}, noStore(h.next))
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: "/api/wakes/{id}/ack", Credential: auth.AgentKey}, noStore(h.ack))
	return m
}

type httpHandler struct {
	svc  *Service
	errs httpapi.Errors
}

func noStore(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next(w, r)
	}
}

// ParseWait reads a long poll's ?wait= in whole seconds: DefaultWait when absent, at most
// MaxWait. A huge number is MaxWait: multiplied into a Duration first, it overflowed to a
// negative wait and the poll answered at once, so the pager spun instead of waiting.
func ParseWait(v string) (time.Duration, error) {
	if v == "" {
		return DefaultWait, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, apperr.New(apperr.Invalid, "wait must be a whole number of seconds")
	}
	if err != nil || n >= uint64(MaxWait/time.Second) {
		return MaxWait, nil
	}
	return time.Duration(n) * time.Second, nil
}

// next serves GET /api/wakes/next?wait=SECONDS: 200 with a claimed wake, or 204 when
// none arrived in time.
func (h *httpHandler) next(w http.ResponseWriter, r *http.Request) {
	a, err := h.svc.Authenticate(r.Context(), auth.AgentKey(r))
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	wait, err := ParseWait(r.URL.Query().Get("wait"))
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	wk, err := h.svc.Next(r.Context(), a, wait)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	if wk == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wk)
}

// ack serves POST /api/wakes/{id}/ack.
func (h *httpHandler) ack(w http.ResponseWriter, r *http.Request) {
	a, err := h.svc.Authenticate(r.Context(), auth.AgentKey(r))
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		h.errs.Write(w, r, apperr.New(apperr.NotFound, "no such wake"))
		return
	}
	st, err := h.svc.Ack(r.Context(), a, id)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "id": id, "status": st})
}
