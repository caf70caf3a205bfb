package oauth_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestSignInTablesShowOnlyNamedRows: the service tables of sign-in (exempt from the tenant
// column rules in internal/pg/catalog_test.go) show the request role exactly the rows
// whose public id a transaction names, and nothing without one; people, memberships and
// clients show through a named session, request or grant only when the tenant asks for
// it (SignIn: rr_set_signin, migration 000019), and never through an expired one.
func TestSignInTablesShowOnlyNamedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	user, other, org, grant := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	ownerExec(t, d,
		`INSERT INTO app_user (id, email) VALUES ('`+user.String()+`', 'p@example.test'), ('`+other.String()+`', 'q@example.test')`,
		`INSERT INTO organisation (id, slug, name) VALUES ('`+org.String()+`', 'o', 'O')`,
		`INSERT INTO org_member (org_id, user_id, role) VALUES ('`+org.String()+`', '`+user.String()+`', 'member'), ('`+org.String()+`', '`+other.String()+`', 'member')`,
		`INSERT INTO web_session (session_id, secret_hash, user_id, expires_at) VALUES ('sessA', '\x00', '`+user.String()+`', now() + interval '1 hour'), ('sessB', '\x00', '`+user.String()+`', now() + interval '1 hour'), ('sessOld', '\x00', '`+other.String()+`', now() - interval '1 second')`,
		`INSERT INTO oauth_client (client_id, redirect_uris, source) VALUES ('clientA', '{https://a.example/cb}', 'registration'), ('clientB', '{https://b.example/cb}', 'registration'), ('clientC', '{https://c.example/cb}', 'registration'), ('clientD', '{https://d.example/cb}', 'registration')`,
		`INSERT INTO oauth_auth_request (id, client_id, redirect_uri, code_challenge, resource, expires_at) VALUES ('reqA', 'clientA', 'https://a.example/cb', 'c', 'r', now() + interval '1 hour'), ('reqB', 'clientB', 'https://b.example/cb', 'c', 'r', now() + interval '1 hour'), ('reqOld', 'clientD', 'https://d.example/cb', 'c', 'r', now() - interval '1 second')`,
		`INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, code_id, code_hash, code_challenge, redirect_uri, code_expires_at) VALUES ('`+org.String()+`', '`+grant.String()+`', 'clientC', '`+user.String()+`', 'r', 'codeC', '\x00', 'c', 'https://c.example/cb', now())`,
	)
	count := func(tn pg.Tenant, table string) int {
		var n int
		err := d.InTenant(ctx, tn, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	named := func(lookup string) pg.Tenant { return pg.Tenant{Lookup: lookup} }
	signIn := func(lookup string) pg.Tenant { return pg.Tenant{Lookup: lookup, SignIn: true} }
	for _, c := range []struct {
		name, table string
		tenant      pg.Tenant
		want        int
	}{
		{"nothing named", "web_session", named(""), 0}, {"a session", "web_session", named("sessA"), 1}, {"a client", "web_session", named("clientA"), 0},
		{"nothing named", "oauth_client", signIn(""), 0}, {"a client", "oauth_client", named("clientA"), 1},
		{"a request", "oauth_client", signIn("reqB"), 1}, // a pending request shows its own client, for the consent page
		{"a request without SignIn", "oauth_client", named("reqB"), 0},
		{"an expired request", "oauth_client", signIn("reqOld"), 0},
		{"a grant of the organisation", "oauth_client", pg.Tenant{OrgID: org, Lookup: grant.String(), SignIn: true}, 1},
		{"a grant without its organisation", "oauth_client", signIn(grant.String()), 0},
		{"the organisation alone", "oauth_client", pg.Tenant{OrgID: org, SignIn: true}, 0},
		{"nothing named", "oauth_auth_request", named(""), 0}, {"a request", "oauth_auth_request", named("reqA"), 1}, {"a client", "oauth_auth_request", named("clientA"), 0},
		{"nothing named", "app_user", signIn(""), 0}, {"a session", "app_user", signIn("sessB"), 1}, {"an email", "app_user", named("p@example.test"), 1},
		{"a request", "app_user", signIn("reqA"), 0}, {"a session without SignIn", "app_user", named("sessB"), 0},
		{"an expired session", "app_user", signIn("sessOld"), 0},
		{"a session", "org_member", signIn("sessA"), 1}, {"an expired session", "org_member", signIn("sessOld"), 0},
		{"a session without SignIn", "org_member", named("sessA"), 0},
	} {
		t.Run(c.table+" through "+c.name, func(t *testing.T) {
			if got := count(c.tenant, c.table); got != c.want {
				t.Fatalf("%s under %+v shows %d rows, want %d", c.table, c.tenant, got, c.want)
			}
		})
	}
	t.Run("a later tenant does not inherit what sign-in showed", func(t *testing.T) {
		var first, second int
		err := d.InTenant(ctx, signIn("sessA"), func(tx *pg.Tx) error {
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM app_user").Scan(&first); err != nil {
				return err
			}
			tx.SetTenant(named("sessA"))
			return tx.QueryRow(ctx, "SELECT count(*) FROM app_user").Scan(&second)
		})
		if err != nil || first != 1 || second != 0 {
			t.Fatalf("app_user: %d under SignIn, then %d under a plain lookup (%v); want 1, then 0", first, second, err)
		}
	})
}

func TestPruneDeletesWhatHasEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	user := uuid.New()
	ownerExec(t, d,
		`INSERT INTO app_user (id, email) VALUES ('`+user.String()+`', 'p@example.test')`,
		`INSERT INTO web_session (session_id, secret_hash, user_id, expires_at) VALUES ('old', '\x00', '`+user.String()+`', now() - interval '1 second'), ('live', '\x00', '`+user.String()+`', now() + interval '1 hour')`,
		`INSERT INTO oauth_client (client_id, redirect_uris, source, last_used_at) VALUES ('idle', '{https://a.example/cb}', 'registration', now() - interval '91 days'), ('used', '{https://b.example/cb}', 'registration', now() - interval '89 days')`,
		// Revoked and idle: a registration goes; a metadata document's URL stays revoked.
		`INSERT INTO oauth_client (client_id, redirect_uris, source, last_used_at, revoked_at) VALUES ('revoked', '{https://c.example/cb}', 'registration', now() - interval '91 days', now()), ('https://d.example/client.json', '{https://d.example/cb}', 'metadata_document', now() - interval '200 days', now() - interval '100 days')`,
		`INSERT INTO oauth_auth_request (id, client_id, redirect_uri, code_challenge, resource, expires_at) VALUES ('old', 'used', 'https://b.example/cb', 'c', 'r', now() - interval '1 second'), ('live', 'used', 'https://b.example/cb', 'c', 'r', now() + interval '1 hour')`,
	)
	s := newHandler(t, d, false)
	if n, err := s.Prune(ctx); err != nil || n != 4 {
		t.Fatalf("Prune = %d, %v; want 4 (an expired session, an expired request, two idle registrations)", n, err)
	}
	left := testfix.Scalar[string](t, d, `SELECT (SELECT string_agg(session_id, ',') FROM web_session) || '|' ||
		(SELECT string_agg(client_id, ',' ORDER BY client_id) FROM oauth_client) || '|' || (SELECT string_agg(id, ',') FROM oauth_auth_request)`)
	if left != "live|https://d.example/client.json,used|live" {
		t.Fatalf("left %q", left)
	}
}

// ownerExec runs statements as the owner (the operator role), to seed rows directly.
func ownerExec(t *testing.T, d *pg.DB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
