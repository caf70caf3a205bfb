package pg_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

type twoTenants struct {
	orgA, orgB, agentA, agentB, projectA, projectB uuid.UUID
}

// seedTwoTenants writes, as the operator, two organisations each with an agent, a key, a
// project, a connect code and a membership.
func seedTwoTenants(t *testing.T, d *pg.DB) twoTenants {
	t.Helper()
	ctx := context.Background()
	fx := twoTenants{uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		for _, s := range []struct {
			org, agent, project uuid.UUID
			x                   string
		}{{fx.orgA, fx.agentA, fx.projectA, "a"}, {fx.orgB, fx.agentB, fx.projectB, "b"}} {
			stmts := []struct {
				sql  string
				args []any
			}{
				{"INSERT INTO organisation (id, slug, name) VALUES ($1, $2, $2)", []any{s.org, "o" + s.x}},
				{"INSERT INTO app_user (id, email) VALUES ($1, $2)", []any{uuid.New(), s.x + "@x.test"}},
				{"INSERT INTO agent (id, org_id, slug, name) VALUES ($1, $2, $3, $3)", []any{s.agent, s.org, s.x + "1"}},
				{"INSERT INTO agent_key (org_id, id, agent_id, key_id, secret_hash) VALUES ($1, $2, $3, $4, '\\x00')", []any{s.org, uuid.New(), s.agent, "key" + upper(s.x) + "0001"}},
				{"INSERT INTO project (id, host_org_id, slug, name) VALUES ($1, $2, $3, $3)", []any{s.project, s.org, "p" + s.x}},
				{"INSERT INTO connect_code (project_id, id, code_id, secret_hash) VALUES ($1, $2, $3, '\\x00')", []any{s.project, uuid.New(), "code" + s.x}},
				{"INSERT INTO membership (project_id, id, agent_id, org_id, part) VALUES ($1, $2, $3, $4, $5)", []any{s.project, uuid.New(), s.agent, s.org, s.x + "1"}},
			}
			for _, st := range stmts {
				if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
					return err
				}
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO org_member (org_id, user_id, role) SELECT $1, id, 'owner' FROM app_user WHERE email = 'a@x.test'", fx.orgA)
		return err
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	return fx
}

// openSeeded opens a fresh migrated database at u (one connection a pool unless opt says
// otherwise), closed with the test, and seeds it with two tenants.
func openSeeded(t *testing.T, u string, opt pg.Options) (*pg.DB, twoTenants) {
	t.Helper()
	if opt.MaxConns == 0 {
		opt.MaxConns, opt.OpsMaxConns = 1, 1
	}
	d, err := pg.Open(context.Background(), u, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, seedTwoTenants(t, d)
}

// nicknameA reads the nickname of project A's member as tenant A ("<nil>" when unset):
// what the transaction tests write and check.
func (fx twoTenants) nicknameA(t *testing.T, d *pg.DB) string {
	t.Helper()
	ctx := context.Background()
	var n *string
	if err := d.InTenant(ctx, pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, "SELECT nickname FROM membership WHERE project_id = $1", fx.projectA).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	return deref(n)
}

func upper(s string) string {
	if s == "a" {
		return "A"
	}
	return "B"
}

// freshConn connects, as the owner, to a fresh migrated database (its URL returned too)
// for reading the catalog; the connection closes with the test.
func freshConn(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	ctx := context.Background()
	u := pgtest.New(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn, u
}

// citusConn is freshConn on a Citus coordinator; the test is skipped on plain PostgreSQL.
func citusConn(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	conn, u := freshConn(t)
	citus, err := pg.HasCitus(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if !citus {
		t.Skip("not a Citus coordinator: make test-citus runs this")
	}
	return conn, u
}

// oneConnTwoTenants seeds two tenants and returns them with pools of one connection each,
// so that every transaction reuses the connection of the one before it: what one leaves
// behind (settings, an open transaction) the next one meets.
func oneConnTwoTenants(t *testing.T) (*pg.DB, twoTenants) {
	t.Helper()
	seedDB, u := pgtest.Open(t)
	fx := seedTwoTenants(t, seedDB)
	d, err := pg.Open(context.Background(), u, pg.Options{MaxConns: 1, OpsMaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, fx
}
