// Package status answers what the service is and whether it can serve: the index page
// (the service's name, version and endpoint URLs), liveness and readiness. Monitors and
// load balancers read these routes, so they answer under any load (internal/app exempts
// them from the request limits) and never need a credential.
package status

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/pg"
)

// The routes' paths, which the request limits also name.
const (
	PathIndex = "/"
	PathLive  = "/healthz"
	PathReady = "/readyz"
)

// ReadyTimeout bounds the database checks of one readiness request: a monitor wants an
// answer, and a database that takes longer is not ready.
const ReadyTimeout = 2 * time.Second

// HandlerDeps is what the status routes need.
type HandlerDeps struct {
	DB  *pg.DB
	Log *slog.Logger
	// PublicURL is the base URL the index's endpoint URLs start with.
	PublicURL string
	// Version is the service's version, as MCP serverInfo reports it.
	Version string
	// Stopping reports that the server is shutting down (nil: never): not ready, while
	// it still serves what balancers send until they notice.
	Stopping func() bool
	// Listeners are the replica's LISTEN connections, reported by readiness. One that is
	// reconnecting does not make the replica unready: every request is still served, and
	// only the prompt news of long polls and live pages waits for their own checks; were
	// it otherwise, a database that refuses LISTEN (a pooler in transaction mode) would
	// take every replica out at once.
	Listeners []Listener
}

// Listener is one LISTEN connection and its state now ("listening", "reconnecting",
// "connecting": waiters.State).
type Listener struct {
	Name  string
	State func() string
}

// NewHandler serves the index, liveness and readiness.
func NewHandler(d HandlerDeps) *httpapi.Mux {
	h := &httpHandler{d: d}
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: PathLive}, live)
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: PathReady}, h.ready)
	// "/" as a net/http pattern matches every path, but the mount routes only "/" here.
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: PathIndex}, h.index)
	return m
}

type httpHandler struct{ d HandlerDeps }

// live answers 200 while the process serves HTTP at all; it asks nothing of the database.
func live(w http.ResponseWriter, _ *http.Request) {
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready answers 200 with the schema version when the database answers and the schema is
// current, and 503 with the reason otherwise.
func (h *httpHandler) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	listeners := h.listeners() // as of the request, not of the checks' end
	if h.d.Stopping != nil && h.d.Stopping() {
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "shutting down"})
		return
	}
	// Checked first: with every connection taken, the ping below would only wait.
	if h.d.DB.PoolExhausted() {
		h.d.Log.WarnContext(ctx, "not ready: pool exhausted")
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "pool exhausted"})
		return
	}
	if err := h.d.DB.Ping(ctx); err != nil {
		h.d.Log.WarnContext(ctx, "not ready: database", "error", err.Error())
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "database unreachable"})
		return
	}
	st, err := h.d.DB.Status(ctx)
	if err != nil {
		h.d.Log.WarnContext(ctx, "not ready: migrations", "error", err.Error())
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "cannot read the schema version"})
		return
	}
	if !st.UpToDate() {
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": "migrations are not current", "migrations": st})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "migrations": st, "listeners": listeners})
}

// listeners says the state of each LISTEN connection.
func (h *httpHandler) listeners() map[string]string {
	out := map[string]string{}
	for _, l := range h.d.Listeners {
		out[l.Name] = l.State()
	}
	return out
}

// index names the service and the URL of each MCP endpoint, as a person pastes it into a
// client (the braces are the parts they fill in).
func (h *httpHandler) index(w http.ResponseWriter, _ *http.Request) {
	base := h.d.PublicURL
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{
		"service": "relayroom", "version": h.d.Version,
		"endpoints": map[string]string{
			"threads":   base + "/mcp/{connect_code}?part={part}",
			"room":      base + "/api/mcp/p/{project_id}",
			"all_rooms": base + "/api/mcp",
			"desk":      base + "/desk/mcp",
		},
	})
}
