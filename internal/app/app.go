// Package app is the composition root: configuration in, pools, services and HTTP routes
// wired once, served until the context ends. `relayroom serve` and the end-to-end tests
// start the service through the same Run.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/dashboard"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/idempotency"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/status"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/throttle"
	"github.com/relayroom/relayroom/internal/wake"
	"github.com/relayroom/relayroom/internal/web"
)

// Version of the service, reported in MCP serverInfo.
const Version = "0.1.0"

// App is the wired service.
type App struct {
	cfg       config.Config
	log       *slog.Logger
	db        *pg.DB
	publicURL string
	origins   originPolicy
	metrics   *metrics
	resolver  *tenancy.Resolver
	threads   *threads.Service
	knowledge *knowledge.Service
	rooms     *rooms.Service
	desk      *desk.Service
	wake      *wake.Service
	jobs      *jobs.Runner
	limits    *limits
	echo      *echo.Echo
	// coded are the echo paths of the routes that answer their failures in the coded
	// format (httpapi.Route.Coded), filled while mounting, read by refuse.
	coded map[string]bool
	// idempotency serves the Idempotency-Key header of every endpoint's write tools.
	idempotency *idempotency.Store
	// Failed authentication: limits shared by replicas, and the log of refusals.
	throttle   *throttle.Throttle
	rejections *rejectionLog
	// People's pages and the OAuth authorization server (signin.go); tokens checks the
	// access tokens it issues for the endpoints.
	site   *web.Site
	oauth  *oauth.Server
	tokens auth.TokenVerifier

	// The people's dashboard under /app/ and the listener that keeps its rooms live.
	dash    *dashboard.Handler
	dashHub *dashboard.Hub

	// stopping: a stop was asked for; /readyz answers 503 while the server still serves
	// (RELAYROOM_SHUTDOWN_DELAY), so that balancers stop sending before it stops accepting.
	stopping atomic.Bool
}

func (a *App) public() string { return a.publicURL }

// Run migrates (when configured), serves until ctx is done, then shuts down gracefully:
// the listener closes at once and in-flight calls get cfg.ShutdownTimeout to finish.
// ready, if not nil, is called with the public base URL once the listener is bound.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, ready func(publicURL string)) error {
	if cfg.MigrateOnStart {
		if err := migrateUp(ctx, log, cfg.SessionURL()); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	database, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: int32(cfg.MaxConns), OpsMaxConns: opsPoolSize,
		StatementTimeout: cfg.StatementTimeout, LockTimeout: cfg.LockTimeout, DirectURL: cfg.DirectDatabaseURL})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer database.Close()
	checkDatabase(ctx, log, database, cfg)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w", cfg.Addr, err)
	}
	// The metrics listener binds now too, so that an address in use stops the start
	// before the jobs and the embedder (the config check sees only equal strings).
	var opsLn net.Listener
	if cfg.MetricsAddr != "" {
		if opsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			_ = ln.Close()
			return fmt.Errorf("serve: listen on %s (RELAYROOM_METRICS_ADDR): %w", cfg.MetricsAddr, err)
		}
		// Closed here on every early return; served, the server closes it (Close below).
		defer func() { _ = opsLn.Close() }()
	}
	publicURL := cfg.PublicURL
	if publicURL == "" {
		publicURL = config.DerivePublicURL(ln.Addr().String())
	}
	a, err := New(cfg, log, database, publicURL)
	if err != nil {
		_ = ln.Close()
		return err
	}
	cfg = a.cfg // the limits with their defaults applied
	// The builtin embedders load their model on first use; a server loads it now, so the
	// first read_memory does not wait for it (the sentence encoder takes a few hundred
	// milliseconds) and a damaged model stops startup instead of every search.
	if l, ok := a.rooms.Embedder.(interface {
		Load() error
		LoadTime() time.Duration
	}); ok {
		if err := l.Load(); err != nil {
			_ = ln.Close()
			return fmt.Errorf("serve: %w", err)
		}
		log.Info("embedder loaded", "embedder", a.rooms.Embedder.Name(), "load_time", l.LoadTime().String())
	}
	conns := newConnLimiter(ln, connCap(cfg.MaxConnections, cfg.MaxConns+opsPoolSize, log))
	srv := &http.Server{
		Handler:           a.echo,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnState:         conns.track,
		// net/http's own complaints (a handler's panic, a TLS handshake gone wrong) are
		// warnings of this log, not INFO lines of the process's default logger.
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// Background work: jobs (periodic ones on the elected leader only) and the wake
	// listener that answers long polls and dispatches webhooks.
	if err := a.jobs.Start(context.WithoutCancel(ctx)); err != nil {
		_ = ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	// wakeCtx ends after the drain: the writes a drain finishes still send their NOTIFYs
	// (wakes, room and thread changes) to the other replicas. hubCtx ends when the drain
	// starts: the dashboard's live streams would otherwise hold it to its timeout.
	wakeCtx, stopWakes := context.WithCancel(context.WithoutCancel(ctx))
	hubCtx, stopHub := context.WithCancel(wakeCtx)
	wakesDone := make(chan struct{})
	go func() { defer close(wakesDone); a.wake.Run(wakeCtx) }()
	hubDone, notifierDone, embedderDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(hubDone); a.dashHub.Run(hubCtx) }()
	go func() { defer close(notifierDone); a.rooms.RunNotifier(wakeCtx) }()
	threadNotesDone := make(chan struct{}) // the dashboard's live thread pages (threads.Channel)
	go func() { defer close(threadNotesDone); a.threads.RunNotifier(wakeCtx, a.log) }()
	// Memory vectors are made here, after write_memory's commit (docs/rooms.md, "Memory").
	go func() { defer close(embedderDone); a.rooms.RunEmbedder(wakeCtx) }()
	defer func() {
		stopHub()
		stopWakes()
		<-hubDone
		<-notifierDone
		<-embedderDone
		<-threadNotesDone
	}()
	defer func() {
		stopWakes()
		<-wakesDone
		jctx, jcancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer jcancel()
		if err := a.jobs.Stop(jctx); err != nil {
			log.Warn("jobs did not stop cleanly", "error", err.Error())
		}
	}()
	ops, opsErrc := a.serveOps(ctx, opsLn)
	if ops != nil {
		// Closed after the drain: /readyz there says "shutting down" meanwhile, and the
		// last scrape sees the drain's requests.
		defer func() {
			if err := ops.Close(); err != nil {
				log.Warn("closing the metrics listener", "error", err.Error())
			}
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(conns) }()
	log.Info("serving", "version", Version, "addr", ln.Addr().String(), "public_url", publicURL, "max_connections", conns.max)
	if ready != nil {
		ready(publicURL)
	}
	var opsErr error
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case err := <-opsErrc:
		// The process ends on it (an orchestrator restarts it), through the same drain
		// as a stop: returning at once left the main listener serving without its jobs.
		opsErr = fmt.Errorf("serve: metrics listener: %w", err)
		log.Error("the metrics listener stopped: shutting down", "error", err.Error())
	case <-ctx.Done():
	}
	a.stopping.Store(true)
	if cfg.ShutdownDelay > 0 {
		// A balancer that learns of the stop from /readyz (or an orchestrator that removes
		// the endpoint asynchronously) still sends for a moment: connections refused then
		// would be errors for every client of a rolling restart.
		log.Info("shutting down: not ready, still serving", "for", cfg.ShutdownDelay.String())
		time.Sleep(cfg.ShutdownDelay)
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout.String(), "open_connections", conns.open())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	// Pagers' long polls and the dashboard's streams end now rather than hold up the
	// drain; the notifiers run on until it ends (the deferred stopWakes).
	a.wake.EndPolls()
	stopHub()
	if err := srv.Shutdown(sctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("serve: shutdown: %w", err)
		}
		// A drain that outlasts its timeout is an expected end, not a crash for the
		// orchestrator to count: what is still open is cut, and said.
		log.Warn("shutdown timeout reached: closing the connections still open", "open_connections", conns.open())
		if err := srv.Close(); err != nil {
			log.Warn("closing the connections", "error", err.Error())
		}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	a.rejections.Flush()
	if opsErr != nil {
		return opsErr
	}
	log.Info("stopped")
	return nil
}

// serveOps serves the operations listener ln (RELAYROOM_METRICS_ADDR; nil: none, and it
// returns nil); the channel carries its end if it stops on its own.
func (a *App) serveOps(ctx context.Context, ln net.Listener) (*http.Server, <-chan error) {
	if ln == nil {
		return nil, nil
	}
	srv := &http.Server{
		Handler:           a.opsHandler(),
		ReadHeaderTimeout: a.cfg.ReadHeaderTimeout,
		ReadTimeout:       a.cfg.ReadTimeout,
		WriteTimeout:      a.cfg.WriteTimeout,
		IdleTimeout:       a.cfg.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	a.log.Info("serving metrics", "addr", ln.Addr().String(), "paths", []string{routeMetrics, status.PathLive, status.PathReady})
	return srv, errc
}

// New wires services and routes on an open database.
func New(cfg config.Config, log *slog.Logger, database *pg.DB, publicURL string) (*App, error) {
	cfg = cfg.WithDefaults()
	own, err := config.Origin(publicURL)
	if err != nil {
		return nil, fmt.Errorf("app: public URL: %w", err)
	}
	a := &App{
		cfg:       cfg,
		origins:   originPolicy{allowed: append([]string{own}, cfg.AllowedOrigins...)},
		log:       log,
		db:        database,
		publicURL: strings.TrimRight(publicURL, "/"),
		metrics:   newMetrics(map[string]*pgxpool.Pool{"app": database.App, "ops": database.Ops}),
		resolver:  tenancy.NewResolver(database),
		throttle:  throttle.New(database, cfg.AuthFailures, log, nil),
		limits:    newLimits(cfg.MaxRequestsPerAddr, cfg.MaxInflightBytes),
	}
	a.rejections = newRejectionLog(log, rejectionInterval)
	if err := a.buildServices(); err != nil {
		return nil, err
	}
	if err := a.newSignIn(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if err := a.newDashboard(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	a.metrics.watchListeners(a.listeners())
	for _, p := range a.periodicJobs() {
		if err := a.jobs.AddPeriodic(p); err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
	}
	opts := mcp.Options{
		Logger:       log,
		RequestID:    RequestID,
		OnToolCall:   a.onToolCall,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Idempotency:  a.idempotency,
	}
	// Served exactly as declared by Endpoints, so every served tool is behind the agreement
	// check and in the tools/list snapshots and the isolation matrix.
	handlers := map[string]http.Handler{}
	for name, ep := range a.Endpoints() {
		o := opts
		if name == "desk" {
			// The note's idempotency_key argument is the desk contract's retry mechanism; the
			// Idempotency-Key header's records belong to agents, and desk callers are people.
			o.Idempotency = nil
		}
		if handlers[name], err = mcp.NewHandler(ep, o); err != nil {
			return nil, fmt.Errorf("app: %s endpoint: %w", name, err)
		}
	}
	a.echo = a.routes(handlers["threads"], handlers["room"], handlers["all_rooms"], handlers["desk"])
	return a, nil
}

// Endpoints returns the four MCP endpoints' declarations as they are served (for the
// tools/list snapshots and the isolation matrix): every tool behind the agreement check.
func (a *App) Endpoints() map[string]mcp.Endpoint[tenancy.Scope] {
	return map[string]mcp.Endpoint[tenancy.Scope]{
		"threads":   admitted(a.threadsEndpoint()),
		"room":      admitted(a.roomEndpoint()),
		"all_rooms": admitted(a.allRoomsEndpoint()),
		"desk":      admitted(a.deskEndpoint()),
	}
}

// Handler is the HTTP handler of every route (for tests that serve it themselves).
func (a *App) Handler() http.Handler { return a.echo }

// migrateUp applies pending migrations, ours then the job queue's, and says what it did:
// which database, from which version to which, so that the log of an upgrade that failed
// half-way tells which build ran which migration.
func migrateUp(ctx context.Context, log *slog.Logger, dbURL string) error {
	start := time.Now()
	log.Info("migrating", "database", pg.Describe(dbURL), "version", Version)
	m, err := pg.MigrateUp(ctx, dbURL)
	if err != nil {
		return err
	}
	// River's tables, in their own schema, after ours.
	if err := jobs.MigrateUp(ctx, dbURL); err != nil {
		return err
	}
	if m.From == m.To {
		log.Info("schema up to date", "schema_version", m.To)
		return nil
	}
	log.Info("schema migrated", "from", m.From, "to", m.To, "duration_ms", time.Since(start).Milliseconds())
	return nil
}

// checkDatabase warns at start of what would otherwise show only later: a schema that is
// not this build's when the server does not migrate (RELAYROOM_MIGRATE=false: /readyz
// answers 503 until someone migrates, and nothing said why), and pools larger than the
// server's max_connections (requests then fail when the pools fill).
func checkDatabase(ctx context.Context, log *slog.Logger, database *pg.DB, cfg config.Config) {
	if !cfg.MigrateOnStart {
		st, err := database.Status(ctx)
		switch {
		case err != nil:
			log.Warn("cannot read the schema version", "error", err.Error())
		case !st.UpToDate():
			log.Warn("the schema is not this build's: not ready until it is (relayroom migrate up)",
				"schema_version", st.Current, "build_version", st.Latest, "dirty", st.Dirty)
		}
	}
	var most int
	err := database.Operator(ctx, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&most)
	})
	if err != nil {
		log.Warn("cannot read the database's max_connections", "error", err.Error())
		return
	}
	// Behind a transaction pooler the database sees the pooler's connections and the
	// session pool, not the request and operator pools.
	if pools := cfg.MaxConns + opsPoolSize; pools > most && cfg.DirectDatabaseURL == "" {
		log.Warn("the pools may open more connections than the database allows",
			"pools", pools, "max_connections", most, "setting", "RELAYROOM_DB_MAX_CONNS")
	}
}
