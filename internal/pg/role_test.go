package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestEveryTransactionSetsItsRole: a connection pooler in transaction mode (PgBouncer)
// hands a transaction whichever server connection is free, whose session role another
// client set or reset. The request pool's connections switched to the request role once,
// when they connected, so a request transaction on a connection reset to the owner ran
// as the owner and passed every row-level security policy: another tenant's rows were
// read. Each transaction now sets its role itself. Simulated here on a connection of each
// pool whose session role is changed between two transactions, as a pooler would.
func TestEveryTransactionSetsItsRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, fx := openSeeded(t, pgtest.New(t), pg.Options{})
	// session changes the session role of the pool's one connection, as another client of
	// a pooler would on the server connection this pool gets next.
	session := func(t *testing.T, app bool, sql string) {
		t.Helper()
		pool := d.Ops
		if app {
			pool = d.App
		}
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a request transaction on a connection reset to the owner runs as the request role", func(t *testing.T) {
		session(t, true, "RESET ROLE")
		var who string
		var orgs int
		err := d.InTenant(ctx, pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT current_user::text, (SELECT count(*) FROM membership WHERE project_id IN ($1, $2))",
				fx.projectA, fx.projectB).Scan(&who, &orgs)
		})
		if err != nil || who != pg.AppRole || orgs != 1 {
			t.Fatalf("ran as %q and saw %d memberships of the two tenants (want %s and 1): %v", who, orgs, pg.AppRole, err)
		}
	})
	t.Run("an operator transaction on a connection set to the request role runs as the login role", func(t *testing.T) {
		session(t, false, "SET ROLE "+pg.AppRole)
		var who, login string
		var n int
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT current_user::text, session_user::text, (SELECT count(*) FROM membership WHERE project_id IN ($1, $2))",
				fx.projectA, fx.projectB).Scan(&who, &login, &n)
		})
		if err != nil || who != login || n != 2 {
			t.Fatalf("ran as %q (login %q) and saw %d memberships (want 2): %v", who, login, n, err)
		}
	})
	t.Run("the role lasts for the transaction only", func(t *testing.T) {
		var who string
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT current_user::text").Scan(&who)
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Ops.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		var after string
		if err := c.QueryRow(ctx, "SELECT current_user::text").Scan(&after); err != nil || after != pg.AppRole {
			t.Fatalf("after the transaction the session runs as %q, want the role it had (%s): %v", after, pg.AppRole, err)
		}
	})
}

// TestBehindAPoolerEachTransactionCarriesItsTimeouts: with a direct URL (DATABASE_URL
// goes through a transaction pooler) the pools send no startup parameters, which
// PgBouncer refuses, so each request transaction sets its statement and lock timeouts
// itself; statements are not prepared by name, since a named statement lives on one
// server connection; and what needs a session has a pool of its own on the direct URL.
func TestBehindAPoolerEachTransactionCarriesItsTimeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.New(t)
	d, fx := openSeeded(t, u, pg.Options{MaxConns: 1, OpsMaxConns: 1, StatementTimeout: 3 * time.Second, LockTimeout: 700 * time.Millisecond, DirectURL: u})
	t.Run("a request transaction sets both timeouts", func(t *testing.T) {
		var st, lt string
		err := d.InTenant(ctx, pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')").Scan(&st, &lt)
		})
		if err != nil || st != "3s" || lt != "700ms" {
			t.Fatalf("statement_timeout %q, lock_timeout %q (want 3s, 700ms): %v", st, lt, err)
		}
	})
	t.Run("the connection itself carries neither", func(t *testing.T) {
		c, err := d.App.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		var st, lt string
		if err := c.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')").Scan(&st, &lt); err != nil || st != "0" || lt != "0" {
			t.Fatalf("statement_timeout %q, lock_timeout %q on the session (want 0, 0): %v", st, lt, err)
		}
	})
	t.Run("statements are described, not prepared by name", func(t *testing.T) {
		for name, pool := range map[string]*pgxpool.Pool{"app": d.App, "ops": d.Ops} {
			if m := pool.Config().ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeCacheDescribe {
				t.Errorf("the %s pool's mode is %v", name, m)
			}
		}
	})
	t.Run("the session pool is its own, on the direct URL", func(t *testing.T) {
		if d.Session == d.Ops || d.Session == d.App {
			t.Fatal("LISTEN and the job queue share a pool with the pooler's connections")
		}
	})
	t.Run("a direct URL that reaches another database is refused at the start", func(t *testing.T) {
		_, err := pg.Open(ctx, u, pg.Options{MaxConns: 1, OpsMaxConns: 1, DirectURL: pgtest.New(t)})
		if err == nil || !strings.Contains(err.Error(), "RELAYROOM_DIRECT_DATABASE_URL") {
			t.Fatalf("opened with a direct URL of another database: %v", err)
		}
	})
	t.Run("a mode the URL chooses is kept", func(t *testing.T) {
		d2, err := pg.Open(ctx, u+"&default_query_exec_mode=cache_statement", pg.Options{MaxConns: 1, OpsMaxConns: 1, DirectURL: u})
		if err != nil {
			t.Fatal(err)
		}
		defer d2.Close()
		if m := d2.App.Config().ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeCacheStatement {
			t.Fatalf("mode %v, want the URL's cache_statement", m)
		}
	})
}

// TestAStatementAfterAFirstBatchThatNeverRanFails: a first batch the server refuses to
// prepare (a table a rolling deploy has not created yet) is never sent, its BEGIN and
// settings with it. A caller that went on after that error sent its next statement
// outside any transaction, as the session's role: with the role set per transaction
// only, that was the owner, and it read every tenant's rows. Every later statement of
// such a transaction now fails, and it does not commit.
func TestAStatementAfterAFirstBatchThatNeverRanFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, pooled := range map[string]bool{"connected directly": false, "behind a pooler": true} {
		t.Run(name, func(t *testing.T) {
			u, direct := pgtest.New(t), ""
			if pooled {
				direct = u
			}
			d, fx := openSeeded(t, u, pg.Options{DirectURL: direct})
			var who string
			var seen int
			var later error
			err := d.InTenant(ctx, pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}, func(tx *pg.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, "SELECT count(*) FROM no_such_table_yet").Scan(&n); err == nil {
					t.Fatal("a missing table was read")
				}
				later = tx.QueryRow(ctx, "SELECT current_user::text, (SELECT count(*) FROM membership WHERE project_id IN ($1, $2))",
					fx.projectA, fx.projectB).Scan(&who, &seen)
				return nil // the first error swallowed, as a careless caller would
			})
			if later == nil {
				t.Fatalf("the next statement ran as %q and saw %d memberships", who, seen)
			}
			if err == nil {
				t.Fatal("the transaction that never began reported success")
			}
		})
	}
}
