package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestLockTimeoutEndsAWaitBeforeTheBudget: a request's statement waiting on a lock gives
// up after the lock timeout, well inside the statement timeout, with an error classified
// as retryable infrastructure trouble. A pile-up behind one lock then frees its pooled
// connections quickly instead of holding every one of them for the whole budget.
func TestLockTimeoutEndsAWaitBeforeTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, u := pgtest.Open(t)
	fx := seedTwoTenants(t, base)
	d, err := pg.Open(ctx, u, pg.Options{MaxConns: 2, OpsMaxConns: 1, StatementTimeout: time.Minute, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(ctx) })
	lock, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "LOCK TABLE membership IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(ctx) })

	tenant := pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA, AgentID: fx.agentA}
	err = d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'x' WHERE project_id = $1", fx.projectA)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("want lock_not_available (55P03) from the lock timeout, got %v", err)
	}
	if !pg.IsInfrastructure(err) || apperr.CodeOf(pg.Classify("test", err)) != apperr.Unavailable {
		t.Fatalf("a lock timeout must read as retryable unavailability: %v", pg.Classify("test", err))
	}
}
