package oauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// skewedHandler is the authorization server of a replica whose clock is off the
// database's by skew.
func skewedHandler(t *testing.T, d *pg.DB, skew time.Duration) *oauth.Server {
	t.Helper()
	s, err := oauth.NewHandler(oauth.Deps{DB: d, Q: db.New(), PublicURL: publicURL, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCodeLifetimeIsTheDatabasesClock: an authorization code made through one replica is
// redeemed through whichever the client's token request reaches. The code's minute was
// set by the consenting replica's clock and checked by the redeeming one's, so a replica
// whose clock ran two minutes ahead refused every code at once, and one two minutes
// behind accepted a code long spent of its minute.
func TestCodeLifetimeIsTheDatabasesClock(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	ahead, behind := skewedHandler(t, d, 2*time.Minute), skewedHandler(t, d, -2*time.Minute)
	// code makes a grant whose code ends at the database's now() plus left.
	code := func(t *testing.T, n int, left string) string {
		t.Helper()
		return seedCode(t, d, n, fmt.Sprintf("codeclient%d", n), left)
	}
	exchange := func(t *testing.T, s http.Handler, n int, c string) (int, map[string]any) {
		t.Helper()
		return postToken(t, s, exchangeForm(fmt.Sprintf("codeclient%d", n), c))
	}

	t.Run("a code within its minute is redeemed through a replica ahead of the database", func(t *testing.T) {
		if st, body := exchange(t, ahead, 1, code(t, 1, "55 seconds")); st != http.StatusOK {
			t.Fatalf("a fresh code through the replica ahead: %d %v", st, body)
		}
	})

	t.Run("a code past its minute is refused through a replica behind the database", func(t *testing.T) {
		if st, body := exchange(t, behind, 2, code(t, 2, "-5 seconds")); st != http.StatusBadRequest {
			t.Fatalf("an ended code through the replica behind: %d %v, want 400", st, body)
		}
	})
}

// TestAuthRequestLifetimeIsTheDatabasesClock: the authorization request kept through one
// replica is read for its consent through whichever replica the browser reaches, by the
// database's clock (AuthRequestGetByID). Its end was the keeping replica's clock plus ten
// minutes, so a replica eleven minutes behind the database kept requests that had ended
// before the person could see them.
func TestAuthRequestLifetimeIsTheDatabasesClock(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	ownerExec(t, d, `INSERT INTO oauth_client (client_id, redirect_uris, source) VALUES ('skewclient', '{http://127.0.0.1:5555/callback}', 'registration')`)
	status, location, body := authorizeWith(t, skewedHandler(t, d, -11*time.Minute), "skewclient")
	u, err := url.Parse(location)
	if err != nil || status != http.StatusFound || u.Query().Get("id") == "" {
		t.Fatalf("authorize through the replica behind: %d %q %s", status, location, body)
	}
	id := u.Query().Get("id")
	err = d.InTenant(context.Background(), pg.Tenant{Lookup: id, SignIn: true}, func(tx *pg.Tx) error {
		_, err := db.New().AuthRequestGetByID(context.Background(), tx, id)
		return err
	})
	if err != nil {
		t.Fatalf("the consent's read of a request kept a moment ago through the replica behind: %v", err)
	}
}
