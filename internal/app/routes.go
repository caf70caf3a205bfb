package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/status"
	"github.com/relayroom/relayroom/internal/wake"
)

// routes mounts every route: the service's own (metrics, resource metadata), the MCP
// endpoints, and the HTTP surfaces beside MCP (the index, health and readiness among
// them), which each package declares in its NewHandler.
func (a *App) routes(threadsH, roomH, allRoomsH, deskH http.Handler) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = a.httpError
	e.Use(a.requestContext, a.recoverPanics, a.limit, a.checkOrigin)

	if a.cfg.MetricsAddr == "" {
		// Set, the metrics are served by the operations listener alone (opsHandler).
		metrics := echo.WrapHandler(a.metrics.handler())
		e.GET(routeMetrics, metrics)
		e.HEAD(routeMetrics, metrics) // a monitor's check that the route answers
	}

	e.Any(routeThreadsMCP, withPath(threadsH, connectCodeKey, "code"))
	e.Any(routeRoomMCP, withPath(roomH, projectIDKey, "project_id"))
	e.Any(routeAllRoomsMCP, echo.WrapHandler(allRoomsH))
	e.Any(routeDeskMCP, echo.WrapHandler(deskH))
	for _, h := range []httpapi.Handler{
		a.statusHandler(),
		rooms.NewHandler(rooms.HandlerDeps{Service: a.rooms, Log: a.log}),
		wake.NewHandler(wake.HandlerDeps{Service: a.wake, Log: a.log}),
		knowledge.NewHandler(knowledge.HandlerDeps{Service: a.knowledge, Log: a.log}),
		desk.NewHandler(desk.HandlerDeps{Service: a.desk, Log: a.log}),
		auth.NewMetadataHandler(a.public()),
	} {
		a.mount(e, h)
	}
	a.signInRoutes(e)
	a.dashboardRoutes(e)
	return e
}

// pathValuePattern and pathRestPattern turn a net/http pattern's {name} into echo's
// :name and a trailing {name...} into echo's *.
var (
	pathValuePattern = regexp.MustCompile(`\{([a-z_]+)\}`)
	pathRestPattern  = regexp.MustCompile(`\{[a-z_]+\.\.\.\}$`)
)

// mount serves a surface's routes on echo's router (so that the limits, logs and metrics
// see each route's pattern), each under the failed-authentication limits when it reads a
// credential.
func (a *App) mount(e *echo.Echo, h httpapi.Handler) {
	for _, rt := range h.Routes() {
		next := echo.WrapHandler(h)
		if rt.Credential != nil {
			next = a.limitedRoute(rt.Credential, httpapi.Errors{Log: a.log, Coded: rt.Coded}, next)
		}
		path := pathValuePattern.ReplaceAllString(pathRestPattern.ReplaceAllString(rt.Path, "*"), ":$1")
		e.Add(rt.Method, path, next)
		if rt.Coded {
			if a.coded == nil {
				a.coded = map[string]bool{}
			}
			a.coded[path] = true
		}
		if rt.Method == http.MethodGet && rt.Credential == nil {
			// HEAD is GET without the body (RFC 9110 9.3.2): monitors and download tools
			// send it, and it answered 405. The surface's mux serves HEAD on its GET
			// patterns, and the server writes no body for it. Not on a route that reads a
			// credential: the pager's long poll is a GET that claims a wake, and a HEAD
			// would claim it for a body nobody reads.
			e.Add(http.MethodHead, path, next)
		}
	}
}

// withPath hands a path parameter to the MCP handler through the request context.
func withPath(h http.Handler, k pathKey, name string) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		// A URL pasted with a slash at its end names the same endpoint: echo hands the
		// slash over with the value ("…/mcp/CODE/" → "CODE/").
		ctx := context.WithValue(r.Context(), k, strings.TrimSuffix(c.Param(name), "/"))
		h.ServeHTTP(c.Response(), r.WithContext(ctx))
		return nil
	}
}

// requestContext gives every request an id (the caller's X-Request-Id when sane), puts it
// in the context for every log line, and logs and measures the request, with credentials
// masked out of the path.
func (a *App) requestContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		r := c.Request()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Response().Header().Set("X-Request-Id", id)
		ctx, note := withRequestNote(WithRequestID(r.Context(), id))
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		d := time.Since(start)
		method := metricMethod(r.Method)
		a.metrics.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		a.metrics.latency.WithLabelValues(route, method).Observe(d.Seconds())
		// Probes are counted, not logged: a balancer asks /readyz every second of every
		// replica (86,000 lines a replica a day). A replica answering unready is logged.
		if route != "/metrics" && route != "/healthz" && (route != "/readyz" || status != http.StatusOK) {
			// Typed attributes, not key-value pairs: the line is written on every request,
			// and slog then neither boxes the numbers nor converts the pairs.
			line := func(extra ...slog.Attr) []slog.Attr {
				return append([]slog.Attr{slog.String("method", r.Method), slog.String("path", loggedPath(r.URL)),
					slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000), slog.Int64("bytes", c.Response().Size)}, extra...)
			}
			extra := note.attrs([]slog.Attr{slog.String("client", a.clientAddress(r))})
			if ctx.Err() != nil {
				// The client closed the connection before the answer was written whole (a
				// download abandoned part way): the status says what was begun, this says
				// it was never finished.
				extra = append(extra, slog.Bool("client_gone", true))
			}
			if status == http.StatusUnauthorized || status == http.StatusTooManyRequests {
				// Refusals come in floods: one line per address per interval (logging.go),
				// built only when written.
				a.rejections.Log(ctx, a.clientAddress(r), status, line)
			} else {
				a.log.LogAttrs(ctx, slog.LevelInfo, "request", line(extra...)...)
			}
		}
		return nil
	}
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{8,64}$`)

// validRequestID refuses an id that holds a credential: it would be echoed and logged.
func validRequestID(s string) bool {
	return requestIDPattern.MatchString(s) && RedactCredentials(s) == s
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}

// recoverPanics answers a panic outside the MCP handler (which recovers its own) with a
// JSON 500 that names the request id, and logs the cause.
func (a *App) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				a.log.ErrorContext(c.Request().Context(), "panic", "panic", p)
				httpapi.WriteError(c.Response(), c.Request(), http.StatusInternalServerError, "internal error")
			}
		}()
		return next(c)
	}
}

// httpError keeps echo's own errors (404, 405) JSON and free of internals.
func (a *App) httpError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal error"
	if he, ok := err.(*echo.HTTPError); ok {
		code = he.Code
		msg = http.StatusText(code)
	} else {
		a.log.ErrorContext(c.Request().Context(), "handler error", "error", err.Error())
	}
	if a.coded[c.Path()] {
		// The router's 405 of a coded route (the desk's ingest API, CI confirmation: a GET
		// of a POST route) in the format their OpenAPI gives every failure, Allow set.
		httpapi.WriteJSON(c.Response(), code, httpapi.CodedError{Error: httpapi.CodedErrorBody{Code: httpapi.StatusCode(code), Message: msg}})
		return
	}
	httpapi.WriteError(c.Response(), c.Request(), code, msg)
}

// statusHandler serves the index, liveness and readiness.
func (a *App) statusHandler() *httpapi.Mux {
	return status.NewHandler(status.HandlerDeps{DB: a.db, Log: a.log, PublicURL: a.public(), Version: Version, Stopping: a.stopping.Load,
		Listeners: a.listeners()})
}

// listeners are the replica's LISTEN connections, for readiness and the metrics.
func (a *App) listeners() []status.Listener {
	return []status.Listener{{Name: "wake", State: a.wake.ListenState}, {Name: "dashboard", State: a.dashHub.ListenState}}
}

// opsHandler is the operations listener's (RELAYROOM_METRICS_ADDR): the metrics, liveness
// and readiness, nothing a client calls. No credential, as on the main listener; what
// keeps it private is the address it listens on.
func (a *App) opsHandler() http.Handler {
	st := a.statusHandler()
	mux := http.NewServeMux()
	mux.Handle("GET "+routeMetrics, a.metrics.handler()) // GET patterns match HEAD too
	mux.Handle("GET "+status.PathLive, st)
	mux.Handle("GET "+status.PathReady, st)
	return mux
}
