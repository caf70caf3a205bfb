package oauth_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestSignInTablesShowOnlyNamedRows: the service tables of sign-in (exempt from the tenant
// column rules in internal/pg/catalog_test.go) show the request role exactly the rows
// whose public id a transaction names, and nothing without one.
func TestSignInTablesShowOnlyNamedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	user := uuid.New()
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		for _, stmt := range []string{
			`INSERT INTO app_user (id, email) VALUES ('` + user.String() + `', 'p@example.test')`,
			`INSERT INTO web_session (session_id, secret_hash, user_id, expires_at) VALUES ('sessA', '\x00', '` + user.String() + `', now() + interval '1 hour'), ('sessB', '\x00', '` + user.String() + `', now() + interval '1 hour')`,
			`INSERT INTO oauth_client (client_id, redirect_uris, source) VALUES ('clientA', '{https://a.example/cb}', 'registration'), ('clientB', '{https://b.example/cb}', 'registration')`,
			`INSERT INTO oauth_auth_request (id, client_id, redirect_uri, code_challenge, resource, expires_at) VALUES ('reqA', 'clientA', 'https://a.example/cb', 'c', 'r', now() + interval '1 hour'), ('reqB', 'clientB', 'https://b.example/cb', 'c', 'r', now() + interval '1 hour')`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(lookup, table string) int {
		var n int
		err := d.InTenant(ctx, pg.Tenant{Lookup: lookup}, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		table, lookup string
		want          int
	}{
		{"web_session", "", 0}, {"web_session", "sessA", 1}, {"web_session", "clientA", 0},
		{"oauth_client", "", 0}, {"oauth_client", "clientA", 1},
		{"oauth_client", "reqB", 1}, // a pending request shows its own client, for the consent page
		{"oauth_auth_request", "", 0}, {"oauth_auth_request", "reqA", 1}, {"oauth_auth_request", "clientA", 0},
		{"app_user", "", 0}, {"app_user", "sessB", 1}, {"app_user", "p@example.test", 1}, {"app_user", "reqA", 0},
	} {
		t.Run(c.table+" named "+c.lookup, func(t *testing.T) {
			if got := count(c.lookup, c.table); got != c.want {
				t.Fatalf("%s with lookup %q shows %d rows, want %d", c.table, c.lookup, got, c.want)
			}
		})
	}
}

func TestPruneDeletesWhatHasEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	user := uuid.New()
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		for _, stmt := range []string{
			`INSERT INTO app_user (id, email) VALUES ('` + user.String() + `', 'p@example.test')`,
			`INSERT INTO web_session (session_id, secret_hash, user_id, expires_at) VALUES ('old', '\x00', '` + user.String() + `', now() - interval '1 second'), ('live', '\x00', '` + user.String() + `', now() + interval '1 hour')`,
			`INSERT INTO oauth_client (client_id, redirect_uris, source, last_used_at) VALUES ('idle', '{https://a.example/cb}', 'registration', now() - interval '91 days'), ('used', '{https://b.example/cb}', 'registration', now() - interval '89 days')`,
			`INSERT INTO oauth_auth_request (id, client_id, redirect_uri, code_challenge, resource, expires_at) VALUES ('old', 'used', 'https://b.example/cb', 'c', 'r', now() - interval '1 second'), ('live', 'used', 'https://b.example/cb', 'c', 'r', now() + interval '1 hour')`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := oauth.NewHandler(oauth.Deps{DB: d, Q: db.New(), PublicURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx); err != nil || n != 3 {
		t.Fatalf("Prune = %d, %v; want 3 (an expired session, an expired request, an idle client)", n, err)
	}
	var left string
	err = d.Operator(ctx, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, `SELECT (SELECT string_agg(session_id, ',') FROM web_session) || '|' ||
			(SELECT string_agg(client_id, ',') FROM oauth_client) || '|' || (SELECT string_agg(id, ',') FROM oauth_auth_request)`).Scan(&left)
	})
	if err != nil || left != "live|used|live" {
		t.Fatalf("left %q, %v", left, err)
	}
}
