package oauth_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestTokenAnswersAreNeverCached: every answer of the token and revocation endpoints
// carries Cache-Control: no-store (RFC 6749 5.1; the conformance suite's
// authorization-code-grant checks it), whatever the request.
func TestTokenAnswersAreNeverCached(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s, err := oauth.NewHandler(oauth.Deps{DB: d, Q: db.New(), PublicURL: publicURL, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{oauth.RouteToken, oauth.RouteRevoke} {
		t.Run(route, func(t *testing.T) {
			form := url.Values{"grant_type": {"authorization_code"}, "code": {"qyt_ac_unknown"}, "client_id": {"rrc_unknown"}, "token": {"x"}}
			req := httptest.NewRequest(http.MethodPost, route, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if got := w.Header().Get("Cache-Control"); got != "no-store" {
				t.Fatalf("%s answered %d with Cache-Control %q, want no-store", route, w.Code, got)
			}
		})
	}
}
