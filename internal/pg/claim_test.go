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
	// pg.Tx sends a claim only with the COMMIT of a transaction that wrote.
	claim := func(key string) *pg.Claim {
		return &pg.Claim{Statements: []pg.ClaimStatement{{SQL: `INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool)
			VALUES ($1, $2, 'test', $3, sha256(''::bytea), 'test')`, Args: []any{fx.orgA, fx.agentA, key}}}}
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

	// The transaction tells a write from its statements' command tags (on Citus the
	// coordinator's transaction has no id when the writes ran on the workers).
	t.Run("a write is told by its command tag, whichever way it was sent", func(t *testing.T) {
		ways := []struct {
			name  string
			write bool
			run   func(ctx context.Context, tx *pg.Tx) error
		}{
			{"an UPDATE of no row is not a write", false, func(ctx context.Context, tx *pg.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'none' WHERE project_id = $1 AND false", fx.projectA)
				return err
			}},
			{"a locking read is not a write", false, func(ctx context.Context, tx *pg.Tx) error {
				var n int
				return tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM membership WHERE project_id = $1 FOR UPDATE) s", fx.projectA).Scan(&n)
			}},
			{"an UPDATE sent by Exec", true, func(ctx context.Context, tx *pg.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'exec' WHERE project_id = $1", fx.projectA)
				return err
			}},
			{"an UPDATE … RETURNING read by QueryRow", true, func(ctx context.Context, tx *pg.Tx) error {
				var nick *string
				return tx.QueryRow(ctx, "UPDATE membership SET nickname = 'row' WHERE project_id = $1 RETURNING nickname", fx.projectA).Scan(&nick)
			}},
			{"an UPDATE … RETURNING read by Query", true, func(ctx context.Context, tx *pg.Tx) error {
				rows, err := tx.Query(ctx, "UPDATE membership SET nickname = 'rows' WHERE project_id = $1 RETURNING nickname", fx.projectA)
				if err != nil {
					return err
				}
				rows.Close()
				return rows.Err()
			}},
			{"a data-modifying CTE under a SELECT", true, func(ctx context.Context, tx *pg.Tx) error {
				var n int
				return tx.QueryRow(ctx, `WITH u AS (UPDATE membership SET nickname = 'cte' WHERE project_id = $1 RETURNING 1)
					SELECT count(*) FROM u`, fx.projectA).Scan(&n)
			}},
			{"a write pipelined before a read", true, func(ctx context.Context, tx *pg.Tx) error {
				return tx.Pipeline(func() error {
					if _, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'pipelined' WHERE project_id = $1", fx.projectA); err != nil {
						return err
					}
					var n int
					return tx.QueryRow(ctx, "SELECT count(*) FROM membership").Scan(&n)
				})
			}},
		}
		for _, w := range ways {
			t.Run(w.name, func(t *testing.T) {
				key := uuid.NewString()
				c := claim(key)
				cctx := pg.WithClaim(ctx, c)
				if err := d.InTenant(cctx, tenant, func(tx *pg.Tx) error { return w.run(cctx, tx) }); err != nil {
					t.Fatal(err)
				}
				if got := c.Committed() && claimed(key) == 1; got != w.write {
					t.Fatalf("claim committed: %v, want %v", got, w.write)
				}
			})
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
