package app

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/dashboard"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/status"
	"github.com/relayroom/relayroom/internal/throttle"
	"github.com/relayroom/relayroom/internal/wake"
)

// Route patterns the limits treat apart; routes() registers them under these names.
const (
	routeHealthz     = status.PathLive
	routeReadyz      = status.PathReady
	routeMetrics     = "/metrics"
	routeThreadsMCP  = "/mcp/:code"
	routeRoomMCP     = "/api/mcp/p/:project_id"
	routeAllRoomsMCP = "/api/mcp"
	routeDeskMCP     = "/desk/mcp"
	routeWakeNext    = "/api/wakes/next"
)

// Reasons of the limits' 429 answers (the apperr Reason; docs/limits.md).
const (
	reasonAddressBusy = "too_many_requests_from_address"
	reasonServerBusy  = "too_many_request_bytes"
)

// limitRetryAfter is the Retry-After, in seconds, of a request refused by a limit: the
// requests that hold what it needs are short (their database work ends within the
// statement timeout).
const limitRetryAfter = 1

// growStep is how much more of the byte budget a body takes each time it outgrows what it
// holds, so that a body does not lock the budget per read. It is also the most a declared
// body takes before it is read: a request refused unread (no valid credential) may wait a
// second for its first bytes, and must not hold its whole declared size meanwhile.
const growStep = 64 << 10

// limits holds what the requests in progress hold: a count per client address and the
// bytes of their bodies.
type limits struct {
	perAddr int
	budget  byteBudget

	mu     sync.Mutex
	active map[string]int
}

func newLimits(perAddr int, maxBytes int64) *limits {
	return &limits{perAddr: perAddr, budget: byteBudget{max: maxBytes}, active: map[string]int{}}
}

// prefixShare is how many addresses' worth of requests one IPv6 /64 may have in progress
// together: a host can send each request from another address of its /64, while one
// subnet (a cloud's, a cluster's) may hold many real clients.
const prefixShare = 16

// client is what a request's requests in progress are counted under: its address and,
// for an IPv6 one, its /64 ("" for none).
type client struct{ addr, prefix string }

// enter counts a request of c in, unless its address already has perAddr in progress or
// its /64 perAddr × prefixShare.
func (l *limits) enter(c client) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active[c.addr] >= l.perAddr || (c.prefix != "" && l.active[c.prefix] >= l.perAddr*prefixShare) {
		return false
	}
	l.active[c.addr]++
	if c.prefix != "" {
		l.active[c.prefix]++
	}
	return true
}

func (l *limits) leave(c client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []string{c.addr, c.prefix} {
		switch {
		case k == "":
		case l.active[k] <= 1:
			delete(l.active, k) // the map holds only keys with requests in progress
		default:
			l.active[k]--
		}
	}
}

// byteBudget bounds the request body bytes all requests in progress may hold together.
type byteBudget struct {
	mu        sync.Mutex
	used, max int64
}

func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// bodyHold is what one request holds of the byte budget. A declared body (Content-Length)
// takes its size, at most growStep, before the handler runs, so a refusal costs no read
// and a lying Content-Length cannot reserve the budget unread; past that, and for a body
// of undeclared length (chunked), the budget is taken as the body is read, and a read past
// what the budget allows fails with an apperr that the MCP endpoints answer as a 429.
type bodyHold struct {
	budget *byteBudget
	body   io.ReadCloser
	held   int64
	read   int64
	// done is set once a read has failed or met the body's end.
	done bool
	// w is the request's answer, whose write deadline a read cut by the read timeout
	// extends (see Read).
	w http.ResponseWriter
}

func (h *bodyHold) Read(p []byte) (int, error) {
	n, err := h.body.Read(p)
	if err != nil {
		h.done = true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && h.w != nil {
		// The read timeout cut the body. The write deadline (the same length, counted
		// from the end of the headers) has passed with it, so the handler's 400 would
		// reach nobody: the client saw the connection close without an answer. It gets
		// a moment to be written; the connection is closed after it all the same.
		_ = http.NewResponseController(h.w).SetWriteDeadline(time.Now().Add(httpapi.RefusalDrain))
	}
	h.read += int64(n)
	if h.read > h.held {
		more := max(h.read-h.held, growStep)
		if !h.budget.take(more) {
			return 0, errServerBusy()
		}
		h.held += more
	}
	return n, err
}

func (h *bodyHold) Close() error { return h.body.Close() }

func (h *bodyHold) release() { h.budget.give(h.held) }

func limitError(reason, msg string) *apperr.Error {
	e := apperr.New(apperr.RateLimited, "%s", msg).WithReason(reason)
	e.Details = map[string]any{httpapi.RetryAfterDetail: limitRetryAfter}
	return e
}

func errAddressBusy() *apperr.Error {
	return limitError(reasonAddressBusy, "Too many requests in progress from your address; retry shortly")
}

func errServerBusy() *apperr.Error {
	return limitError(reasonServerBusy, "The server holds too many request bodies; retry shortly")
}

// limit applies the per-request limits of docs/limits.md. Health and metrics routes are
// exempt, so that they answer under any load. The pager's long poll gets deadlines long
// enough for its wait and is not counted per address: it holds no body and no database
// connection while it waits, and many pagers may share one address behind a NAT.
func (a *App) limit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// Every 503 says when to retry, whichever handler wrote it, on the exempt routes
		// too (the pager's long poll is told the database is unavailable like any call).
		res := c.Response()
		res.Before(func() {
			if res.Status == http.StatusServiceUnavailable && res.Header().Get("Retry-After") == "" {
				res.Header().Set("Retry-After", strconv.Itoa(pg.RetryAfterSeconds))
			}
		})
		switch c.Path() {
		case routeHealthz, routeReadyz, routeMetrics:
			return next(c)
		case routeWakeNext:
			a.extendDeadlines(c, wake.MaxWait)
			return next(c)
		case dashboard.RouteEvents, dashboard.RouteProjectEvents: // a live stream: it bounds its own lifetime and database budgets
			a.extendDeadlines(c, dashboard.StreamLifetime)
			return next(c)
		}
		r := c.Request()
		if !mcp.IdentityCoded(r) && !mcpRoute(c.Path()) { // the MCP endpoints refuse it in their wire
			return a.refuseCoding(c)
		}
		who := a.limitClient(r)
		if !a.limits.enter(who) {
			return a.refuse(c, errAddressBusy())
		}
		defer a.limits.leave(who)
		hold := &bodyHold{budget: &a.limits.budget, body: r.Body, w: c.Response()}
		if r.ContentLength > 0 {
			hold.held = min(r.ContentLength, a.limits.budget.max, growStep)
			if !a.limits.budget.take(hold.held) {
				return a.refuse(c, errServerBusy())
			}
		}
		defer hold.release()
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = hold
		}
		// One database budget per request, for all its transactions (docs/limits.md).
		c.SetRequest(r.WithContext(pg.WithBudget(r.Context(), a.cfg.StatementTimeout)))
		err := next(c)
		if r.Body != nil && r.Body != http.NoBody && !hold.done {
			// Answered without reading the whole body (/token of a body that is no
			// form, a refusal): net/http reads what is left before it sends the answer,
			// which a body that never ends held until the read timeout, and past it the
			// answer was lost with the write deadline.
			httpapi.BoundDrain(c.Response(), r, a.log)
		}
		return err
	}
}

// refuseCoding answers a coded body with 415 and what is accepted (RFC 9110 15.5.16).
func (a *App) refuseCoding(c echo.Context) error {
	w := c.Response()
	httpapi.BoundDrain(w, c.Request(), a.log)
	w.Header().Set("Accept-Encoding", "identity")
	httpapi.WriteError(w, c.Request(), http.StatusUnsupportedMediaType, mcp.MsgContentCoding)
	return nil
}

// extendDeadlines gives a long poll room for its wait on top of the server's timeouts.
// The read deadline matters too: when it passes while the handler runs, net/http cancels
// the request's context.
func (a *App) extendDeadlines(c echo.Context, wait time.Duration) {
	rc := http.NewResponseController(c.Response())
	now := time.Now()
	err := errors.Join(rc.SetReadDeadline(now.Add(wait+a.cfg.ReadTimeout)), rc.SetWriteDeadline(now.Add(wait+a.cfg.WriteTimeout)))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		a.log.WarnContext(c.Request().Context(), "cannot extend the long poll's deadlines", "error", err.Error())
	}
}

// refuse answers a request a limit refused, in its route's wire: a JSON-RPC error on the
// MCP endpoints, {"error": {"code", "message"}} on the coded routes (the desk's ingest
// API, CI confirmation: their OpenAPI says so for every failure), {"error", "reason",
// "request_id"} elsewhere; all with Retry-After.
func (a *App) refuse(c echo.Context, e *apperr.Error) error {
	if mcpRoute(c.Path()) {
		httpapi.BoundDrain(c.Response(), c.Request(), a.log)
		mcp.WriteRefusal(c.Response(), e)
		return nil
	}
	if a.coded[c.Path()] {
		// The code those APIs document for a 429 is rate_limited, whichever limit it was:
		// the reason (too_many_requests_from_address, …) would be a code they never list.
		ce := *e
		ce.Reason = ""
		httpapi.Errors{Log: a.log, Coded: true}.Write(c.Response(), c.Request(), &ce)
		return nil
	}
	httpapi.Errors{Log: a.log}.Write(c.Response(), c.Request(), e)
	return nil
}

// mcpRoute reports whether route is one of the MCP endpoints, which answer in JSON-RPC.
func mcpRoute(route string) bool {
	switch route {
	case routeThreadsMCP, routeRoomMCP, routeAllRoomsMCP, routeDeskMCP:
		return true
	}
	return false
}

// limitClient is who requests in progress are counted by: the client's address (behind a
// trusted proxy, the client it names), and for IPv6 its /64 as well, or the raw peer when
// that cannot be read (docs/limits.md).
func (a *App) limitClient(r *http.Request) client {
	ip, ok := throttle.ClientIP(r, a.cfg.TrustedProxies)
	if !ok {
		return client{addr: r.RemoteAddr}
	}
	c := client{addr: ip.String()}
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			c.prefix = p.String()
		}
	}
	return c
}
