package pg_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestClaimCommitsWithTheFirstWrite checks pg.Claim: the statement a request carries is
// committed by its first tenant transaction that wrote, atomically with that write.
func TestClaimCommitsWithTheFirstWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	fx := seedTwoTenants(t, d)
	tenant := pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA, AgentID: fx.agentA}
	// A claim applies only in a transaction that has a transaction id (one that wrote).
	claim := func(key string) *pg.Claim {
		return &pg.Claim{SQL: `INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool)
			SELECT $1, $2, 'test', $3, sha256(''::bytea), 'test' WHERE pg_current_xact_id_if_assigned() IS NOT NULL`,
			Args: []any{fx.orgA, fx.agentA, key}}
	}
	claimed := func(key string) int {
		var n int
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM idempotency_key WHERE key = $1", key).Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	nickname := func() string {
		var n *string
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT nickname FROM membership WHERE project_id = $1", fx.projectA).Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return deref(n)
	}
	read := func(ctx context.Context) error {
		return d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
			var n int
			return tx.QueryRow(ctx, "SELECT count(*) FROM membership").Scan(&n)
		})
	}
	write := func(ctx context.Context, nick string) error {
		return d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
			return tx.Pipeline(func() error {
				_, err := tx.Exec(ctx, "UPDATE membership SET nickname = $2 WHERE project_id = $1", fx.projectA, nick)
				return err
			})
		})
	}

	t.Run("a transaction that only reads leaves it to the next; the first write commits it", func(t *testing.T) {
		key := uuid.NewString()
		c := claim(key)
		cctx := pg.WithClaim(ctx, c)
		if err := read(cctx); err != nil {
			t.Fatal(err)
		}
		if c.Committed() || claimed(key) != 0 {
			t.Fatal("a read-only transaction committed the claim")
		}
		if err := write(cctx, "first"); err != nil {
			t.Fatal(err)
		}
		if !c.Committed() || claimed(key) != 1 {
			t.Fatal("the writing transaction did not commit the claim")
		}
		// Committed once: a later transaction of the request does not send it again
		// (it would fail on the row it inserted).
		if err := write(cctx, "second"); err != nil {
			t.Fatalf("a committed claim was sent again: %v", err)
		}
	})

	t.Run("a claim another request holds rolls the write back", func(t *testing.T) {
		key := uuid.NewString()
		if err := write(pg.WithClaim(ctx, claim(key)), "winner"); err != nil {
			t.Fatal(err)
		}
		loser := claim(key)
		err := write(pg.WithClaim(ctx, loser), "loser")
		if !pg.IsUniqueViolation(err) {
			t.Fatalf("want the claim's unique violation, got %v", err)
		}
		if loser.Committed() || nickname() != "winner" {
			t.Fatalf("the losing request's write committed: nickname %q", nickname())
		}
	})

	t.Run("work marked WithoutClaim and operator transactions never take it", func(t *testing.T) {
		key := uuid.NewString()
		c := claim(key)
		cctx := pg.WithClaim(ctx, c)
		if err := write(pg.WithoutClaim(cctx), "presence"); err != nil {
			t.Fatal(err)
		}
		if err := d.Operator(cctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'operator' WHERE project_id = $1", fx.projectA)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if c.Committed() || claimed(key) != 0 {
			t.Fatal("the claim was committed outside the request's own write")
		}
	})
}
