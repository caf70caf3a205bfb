package oauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestADatabaseOutageIsAnsweredRetryLater: when the database cannot serve a sign-in
// request (unreachable, or a lock held past the lock timeout), /authorize, /token,
// /revoke and /register all answer 503 temporarily_unavailable, which a client retries.
// /token answered 500 server_error, which clients treat as the server's bug, while
// /register answered 503 for the same outage.
func TestADatabaseOutageIsAnsweredRetryLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, u := pgtest.Open(t)
	// down is a replica whose pool is closed: every database call fails as unreachable.
	downDB, err := pg.Open(ctx, u, pg.Options{MaxConns: 2, OpsMaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	downDB.Close()
	down := newHandler(t, downDB, false)

	exchange := exchangeForm("outageclient", seedCode(t, d, 1, "outageclient", "1 minute"))

	retryLater := func(t *testing.T, status int, body map[string]any, says string) {
		t.Helper()
		if status != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" || body["error_description"] != says {
			t.Fatalf("%d %v, want 503 temporarily_unavailable saying %q", status, body, says)
		}
	}

	t.Run("a code exchange whose client cannot be read", func(t *testing.T) {
		status, body := postToken(t, down, exchange)
		retryLater(t, status, body, pg.MsgUnavailable)
	})

	// impatient is a replica whose requests give up a lock wait after 200 ms.
	impatientDB, err := pg.Open(ctx, u, pg.Options{MaxConns: 2, OpsMaxConns: 1, StatementTimeout: time.Minute, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(impatientDB.Close)
	impatient := newHandler(t, impatientDB, false)

	t.Run("a code exchange whose grant stays locked past the lock timeout", func(t *testing.T) {
		holder := testfix.Holder(t, u)
		if _, err := holder.Exec(ctx, "LOCK TABLE oauth_grant IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		status, body := postToken(t, impatient, exchange)
		retryLater(t, status, body, pg.MsgUnavailable)
		if err := holder.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		// The code was not spent by the failed attempt: the client's retry redeems it.
		if status, body := postToken(t, newHandler(t, d, false), exchange); status != http.StatusOK {
			t.Fatalf("the retry after the outage: %d %v, want 200", status, body)
		}
	})

	t.Run("an authorization request whose client cannot be read", func(t *testing.T) {
		status, _, body := authorizeWith(t, down, "outageclient")
		if status != http.StatusServiceUnavailable || !strings.Contains(body, `"temporarily_unavailable"`) {
			t.Fatalf("%d %s, want 503 temporarily_unavailable", status, body)
		}
	})

	t.Run("an authorization request that cannot be kept goes back to the client as temporarily_unavailable", func(t *testing.T) {
		holder := testfix.Holder(t, u)
		if _, err := holder.Exec(ctx, "LOCK TABLE oauth_auth_request IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		q := url.Values{"response_type": {"code"}, "client_id": {"outageclient"}, "redirect_uri": {"http://127.0.0.1/cb"},
			"state": {"s"}, "code_challenge": {codeChallenge()}, "code_challenge_method": {"S256"},
			"resource": {publicURL + "/desk/mcp"}, "scope": {"conversations:read"}}
		w := httptest.NewRecorder()
		impatient.ServeHTTP(w, httptest.NewRequest(http.MethodGet, oauth.RouteAuthorize+"?"+q.Encode(), nil))
		status, location, body := w.Code, w.Header().Get("Location"), w.Body.String()
		at, err := url.Parse(location)
		if err != nil || status != http.StatusFound || !strings.HasPrefix(location, "http://127.0.0.1/cb?") ||
			at.Query().Get("error") != "temporarily_unavailable" || at.Query().Get("state") != "s" {
			t.Fatalf("%d %q %s, want a redirect to the client with error=temporarily_unavailable and its state", status, location, body)
		}
	})

	t.Run("a revocation", func(t *testing.T) {
		status, body := postAnswer(t, down, oauth.RouteRevoke, "application/x-www-form-urlencoded",
			url.Values{"token": {"qyt_rt_x"}, "client_id": {"outageclient"}}.Encode())
		retryLater(t, status, body, pg.MsgUnavailable)
	})

	t.Run("a registration", func(t *testing.T) {
		status, body := postAnswer(t, down, oauth.RouteRegister, "application/json", `{"redirect_uris":["http://127.0.0.1/cb"]}`)
		retryLater(t, status, body, "could not register: retry later")
	})
}
