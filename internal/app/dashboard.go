package app

import (
	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/dashboard"
)

// newDashboard builds the people's dashboard (after newSignIn: it uses the site's
// sessions) and its LISTEN/NOTIFY hub, which Run starts.
func (a *App) newDashboard() error {
	a.dashHub = dashboard.NewHub(a.db, a.log)
	h, err := dashboard.NewHandler(dashboard.Deps{Site: a.site, Resolver: a.resolver, Rooms: a.rooms, Know: a.knowledge, Hub: a.dashHub,
		Threads: a.threads, Audit: audit.New(a.db), Admin: admin.New(a.db, a.publicURL), Wake: a.wake, Desk: a.desk,
		StatementTimeout: a.cfg.StatementTimeout, Log: a.log})
	if err != nil {
		return err
	}
	a.dash = h
	return nil
}

// dashboardRoutes mounts /app/; the live stream has a route of its own so that the limit
// middleware recognises it.
func (a *App) dashboardRoutes(e *echo.Echo) {
	h := echo.WrapHandler(a.dash)
	e.GET(dashboard.RouteEvents, h)
	e.GET(dashboard.RouteProjectEvents, h)
	for _, p := range dashboard.Routes {
		e.Any(p, h)
	}
}
