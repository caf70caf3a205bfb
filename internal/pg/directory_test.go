package pg_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	sqlfiles "github.com/relayroom/relayroom/sql"
)

// TestPoliciesHoldNoSubquery reads every row-level security policy and fails on one that
// holds a subquery, or calls a function that reads a table (a SQL or PL/pgSQL function
// whose body has a FROM) or runs with its owner's rights: Citus refuses subqueries in
// policies on distributed and reference tables, and a policy's subquery runs for every
// row a query touches. Policies compare columns with the transaction's settings only.
func TestPoliciesHoldNoSubquery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, _ := freshConn(t)
	rows, err := conn.Query(ctx, `SELECT tablename || '.' || policyname, coalesce(qual, ''), coalesce(with_check, '')
		FROM pg_policies WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type policy struct{ name, qual, check string }
	policies, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (policy, error) {
		var p policy
		err := r.Scan(&p.name, &p.qual, &p.check)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) < 20 {
		t.Fatalf("expected every table's policies, found %d", len(policies))
	}
	select_ := regexp.MustCompile(`(?i)\b(select|exists)\b`)
	call := regexp.MustCompile(`\b([a-z_][a-z0-9_]*)\(`)
	from := regexp.MustCompile(`(?i)\bfrom\b`)
	checked := map[string]bool{}
	for _, p := range policies {
		for _, expr := range []string{p.qual, p.check} {
			if select_.MatchString(expr) {
				t.Errorf("policy %s holds a subquery: %s", p.name, expr)
			}
			for _, m := range call.FindAllStringSubmatch(expr, -1) {
				fn := m[1]
				if checked[fn] {
					continue
				}
				checked[fn] = true
				var body, lang string
				var definer bool
				err := conn.QueryRow(ctx, `SELECT p.prosrc, l.lanname, p.prosecdef FROM pg_proc p
					JOIN pg_language l ON l.oid = p.prolang JOIN pg_namespace n ON n.oid = p.pronamespace
					WHERE n.nspname IN ('public', 'pg_catalog') AND p.proname = $1 LIMIT 1`, fn).Scan(&body, &lang, &definer)
				if err != nil {
					t.Errorf("policy %s calls %s: %v", p.name, fn, err)
					continue
				}
				if definer {
					t.Errorf("policy %s calls %s, which runs with its owner's rights", p.name, fn)
				}
				if (lang == "sql" || lang == "plpgsql") && from.MatchString(body) {
					t.Errorf("policy %s calls %s, which reads a table: %s", p.name, fn, body)
				}
			}
		}
	}
	if !checked["rr_orgs"] || !checked["rr_org"] || !checked["rr_signin_users"] || !checked["rr_signin_clients"] {
		t.Errorf("the directory policies' functions were not found: %v", checked)
	}
}

// TestDirectoryVisibilityMatchesTheSubqueryPolicies seeds a host, an admitted guest, a
// refused guest and an unrelated company sharing rooms, and reads the directory tables
// (organisation, project, agent, app_user) as the request role under each tenant the
// service builds, with the policies of migration 000013 (settings computed by
// rr_set_directory) and again after migrating down to the subquery policies of 000001:
// every tenant must see exactly the same rows. The one tenant the service never uses (a
// refused guest's agent still holding the project, which Scope.Tenant drops) may only see
// less.
func TestDirectoryVisibilityMatchesTheSubqueryPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, u := pgtest.Open(t)
	ids := map[string]uuid.UUID{}
	id := func(name string) uuid.UUID {
		if _, ok := ids[name]; !ok {
			ids[name] = uuid.New()
		}
		return ids[name]
	}
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		var stmts []string
		var args [][]any
		add := func(sql string, a ...any) { stmts, args = append(stmts, sql), append(args, a) }
		for _, o := range []string{"host", "guest", "refused", "other", "loner"} {
			add("INSERT INTO organisation (id, slug, name) VALUES ($1, $2, $2)", id(o), o)
			add("INSERT INTO app_user (id, email, name) VALUES ($1, $2, $2)", id("u-"+o), o+"@x.test")
			add("INSERT INTO org_member (org_id, user_id, role) VALUES ($1, $2, 'member')", id(o), id("u-"+o))
		}
		for _, a := range [][2]string{{"h1", "host"}, {"h2", "host"}, {"g1", "guest"}, {"g2", "guest"}, {"r1", "refused"}, {"x1", "other"}, {"l1", "loner"}} {
			add("INSERT INTO agent (id, org_id, slug, name) VALUES ($1, $2, $3, $3)", id(a[0]), id(a[1]), a[0])
		}
		for _, p := range [][2]string{{"room", "host"}, {"guestroom", "guest"}, {"otherroom", "other"}, {"hostonly", "host"}} {
			add("INSERT INTO project (id, host_org_id, slug, name) VALUES ($1, $2, $3, $3)", id(p[0]), id(p[1]), p[0])
		}
		for _, m := range [][3]string{{"room", "h1", "host"}, {"room", "g1", "guest"}, {"room", "r1", "refused"},
			{"guestroom", "g1", "guest"}, {"guestroom", "x1", "other"}, {"otherroom", "x1", "other"}, {"otherroom", "g2", "guest"},
			{"hostonly", "h2", "host"}} {
			add("INSERT INTO membership (project_id, id, agent_id, org_id, part) VALUES ($1, $2, $3, $4, $5)", id(m[0]), uuid.New(), id(m[1]), id(m[2]), m[1])
		}
		add("INSERT INTO agreement (project_id, guest_org_id, status) VALUES ($1, $2, 'active')", id("room"), id("guest"))
		add("INSERT INTO agreement (project_id, guest_org_id, status) VALUES ($1, $2, 'revoked')", id("room"), id("refused"))
		add("INSERT INTO agreement (project_id, guest_org_id, status) VALUES ($1, $2, 'active')", id("guestroom"), id("other"))
		add("INSERT INTO agreement (project_id, guest_org_id, status) VALUES ($1, $2, 'active')", id("otherroom"), id("guest"))
		for i, s := range stmts {
			if _, err := tx.Exec(ctx, s, args[i]...); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []struct {
		name      string
		tenant    pg.Tenant
		narrower  bool // may see less than before, never more
		wantOrgs  string
		wantAgent string
	}{
		{name: "host part", tenant: pg.Tenant{OrgID: id("host"), ProjectID: id("room"), AgentID: id("h1")},
			wantOrgs: "guest,host,refused", wantAgent: "g1,h1,h2,r1"},
		{name: "admitted guest part", tenant: pg.Tenant{OrgID: id("guest"), ProjectID: id("room"), AgentID: id("g1")},
			wantOrgs: "guest,host,refused", wantAgent: "g1,g2,h1,r1"},
		{name: "guest in its own room", tenant: pg.Tenant{OrgID: id("guest"), ProjectID: id("guestroom"), AgentID: id("g1")}},
		{name: "refused guest (Scope.Tenant drops the project)", tenant: pg.Tenant{OrgID: id("refused"), AgentID: id("r1")},
			wantOrgs: "host,refused", wantAgent: "r1"},
		{name: "refused guest still naming the project", tenant: pg.Tenant{OrgID: id("refused"), ProjectID: id("room"), AgentID: id("r1")}, narrower: true},
		{name: "all-rooms agent", tenant: pg.Tenant{OrgID: id("guest"), AgentID: id("g1")}},
		{name: "pager of another company", tenant: pg.Tenant{OrgID: id("other"), AgentID: id("x1")}},
		{name: "agent in no room", tenant: pg.Tenant{OrgID: id("loner"), AgentID: id("l1")}},
		{name: "project alone (CI token, download link)", tenant: pg.Tenant{ProjectID: id("room")}},
		{name: "organisation alone", tenant: pg.Tenant{OrgID: id("host")}},
		{name: "nobody", tenant: pg.Tenant{}},
	}
	queries := map[string]string{
		"organisation": "SELECT coalesce(string_agg(slug, ',' ORDER BY slug), '') FROM organisation",
		"project":      "SELECT coalesce(string_agg(slug, ',' ORDER BY slug), '') FROM project",
		"agent":        "SELECT coalesce(string_agg(slug, ',' ORDER BY slug), '') FROM agent",
		"app_user":     "SELECT coalesce(string_agg(email, ',' ORDER BY email), '') FROM app_user",
	}
	see := func(tn pg.Tenant) map[string]string {
		t.Helper()
		out := map[string]string{}
		err := d.InTenant(ctx, tn, func(tx *pg.Tx) error {
			for table, q := range queries {
				var s string
				if err := tx.QueryRow(ctx, q).Scan(&s); err != nil {
					return fmt.Errorf("%s: %w", table, err)
				}
				out[table] = s
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	now := make([]map[string]string, len(tenants))
	for i, c := range tenants {
		now[i] = see(c.tenant)
		if c.wantOrgs != "" && (now[i]["organisation"] != c.wantOrgs || now[i]["agent"] != c.wantAgent) {
			t.Errorf("%s sees organisations %q and agents %q, want %q and %q", c.name, now[i]["organisation"], now[i]["agent"], c.wantOrgs, c.wantAgent)
		}
	}
	// The same tenants with the lists the service carries (read back from the settings,
	// as the bind statement does) see the same rows.
	for i, c := range tenants {
		var v pg.Visible
		err := d.InTenant(ctx, c.tenant, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT rr_orgs(), rr_projects(), rr_agents(), rr_users()").Scan(&v.Orgs, &v.Projects, &v.Agents, &v.Users)
		})
		if err != nil {
			t.Fatal(err)
		}
		tn := c.tenant
		tn.Visible = &v
		if got := see(tn); !mapsEqual(got, now[i]) {
			t.Errorf("%s with the carried lists sees %v, computed %v", c.name, got, now[i])
		}
	}

	if d.Citus() {
		// The policies before 000013 held subqueries, which Citus refuses: the comparison
		// with them runs on plain PostgreSQL (make test).
		return
	}
	// Down to 000012: as many steps as there are migrations after it (the numbers have
	// gaps, so the latest number minus 12 can be more steps than there are migrations).
	after, err := fs.Glob(sqlfiles.Migrations(), "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	after = slices.DeleteFunc(after, func(name string) bool { return name < "000013" })
	if _, err := pg.MigrateDown(context.Background(), u, len(after)); err != nil {
		t.Fatal(err)
	}
	for i, c := range tenants {
		// The old policies read no lists (and rr_set_directory no longer exists).
		before := see(pg.Tenant{OrgID: c.tenant.OrgID, ProjectID: c.tenant.ProjectID, AgentID: c.tenant.AgentID, Visible: &pg.Visible{}})
		for table := range queries {
			got, was := now[i][table], before[table]
			if c.narrower {
				if extra := missingFrom(got, was); len(extra) > 0 {
					t.Errorf("%s: %s shows %v it did not show before", c.name, table, extra)
				}
				continue
			}
			if got != was {
				t.Errorf("%s: %s shows %q, the subquery policies showed %q", c.name, table, got, was)
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// missingFrom lists the comma-separated items of got that are not in was.
func missingFrom(got, was string) []string {
	var out []string
	prev := strings.Split(was, ",")
	for _, s := range strings.Split(got, ",") {
		if s != "" && !slices.Contains(prev, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestCommitWithNext: the COMMIT travels with the next statement, so what it wrote stays
// whatever fn returns afterwards; a statement that fails takes the COMMIT down with it and
// leaves the pooled connection usable.
func TestCommitWithNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, fx := oneConnTwoTenants(t) // a transaction left open would block or poison the next
	tenant := pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}
	nick := func() string { return fx.nicknameA(t, d) }
	refused := fmt.Errorf("refused after reading")
	err := d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		tx.CommitWithNext(ctx)
		var n string
		if err := tx.QueryRow(ctx, "UPDATE membership SET nickname = 'kept' WHERE project_id = $1 RETURNING nickname", fx.projectA).Scan(&n); err != nil {
			return err
		}
		return refused
	})
	if err != refused || nick() != "kept" {
		t.Fatalf("got %v, nickname %q: the write must be committed with its statement", err, nick())
	}
	err = d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		tx.CommitWithNext(ctx)
		var n string
		return tx.QueryRow(ctx, "UPDATE membership SET access = 'owner' WHERE project_id = $1 RETURNING nickname", fx.projectA).Scan(&n)
	})
	if !pg.IsCheckViolation(err) {
		t.Fatalf("want the statement's check violation, got %v", err)
	}
	if got := nick(); got != "kept" {
		t.Fatalf("after a failed commit-with-next transaction: nickname %q", got)
	}
	// A request's idempotency claim travels with a COMMIT of its own: no early commit.
	claimed := pg.WithClaim(ctx, &pg.Claim{Statements: []pg.ClaimStatement{{SQL: "SELECT 1 WHERE false"}}})
	err = d.InTenant(claimed, tenant, func(tx *pg.Tx) error {
		tx.CommitWithNext(claimed)
		if _, err := tx.Exec(claimed, "UPDATE membership SET nickname = 'undone' WHERE project_id = $1", fx.projectA); err != nil {
			return err
		}
		return refused
	})
	if err != refused || nick() != "kept" {
		t.Fatalf("with a claim the transaction must roll back on error: %v, nickname %q", err, nick())
	}
	// A read committed with its one statement is one round trip (BEGIN, settings, the
	// query, COMMIT), and a statement after it is refused instead of running outside the
	// transaction, without its tenant.
	before := d.RoundTrips()
	var second error
	err = d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
		tx.CommitWithNext(ctx)
		var n *string
		if err := tx.QueryRow(ctx, "SELECT nickname FROM membership WHERE project_id = $1", fx.projectA).Scan(&n); err != nil {
			return err
		}
		_, second = tx.Exec(ctx, "SELECT 1")
		return nil
	})
	if err != nil || !errors.Is(second, pg.ErrCommitted) {
		t.Fatalf("read committed with its statement: %v; a statement after it: %v, want ErrCommitted", err, second)
	}
	// On Citus the BEGIN with its timeout and the tenant's SET LOCAL settings are
	// simple-protocol statements, sent ahead of the pipeline, one round trip each.
	want := int64(1)
	if d.Citus() {
		want = 3
	}
	if n := d.RoundTrips() - before; n != want {
		t.Fatalf("a read committed with its statement took %d round trips, want %d", n, want)
	}
}

// TestPreferGenericPlan runs, several times on one connection, a statement joining a
// sharded table to a reference table under a transaction that prefers the generic plan,
// as the rooms' message and memory reads do: a Citus coordinator cannot make a generic
// plan of such a router query ("could not create distributed plan"), so there the
// preference must leave planning to the coordinator, while plain PostgreSQL keeps it.
func TestPreferGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, fx := oneConnTwoTenants(t)
	tenant := pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}
	for i := range 3 {
		var part, agent, mode string
		err := d.InTenant(ctx, tenant, func(tx *pg.Tx) error {
			tx.PreferGenericPlan()
			return tx.QueryRow(ctx, `SELECT m.part, a.name, current_setting('plan_cache_mode')
FROM membership m LEFT JOIN agent a ON a.id = m.agent_id WHERE m.project_id = $1`, fx.projectA).Scan(&part, &agent, &mode)
		})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		want := "force_generic_plan"
		if d.Citus() {
			want = "auto"
		}
		if part != "a1" || agent != "a1" || mode != want {
			t.Fatalf("run %d: part %q agent %q plan_cache_mode %q, want a1 a1 %s", i, part, agent, mode, want)
		}
	}
}

// TestRowsReadToTheEndLeaveNoBatchOpen reads a query sent with a pending setting (in one
// batch) to its end without closing the rows, as a caller that only checks Err does: the
// transaction must still commit (an open batch made the COMMIT fail with "conn busy").
func TestRowsReadToTheEndLeaveNoBatchOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, fx := oneConnTwoTenants(t)
	err := d.InTenant(ctx, pg.Tenant{OrgID: fx.orgA, ProjectID: fx.projectA}, func(tx *pg.Tx) error {
		tx.PreferGenericPlan()
		tx.SetLocal("application_name", "rows-to-the-end")
		rows, err := tx.Query(ctx, "SELECT part FROM membership WHERE project_id = $1", fx.projectA)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			n++
		}
		if n != 1 {
			return fmt.Errorf("%d rows, want 1", n)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
