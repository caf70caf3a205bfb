package pg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// multiShard are the queries that read or write every shard of their table on a Citus
// coordinator, by nature: each spans tenants and is bounded another way. docs/scale.md
// explains each. Every other query of the service (tool calls, authentication, periodic
// jobs; the admin CLI's queries in db/admin.sql.go are operator commands and not checked)
// must be a router query: one shard group.
var multiShard = map[string]string{
	// Authentication before the tenant is known: the credential's public id is all there
	// is (a 48-bit random id; the index finds it on each shard).
	"AuthenticateAgentKey": "agent_key by key_id: the key names no organisation",
	"LookupConnectCode":    "connect_code by code_id: the code names no project",
	"LookupCIToken":        "ci_token by token_id: the token names no project",
	// An agent's view across the projects it is a member of (the all-rooms address, the
	// pager): its memberships live in every project's shard group.
	"ListAgentRooms":               "an agent's rooms across projects (membership by agent_id)",
	"AgentMemberships":             "an agent's memberships across projects",
	"ClaimAgentWakes":              "the pager: an agent's wakes across its projects",
	"FoldAgentEvents":              "the pager: an agent's wake events across its projects",
	"AgentPendingWakes":            "an agent's pending wakes across its projects",
	"PendingWakeAgents":            "agents with deliverable wakes",
	"WebhookDueWakes":              "the webhook dispatch, across projects",
	"SweepWakes":                   "the 30 s sweep, across projects, bounded per batch",
	"ResumeParked":                 "the sweep's resume of parked parts, across projects",
	"IdleThreads":                  "the idle auto-close sweep, across projects, bounded per batch",
	"ExpireKnowledge":              "the expiry sweep, across projects, bounded per batch",
	"DeleteOldWakes":               "the retention sweep, across projects, bounded per batch",
	"DeleteExpiredIdempotencyKeys": "the clean-up, across organisations, bounded per batch",
}

// TestCitusHotPathsAreRouterQueries reads, on a Citus coordinator, the plan of every query
// the service sends (sqlc's, from db/) and of the statements inside every SECURITY
// DEFINER function, and fails on any that touches more than one shard group and is not
// listed in multiShard. It is skipped on plain PostgreSQL (make test-citus runs it).
func TestCitusHotPathsAreRouterQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.New(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var citus bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil {
		t.Fatal(err)
	}
	if !citus {
		t.Skip("not a Citus coordinator: make test-citus runs this")
	}

	queries := sqlcQueries(t)
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.name] = true
		t.Run(q.name, func(t *testing.T) {
			plan := explainPrepared(t, ctx, conn, q.sql)
			tasks := taskCounts(plan)
			multi := slices.ContainsFunc(tasks, func(n int) bool { return n > 1 })
			_, allowed := multiShard[q.name]
			switch {
			case multi && !allowed:
				t.Errorf("%s reads %v shards, not one shard group:\n%s\n%s", q.name, tasks, q.sql, plan)
			case !multi && allowed:
				t.Errorf("%s is listed as spanning shards but is a router query now: take it off multiShard\n%s", q.name, plan)
			}
		})
	}
	for name := range multiShard {
		if !seen[name] {
			t.Errorf("multiShard lists %s, which is not a query in db/", name)
		}
	}

	t.Run("statements inside SECURITY DEFINER functions", func(t *testing.T) {
		for _, fn := range definerFunctions(t, ctx, conn) {
			t.Run(fn.name, func(t *testing.T) {
				for _, p := range nestedPlans(t, ctx, u, fn.call) {
					if tasks := taskCounts(p); slices.ContainsFunc(tasks, func(n int) bool { return n > 1 }) {
						t.Errorf("%s runs a statement on %v shards:\n%s", fn.name, tasks, p)
					}
				}
			})
		}
	})
}

type sqlcQuery struct{ name, sql string }

var sqlcConst = regexp.MustCompile("(?s)const \\w+ = `-- name: (\\w+) :\\w+\\n(.*?)`")

// sqlcQueries reads every query sqlc generated, but the admin CLI's.
func sqlcQueries(t *testing.T) []sqlcQuery {
	t.Helper()
	files, err := filepath.Glob("../../db/*.sql.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sqlc output in db/: %v", err)
	}
	var out []sqlcQuery
	for _, f := range files {
		if filepath.Base(f) == "admin.sql.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sqlcConst.FindAllStringSubmatch(string(b), -1) {
			out = append(out, sqlcQuery{name: m[1], sql: m[2]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// probeID is the value of every uuid parameter: a router plan depends on the shape of the
// filter on the distribution column, not on whether a row has this id.
const probeID = "0190f1a2-7c3b-7d4e-8f50-6a7b8c9d0e1f"

// literalFor is a value of type typ for a plan probe.
func literalFor(typ string) string {
	switch typ {
	case "uuid":
		return "'" + probeID + "'::uuid"
	case "uuid[]":
		return "ARRAY['" + probeID + "']::uuid[]"
	case "text", "character varying":
		return "'probe'"
	case "text[]":
		return "ARRAY['probe']"
	case "integer", "bigint", "smallint":
		return "1"
	case "real", "double precision", "numeric":
		return "0.5"
	case "boolean":
		return "true"
	case "timestamp with time zone", "date":
		return "now()"
	case "jsonb", "json":
		return "'{}'"
	case "bytea":
		return "'\\x00'"
	case "interval":
		return "'1 minute'"
	default:
		return "NULL"
	}
}

var probeSeq atomic.Int64

// explainPrepared prepares sql (the server infers its parameters' types) and returns the
// plan of one execution with probe values.
func explainPrepared(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) string {
	t.Helper()
	name := "probe_" + strconv.Itoa(int(probeSeq.Add(1)))
	if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, sql)); err != nil {
		t.Fatalf("prepare: %v\n%s", err, sql)
	}
	defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE "+name) }()
	var types []string
	if err := conn.QueryRow(ctx, "SELECT coalesce(parameter_types::text[], '{}') FROM pg_prepared_statements WHERE name = $1", name).Scan(&types); err != nil {
		t.Fatal(err)
	}
	args := make([]string, len(types))
	for i, typ := range types {
		args[i] = literalFor(strings.TrimPrefix(typ, "public."))
	}
	call := "EXECUTE " + name
	if len(args) > 0 {
		call += "(" + strings.Join(args, ", ") + ")"
	}
	rows, err := conn.Query(ctx, "EXPLAIN "+call)
	if err != nil {
		t.Fatalf("explain %s: %v\n%s", call, err, sql)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain %s: %v\n%s", call, err, sql)
	}
	return strings.Join(lines, "\n")
}

var taskCount = regexp.MustCompile(`Task Count: (\d+)`)

// taskCounts lists the Task Count of every distributed scan in a plan: one task is a
// router query (one shard group); none at all means the coordinator runs it alone (its
// own tables, or reference tables from its local copy).
func taskCounts(plan string) []int {
	var out []int
	for _, m := range taskCount.FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

type definerFunction struct{ name, call string }

// definerFunctions returns a call with probe arguments of every SECURITY DEFINER function
// of the schema.
func definerFunctions(t *testing.T, ctx context.Context, conn *pgx.Conn) []definerFunction {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT p.proname,
			coalesce((SELECT array_agg(format_type(a, NULL) ORDER BY o) FROM unnest(p.proargtypes) WITH ORDINALITY x(a, o)), '{}')
		FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type fn struct {
		name  string
		types []string
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fn, error) {
		var f fn
		return f, r.Scan(&f.name, &f.types)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]definerFunction, len(fns))
	for i, f := range fns {
		args := make([]string, len(f.types))
		for j, typ := range f.types {
			args[j] = literalFor(typ)
		}
		out[i] = definerFunction{name: f.name, call: fmt.Sprintf("SELECT * FROM %s(%s)", f.name, strings.Join(args, ", "))}
	}
	if len(out) == 0 {
		t.Fatal("no SECURITY DEFINER function found")
	}
	return out
}

// nestedPlans runs call in a transaction whose tenant settings all hold the probe id
// (set as the service sets them on Citus), rolled back, with auto_explain reporting the
// plan of every statement it runs, nested ones included, to this client.
func nestedPlans(t *testing.T, ctx context.Context, u, call string) []string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "Query Text:") {
			plans = append(plans, n.Message)
		}
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	setup := []string{
		"LOAD 'auto_explain'",
		"BEGIN",
		"SET LOCAL citus.propagate_set_commands = 'local'",
		"SET LOCAL app.org_id = '" + probeID + "'",
		"SET LOCAL app.project_id = '" + probeID + "'",
		"SET LOCAL app.agent_id = '" + probeID + "'",
		"SET LOCAL auto_explain.log_min_duration = 0",
		"SET LOCAL auto_explain.log_nested_statements = on",
		"SET LOCAL client_min_messages = log",
	}
	for _, s := range setup {
		if _, err := c.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	defer func() { _, _ = c.Exec(ctx, "ROLLBACK") }()
	if _, err := c.Exec(ctx, call, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	if len(plans) == 0 {
		t.Fatalf("%s: auto_explain reported no plan", call)
	}
	return plans
}
