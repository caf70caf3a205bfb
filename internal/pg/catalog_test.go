package pg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// referenceTables are small directories keyed by id (Citus reference tables). Every other
// table in public must be tenant-scoped. Adding a table here needs a reason in the schema.
var referenceTables = []string{"organisation", "app_user", "project", "agent"}

// globalTables hold no tenant data at all.
var globalTables = []string{"schema_migrations"}

// serviceTables belong to no tenant but to the service's own defences, and are held to
// every RLS rule (enabled, forced, a policy for the request role) without a tenant column.
// auth_throttle counts refused credentials, which by definition name no tenant; its
// policy shows the request role only the subjects it names (docs/auth-limits.md);
// auth_verified, the agent keys a replica accepted, shared with the others so that a
// key's holder passes its key id's block everywhere, is keyed and shown the same way.
// web_session, oauth_client and oauth_auth_request exist before any tenant is known (a
// person spans organisations; a client registers and asks for authorization before anyone
// signs in); their policies show the request role only the rows whose public id it names
// (docs/auth.md). TestSignInTablesShowOnlyNamedRows checks that.
var serviceTables = []string{"auth_throttle", "auth_verified", "web_session", "oauth_client", "oauth_auth_request"}

// TestCatalogTenancyRules reads the catalog and fails on a table that breaks the rules of
// docs/architecture.md (Database work): tenant column first in the primary key and in every unique index,
// foreign keys between scoped tables including the tenant column, RLS enabled and forced,
// and nothing visible to the request role without a tenant.
func TestCatalogTenancyRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, _ := freshConn(t)

	tables := queryStrings(t, conn, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if len(tables) < 9 {
		t.Fatalf("expected the foundation tables, found %v", tables)
	}
	tenantOf := map[string]string{}
	for _, tbl := range tables {
		if slices.Contains(globalTables, tbl) || slices.Contains(referenceTables, tbl) || slices.Contains(serviceTables, tbl) {
			continue
		}
		cols := queryStrings(t, conn, `SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND i.indisprimary`, tbl)
		if len(cols) != 1 || (cols[0] != "org_id" && cols[0] != "project_id") {
			t.Errorf("%s: the primary key must lead with org_id or project_id, got %v", tbl, cols)
			continue
		}
		tenantOf[tbl] = cols[0]
	}
	for tbl, tenant := range tenantOf {
		// Every unique index leads with the tenant column.
		rows := queryStrings(t, conn, `SELECT ci.relname || ':' || a.attname FROM pg_index i
			JOIN pg_class ci ON ci.oid = i.indexrelid
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND i.indisunique`, tbl)
		for _, r := range rows {
			idx, first, _ := strings.Cut(r, ":")
			if first != tenant {
				t.Errorf("%s: unique index %s must lead with %s, leads with %s", tbl, idx, tenant, first)
			}
		}
		// Foreign keys to other scoped tables include the tenant column; a project-scoped
		// table never references an org-scoped one (they are distributed differently).
		fks := queryStrings(t, conn, `SELECT conname || ':' || confrelid::regclass::text || ':' ||
			(SELECT string_agg(a.attname, ',') FROM unnest(conkey) k JOIN pg_attribute a ON a.attrelid = conrelid AND a.attnum = k)
			FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f'`, tbl)
		for _, fk := range fks {
			parts := strings.SplitN(fk, ":", 3)
			target, cols := parts[1], strings.Split(parts[2], ",")
			targetTenant, scoped := tenantOf[target]
			if !scoped {
				continue // references a reference table
			}
			if targetTenant != tenant {
				t.Errorf("%s: foreign key %s references %s, scoped by %s, not %s", tbl, parts[0], target, targetTenant, tenant)
			} else if !slices.Contains(cols, tenant) {
				t.Errorf("%s: foreign key %s must include %s, has %v", tbl, parts[0], tenant, cols)
			}
		}
	}
	// RLS enabled and forced on every table but the global ones.
	for _, tbl := range tables {
		if slices.Contains(globalTables, tbl) {
			continue
		}
		var enabled, forced bool
		if err := conn.QueryRow(ctx, `SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1::regclass`, tbl).Scan(&enabled, &forced); err != nil {
			t.Fatal(err)
		}
		if !enabled || !forced {
			t.Errorf("%s: row-level security must be enabled and forced (enabled=%v forced=%v)", tbl, enabled, forced)
		}
	}
	// Every RLS table has a policy for the request role (without one it would see nothing
	// at all, which hides a forgotten policy until a user trips over it).
	for _, tbl := range tables {
		if slices.Contains(globalTables, tbl) {
			continue
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_policies WHERE schemaname = 'public' AND tablename = $1 AND $2 = ANY (roles)`, tbl, pg.AppRole).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("%s: no policy for %s", tbl, pg.AppRole)
		}
	}
	// The request role owns nothing and cannot bypass RLS.
	var super, bypass bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1`, pg.AppRole).Scan(&super, &bypass); err != nil {
		t.Fatal(err)
	}
	if super || bypass {
		t.Errorf("%s must be neither superuser nor BYPASSRLS", pg.AppRole)
	}
	owned := queryStrings(t, conn, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND pg_get_userbyid(c.relowner) = $1`, pg.AppRole)
	if len(owned) > 0 {
		t.Errorf("%s must own no table, owns %v", pg.AppRole, owned)
	}
}

// TestRLSFailsClosed seeds rows in two tenants and checks, as the request role, that no
// table shows anything without a tenant, and that one tenant never sees the other's rows.
func TestRLSFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	fx := seedTwoTenants(t, d)

	// Every table in public, whoever added it: a missing GRANT fails here too.
	tables := testfix.Column[string](t, d, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_migrations' ORDER BY 1`)
	err := d.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		for _, tbl := range tables {
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&n); err != nil {
				return fmt.Errorf("%s: %w", tbl, err)
			}
			if n != 0 {
				t.Errorf("%s: %d rows visible without a tenant", tbl, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Tenant A sees its project and membership, never B's.
	err = d.InTenant(ctx, pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}, func(tx *pg.Tx) error {
		for _, q := range []struct{ sql, want string }{
			{"SELECT string_agg(slug, ',' ORDER BY slug) FROM project", "pa"},
			{"SELECT string_agg(part, ',' ORDER BY part) FROM membership", "a1"},
			{"SELECT string_agg(slug, ',' ORDER BY slug) FROM agent", "a1"},
			{"SELECT string_agg(slug, ',' ORDER BY slug) FROM organisation", "oa"},
			{"SELECT coalesce(string_agg(key_id, ','), '') FROM agent_key", "keyA0001"},
		} {
			var got *string
			if err := tx.QueryRow(ctx, q.sql).Scan(&got); err != nil {
				return fmt.Errorf("%s: %w", q.sql, err)
			}
			if got == nil || *got != q.want {
				t.Errorf("%s: got %v, want %q", q.sql, deref(got), q.want)
			}
		}
		// Writes into another tenant are refused by the policy's check.
		_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'x' WHERE project_id = $1", fx.projectB)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = d.InTenant(ctx, pg.Tenant{OrgID: fx.orgB, ProjectID: fx.projectB}, func(tx *pg.Tx) error {
		var nick *string
		if err := tx.QueryRow(ctx, "SELECT nickname FROM membership").Scan(&nick); err != nil {
			return err
		}
		if nick != nil {
			t.Errorf("tenant A changed tenant B's membership")
		}
		_, err := tx.Exec(ctx, "INSERT INTO membership (project_id, id, agent_id, org_id, part) VALUES ($1, gen_random_uuid(), $2, $3, 'intruder')", fx.projectA, fx.agentB, fx.orgB)
		if err == nil {
			t.Errorf("tenant B inserted a row into tenant A's project")
		}
		return nil // the refusal is expected: the transaction is rolled back, and says so
	})
	if !errors.Is(err, pg.ErrRolledBack) {
		t.Fatalf("a transaction whose insert was refused: %v, want ErrRolledBack", err)
	}
	// The lookup setting reveals exactly the named key, nothing else.
	err = d.InTenant(ctx, pg.Tenant{Lookup: "keyB0001"}, func(tx *pg.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM agent_key").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("lookup showed %d keys, want exactly 1", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTenantSettingsDoNotLeak checks that a transaction's tenant never survives into the
// next transaction on the same pooled connection.
func TestTenantSettingsDoNotLeak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, fx := oneConnTwoTenants(t)
	for i := 0; i < 3; i++ {
		if err := d.InTenant(ctx, pg.Tenant{ProjectID: fx.projectA}, func(tx *pg.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		err := d.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
			var setting string
			if err := tx.QueryRow(ctx, "SELECT coalesce(current_setting('app.project_id', true), '')").Scan(&setting); err != nil {
				return err
			}
			if setting != "" {
				t.Errorf("tenant setting leaked into the next transaction: %q", setting)
			}
			var role string
			if err := tx.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
				return err
			}
			if role != pg.AppRole {
				t.Errorf("request ran as %q, want %q", role, pg.AppRole)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func queryStrings(t *testing.T, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// TestPipelineSendsQueuedWritesAndTheirErrors checks the pipelined region: writes queued
// with nothing after them still commit, and a failing queued write fails the transaction
// (nothing of it commits) with its own error.
func TestPipelineSendsQueuedWritesAndTheirErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	fx := seedTwoTenants(t, d)
	tenant := pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}
	nick := func() string { return fx.nicknameA(t, d) }
	// Only queued writes: they must reach the server with the COMMIT.
	err := d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		return tx.Pipeline(func() error {
			_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'one' WHERE project_id = $1", fx.projectA)
			return err
		})
	})
	if err != nil || nick() != "one" {
		t.Fatalf("queued write not committed: %v, nickname %q", err, nick())
	}
	// A queued write that fails takes the transaction down, earlier writes included.
	err = d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		return tx.Pipeline(func() error {
			if _, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'two' WHERE project_id = $1", fx.projectA); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE membership SET access = 'owner' WHERE project_id = $1", fx.projectA); err != nil {
				return err
			}
			var n int
			return tx.QueryRow(ctx, "SELECT count(*) FROM membership").Scan(&n)
		})
	})
	if !pg.IsCheckViolation(err) {
		t.Fatalf("want the queued write's check violation, got %v", err)
	}
	if nick() != "one" {
		t.Fatalf("a failed pipelined transaction committed part of its writes: nickname %q", nick())
	}
}
