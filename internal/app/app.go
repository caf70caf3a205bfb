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
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
)

// Version of the service, reported in MCP serverInfo.
const Version = "0.1.0"

// App is the wired service.
type App struct {
	cfg       config.Config
	log       *slog.Logger
	db        *pg.DB
	publicURL string
	metrics   *metrics
	resolver  *tenancy.Resolver
	threads   *threads.Service
	rooms     *rooms.Service
	echo      *echo.Echo
}

func (a *App) public() string { return a.publicURL }

// Run migrates (when configured), serves until ctx is done, then shuts down gracefully:
// the listener closes at once and in-flight calls get cfg.ShutdownTimeout to finish.
// ready, if not nil, is called with the public base URL once the listener is bound.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, ready func(publicURL string)) error {
	if cfg.MigrateOnStart {
		if err := pg.MigrateUp(cfg.DatabaseURL); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	database, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: int32(cfg.MaxConns), StatementTimeout: cfg.StatementTimeout})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer database.Close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w", cfg.Addr, err)
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
	srv := &http.Server{
		Handler:           a.echo,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "public_url", publicURL)
	if ready != nil {
		ready(publicURL)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// New wires services and routes on an open database.
func New(cfg config.Config, log *slog.Logger, database *pg.DB, publicURL string) (*App, error) {
	q := db.New()
	a := &App{
		cfg:       cfg,
		log:       log,
		db:        database,
		publicURL: strings.TrimRight(publicURL, "/"),
		metrics:   newMetrics(map[string]*pgxpool.Pool{"app": database.App, "ops": database.Ops}),
		resolver:  &tenancy.Resolver{DB: database, Q: q},
		threads:   &threads.Service{DB: database, Q: q, Now: time.Now},
		rooms:     &rooms.Service{DB: database, Q: q},
	}
	opts := mcp.Options{
		Logger:       log,
		RequestID:    RequestID,
		OnToolCall:   a.metrics.observeTool,
		MaxBodyBytes: cfg.MaxBodyBytes,
	}
	threadsH, err := mcp.NewHandler(a.threadsEndpoint(), opts)
	if err != nil {
		return nil, fmt.Errorf("app: threads endpoint: %w", err)
	}
	roomH, err := mcp.NewHandler(a.roomEndpoint(), opts)
	if err != nil {
		return nil, fmt.Errorf("app: room endpoint: %w", err)
	}
	allRoomsH, err := mcp.NewHandler(a.allRoomsEndpoint(), opts)
	if err != nil {
		return nil, fmt.Errorf("app: all-rooms endpoint: %w", err)
	}
	deskH, err := mcp.NewHandler(a.deskEndpoint(), opts)
	if err != nil {
		return nil, fmt.Errorf("app: desk endpoint: %w", err)
	}
	a.echo = a.routes(threadsH, roomH, allRoomsH, deskH)
	return a, nil
}

// Endpoints returns the four MCP endpoints' declarations (for tools/list snapshots).
func (a *App) Endpoints() map[string]mcp.Endpoint[tenancy.Scope] {
	return map[string]mcp.Endpoint[tenancy.Scope]{
		"threads":   a.threadsEndpoint(),
		"room":      a.roomEndpoint(),
		"all_rooms": a.allRoomsEndpoint(),
		"desk":      a.deskEndpoint(),
	}
}

// Handler is the HTTP handler of every route (for tests that serve it themselves).
func (a *App) Handler() http.Handler { return a.echo }
