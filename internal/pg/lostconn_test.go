package pg_test

import (
	"context"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestATerminatedPooledConnectionIsNotAFailedRequest: a backend terminated while its
// connection sat idle in the pool (a failover, PgBouncer restarting, an administrator,
// idle_session_timeout) failed the next transaction on it, though the database was up.
// The pool pings only connections idle for more than a second, so a busy server meets
// such a connection; the transaction now runs again on another one.
func TestATerminatedPooledConnectionIsNotAFailedRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.New(t)
	d, fx := openSeeded(t, u, pg.Options{})
	killer, err := pg.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = killer.Close(ctx) }()
	tenant := pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}
	// terminate ends every pooled backend of d, as the killer sees them: the one
	// connection of each pool, just used, so not pinged on its next use.
	terminate := func(t *testing.T) {
		t.Helper()
		var n int
		if err := killer.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'relayroom-%'`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("terminated %d: %v", n, err)
		}
	}
	read := func() error {
		return d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
			var one int
			return tx.QueryRow(ctx, "SELECT 1").Scan(&one)
		})
	}
	t.Run("a read", func(t *testing.T) {
		if err := read(); err != nil {
			t.Fatal(err)
		}
		terminate(t)
		if err := read(); err != nil {
			t.Fatalf("the read after the termination failed: %v", err)
		}
	})
	t.Run("a write runs once", func(t *testing.T) {
		if err := read(); err != nil {
			t.Fatal(err)
		}
		terminate(t)
		err := d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE membership SET nickname = coalesce(nickname, '') || 'x' WHERE project_id = $1", fx.projectA)
			return err
		})
		if err != nil {
			t.Fatalf("the write after the termination failed: %v", err)
		}
		if got := fx.nicknameA(t, d); got != "x" {
			t.Fatalf("nickname %q, want the write applied once", got)
		}
	})
	t.Run("the operator's pool too", func(t *testing.T) {
		if _, err := d.Status(ctx); err != nil {
			t.Fatal(err)
		}
		terminate(t)
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			var one int
			return tx.QueryRow(ctx, "SELECT 1").Scan(&one)
		}); err != nil {
			t.Fatalf("after the termination: %v", err)
		}
	})
}
