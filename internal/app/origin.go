package app

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/oauth"
)

// Browsers may call the service from pages on allowed origins only. The MCP transport
// specification requires servers to validate Origin (a page on another origin, or a DNS
// rebinding attack, could otherwise drive a local server with the user's network
// position); requests without Origin come from non-browser clients and pass.

// corsAllowHeaders are the request headers a browser-based MCP client sends.
const corsAllowHeaders = "Authorization, Content-Type, Accept, X-Agent-Key, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Session-Id, Last-Event-Id, Idempotency-Key, X-Request-Id"

// corsExposeHeaders are the answer headers such a client reads: the sign-in challenge,
// the negotiated version, back-off and the request id for support.
const corsExposeHeaders = "WWW-Authenticate, Mcp-Protocol-Version, Retry-After, X-Request-Id"

// originPolicy decides which browser origins may call.
type originPolicy struct {
	allowed []string // lower-case origins: the public URL's and RELAYROOM_ALLOWED_ORIGINS
}

func (p originPolicy) allows(origin string) bool {
	return slices.Contains(p.allowed, strings.ToLower(origin))
}

// isPublicDocument reports routes anyone may read from any page: discovery documents
// and health. They carry no credential-bound data.
func isPublicDocument(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return strings.HasPrefix(path, "/.well-known/")
}

// isOAuthClientEndpoint: the authorization server's endpoints a client calls directly
// (registration, token, revocation), as opposed to the pages a person's browser opens.
func isOAuthClientEndpoint(path string) bool {
	return path == oauth.RouteRegister || path == oauth.RouteToken || path == oauth.RouteRevoke
}

func isMCPPath(path string) bool {
	return strings.HasPrefix(path, "/mcp/") || path == "/api/mcp" || strings.HasPrefix(path, "/api/mcp/") || path == "/desk/mcp"
}

// checkOrigin refuses requests from origins that are not allowed (403) and answers CORS
// for those that are, preflights included.
func (a *App) checkOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, w := c.Request(), c.Response()
		origin := r.Header.Get("Origin")
		if isPublicDocument(r.URL.Path) {
			if origin != "" {
				w.Header().Set("Access-Control-Allow-Origin", "*")
				if r.Method == http.MethodOptions {
					w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
					w.Header().Set("Access-Control-Allow-Headers", corsAllowHeaders)
					return c.NoContent(http.StatusNoContent)
				}
			}
			return next(c)
		}
		if origin == "" {
			return next(c)
		}
		if isOAuthClientEndpoint(r.URL.Path) {
			// Browser-based MCP clients register and exchange codes from their own origin.
			// These endpoints use no cookie or ambient credential: any origin may call.
			w.Header().Set("Access-Control-Allow-Origin", "*")
			if r.Method == http.MethodOptions {
				w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				return c.NoContent(http.StatusNoContent)
			}
			return next(c)
		}
		if !a.origins.allows(origin) {
			msg := "Forbidden: requests from origin " + quoteOrigin(origin) + " are not allowed (set RELAYROOM_ALLOWED_ORIGINS to allow a browser client's origin)"
			if isMCPPath(r.URL.Path) {
				mcp.WriteHTTPError(w, http.StatusForbidden, msg)
				return nil
			}
			return c.JSON(http.StatusForbidden, map[string]string{"error": msg, "request_id": RequestID(r.Context())})
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			return c.NoContent(http.StatusNoContent)
		}
		return next(c)
	}
}

// quoteOrigin keeps a hostile Origin value from shaping the message: at most 200 bytes,
// quoted.
func quoteOrigin(o string) string {
	if len(o) > 200 {
		o = o[:200]
	}
	return `"` + strings.ToValidUTF8(strings.NewReplacer(`"`, `\"`, "\n", " ", "\r", " ").Replace(o), "?") + `"`
}
