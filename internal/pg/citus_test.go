package pg_test

import (
	"context"
	"errors"
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

	"github.com/relayroom/relayroom/internal/pg"
)

// multiShard are the queries that read or write every shard of their table on a Citus
// coordinator, by nature: each spans tenants and is bounded another way (docs/scale.md
// explains each). Every other query the service sends (tool calls, authentication,
// periodic jobs; the admin CLI's queries in db/admin.sql.go are operator commands and not
// checked) must be a router query: one shard group.
var multiShard = map[string]string{
	"CredentialRows":              "authentication: a credential's public id names no tenant",
	"CITokenFind":                 "a CI token's public id names no project",
	"MembershipTouchByAgent":      "an agent's presence in every room it is in",
	"WakeAck":                     "the pager acknowledges a wake by id; its request names no project",
	"WakeGetAgentStatus":          "the pager reads a wake by id; its request names no project",
	"WakeNotifyMembers":           "one NOTIFY for a batch of sends across projects",
	"MembershipResumeParked":      "the sweep: parked parts of every project",
	"MemoryEntryListUnembedded":   "the embedding backfill, across projects, a batch per run",
	"KnowledgeExpire":             "the expiry sweep, across projects, a batch per run",
	"WakeDeleteOld":               "the wake retention sweep, across projects, a batch per statement",
	"WakeListStaleSending":        "the sweep's look for lost webhook deliveries, across projects (wake_sending_idx on each shard)",
	"IdempotencyKeyDeleteExpired": "the idempotency clean-up, across organisations, a batch per statement",
	"WakeListAgentProjects":       "the pager's candidates: its agent's projects with wakes; its request names no project",
	"AgentListRooms":              "an agent's rooms across projects (the all-rooms address)",
	"WakeEventListBacklog":        "the sweep: projects with wake events to fold, a bounded list, without locks",
	"WakeListWebhookAgents":       "the dispatch: agents with a webhook (one row per configured webhook)",
	"WakeListWebhookProjects":     "the dispatch: projects with pending webhook wakes, a bounded list, without locks",
	"ThreadListIdle":              "the idle sweep: candidates across projects, a batch per run, without locks",
	"WakeList":                    "operator command: wakes of every project",
	"WakeTargetList":              "operator command: every webhook",
	// Credentials by their public id, which names no tenant: one index probe per shard.
	"ConnectCodeRows":      "authentication: a connect code's public id names no project",
	"DeskTokenRows":        "authentication: a desk token's public id names no organisation",
	"OAuthTokenRows":       "authentication: an OAuth token's public id names no organisation",
	"OAuthGrantListByCode": "the token endpoint: an authorization code's public id names no organisation",
	// A person's organisations and rooms, across tenants by nature, like AgentListRooms.
	"WebSessionListOrgs": "a signed-in person's organisations (org_member by user_id, the person's memberships)",
	"PersonListRooms":    "an organisation's rooms: those it hosts and those of its agreements (agreement by guest_org_id)",
	// Periodic sweeps and operator commands.
	"OAuthTokenPrune":           "the sign-in prune job: tokens expired for a day, across organisations",
	"DeskNoteKeyDeleteExpired":  "the desk's idempotency clean-up, across organisations, a batch per statement",
	"DeskInboxSecretsAll":       "operator command: resealing every inbox secret under a new key",
	"OAuthGrantList":            "operator command: every grant",
	"OAuthGrantRevokeByID":      "operator command: a grant by id",
	"OAuthTokenRevokeByGrantID": "operator command: the tokens of a grant revoked by id",
	// The dashboard's organisation pages.
	"InvitationRowsByInviteID": "accepting an invitation: its public id names no organisation (one index probe per shard)",
	"AgreementListForOrg":      "an organisation's agreements as host or as guest, across the rooms they concern",
}

// multiShardFunctions are the SECURITY DEFINER functions with a statement that spans
// shard groups by nature. They are not probed: auto_explain cannot show the plan of a
// PL/pgSQL statement with parameters on Citus (Citus sends the workers an EXPLAIN whose
// parameters have no types, which aborts the probe).
var multiShardFunctions = map[string]string{
	"rr_set_directory": "the projects of the caller's agent and their hosts (membership by agent_id), once per request's bind",
}

// unprobedFunctions are the SECURITY DEFINER functions whose statements auto_explain
// cannot show on Citus: the probe itself aborts the transaction (Citus's EXPLAIN of a
// statement on a table of the coordinator, run inside the function, fails with "Could not
// get remote plan"), while the function runs (the sign-in suites of internal/app call it on
// the coordinator).
var unprobedFunctions = map[string]string{
	"rr_set_signin": "its statements read web_session and oauth_auth_request (tables of the coordinator) and oauth_grant by org_id",
}

// plannerProbedFunctions are the SECURITY DEFINER functions whose statements take their
// values from PL/pgSQL variables (parameters of a plan kept per connection) and that
// auto_explain cannot show on Citus: its EXPLAIN of such a statement reads the parameters'
// types before PL/pgSQL has filled them in and fails with "cache lookup failed for type N"
// for some garbage N, or not, as memory falls (citusdata/citus#7596; the function runs
// without auto_explain). Their statements are checked from the Citus planner's own
// messages instead (routerPlannerMessages).
var plannerProbedFunctions = map[string]string{
	"rr_recall":         "its query is static (planned once per connection, migrations 000036 and 000044) and reads the project from a variable",
	"rr_memory_lexical": "its query is static (planned once per connection, migration 000038) and reads the project and the organisation from variables",
	"rr_near_duplicate": "its query is static (planned once per connection, migration 000043) and reads the project from a variable",
}

// plainOnly are the queries the service sends on plain PostgreSQL only: the one-round-trip
// credential resolution (tenancy.Resolver), which sets the tenant with set_config inside a
// statement, which Citus workers would not see. On Citus the resolver takes the
// statement-by-statement path (CredentialRows, ScopeBindPart, AgentGetIdentity; ScopeBindAgentRoom serves both).
var plainOnly = map[string]string{
	"CredentialAssumeTenant": "sets the tenant with set_config (one-round-trip resolution)",
	"ScopeBindOwnPart":       "reads the tenant CredentialAssumeTenant set",
	"AgentGetOwnIdentity":    "reads the tenant CredentialAssumeTenant set",
	// The scope cache's one-round-trip recheck (tenancy.Resolver.recheck), which the
	// resolver uses on plain PostgreSQL only, like the resolution above.
	"CredentialAssumeCachedTenant": "sets the tenant with set_config (the scope cache's recheck)",
	"ScopeConfirmMember":           "reads the tenant CredentialAssumeCachedTenant set",
	"AgentConfirmOwn":              "reads the tenant CredentialAssumeCachedTenant set",
}

// refusedOnCitus are the queries a Citus coordinator refuses to plan today, the gaps
// docs/scale.md lists under "Still refused on Citus" with the way out of each. The test
// checks they are still refused, so the list stays true when one is fixed.
var refusedOnCitus = map[string]string{}

// TestCitusHotPathsAreRouterQueries reads, on a Citus coordinator, the plan of every query
// the service sends (sqlc's, from db/) and of the statements inside every SECURITY
// DEFINER function, and fails on any that touches more than one shard group and is not
// listed in multiShard. It is skipped on plain PostgreSQL (make test-citus runs it).
func TestCitusHotPathsAreRouterQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, u := citusConn(t)

	queries := sqlcQueries(t)
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.name] = true
		t.Run(q.name, func(t *testing.T) {
			if why, plain := plainOnly[q.name]; plain {
				t.Skipf("not sent on Citus: %s", why)
			}
			if why, refused := refusedOnCitus[q.name]; refused {
				if err := tryExplain(ctx, conn, q.sql); err == nil {
					t.Errorf("%s is listed as refused by Citus (%s) but plans now: take it off refusedOnCitus", q.name, why)
				}
				return
			}
			plan := explainPrepared(t, ctx, conn, q.sql)
			// Rows pulled to the coordinator are copied into the shard, and Citus refuses
			// COPY under row-level security: such a statement fails at run time. With ON
			// CONFLICT they go through intermediate results instead, upserted on the
			// worker under the policies (WakeEventFold' upsert, run by the wake suite on
			// the coordinator in the agent's tenant).
			if strings.Contains(plan, "pull to coordinator") && !strings.Contains(q.sql, "ON CONFLICT") {
				t.Errorf("%s pulls its rows to the coordinator (COPY into a shard, refused under row-level security):\n%s\n%s", q.name, q.sql, plan)
			}
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
	for _, list := range []map[string]string{multiShard, refusedOnCitus, plainOnly} {
		for name := range list {
			if !seen[name] {
				t.Errorf("%s is listed but is not a query in db/", name)
			}
		}
	}

	t.Run("statements inside SECURITY DEFINER functions", func(t *testing.T) {
		fns := definerFunctions(t, ctx, conn)
		for _, list := range []map[string]string{multiShardFunctions, unprobedFunctions, plannerProbedFunctions} {
			for name := range list {
				if !slices.ContainsFunc(fns, func(f definerFunction) bool { return f.name == name }) {
					t.Errorf("%s is listed but is not a SECURITY DEFINER function", name)
				}
			}
		}
		for _, fn := range fns {
			t.Run(fn.name, func(t *testing.T) {
				if _, spans := multiShardFunctions[fn.name]; spans {
					t.Skipf("%s spans shard groups by nature: %s", fn.name, multiShardFunctions[fn.name])
				}
				if why, unprobed := unprobedFunctions[fn.name]; unprobed {
					t.Skipf("%s cannot be probed by auto_explain on Citus: %s", fn.name, why)
				}
				if _, planner := plannerProbedFunctions[fn.name]; planner {
					routerPlannerMessages(t, ctx, u, fn.call)
					return
				}
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
		return "true" // probeCalls tries false too
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
// plans of its executions with probe values (probeCalls: one, or two when it has a
// boolean parameter).
func explainPrepared(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) string {
	t.Helper()
	name := "probe_" + strconv.Itoa(int(probeSeq.Add(1)))
	if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, sql)); err != nil {
		t.Fatalf("prepare: %v\n%s", err, sql)
	}
	defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE "+name) }()
	calls, err := probeCalls(ctx, conn, name)
	if err != nil {
		t.Fatal(err)
	}
	var plans []string
	for _, call := range calls {
		rows, err := conn.Query(ctx, "EXPLAIN "+call)
		if err != nil {
			t.Fatalf("explain %s: %v\n%s", call, err, sql)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("explain %s: %v\n%s", call, err, sql)
		}
		plans = append(plans, strings.Join(lines, "\n"))
	}
	return strings.Join(plans, "\n")
}

// tryExplain reports whether Citus can plan sql with probe values.
func tryExplain(ctx context.Context, conn *pgx.Conn, sql string) error {
	name := "probe_" + strconv.Itoa(int(probeSeq.Add(1)))
	if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, sql)); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE "+name) }()
	calls, err := probeCalls(ctx, conn, name)
	if err != nil {
		return err
	}
	for _, call := range calls {
		if _, err := conn.Exec(ctx, "EXPLAIN "+call); err != nil {
			return err
		}
	}
	return nil
}

// probeCalls are EXECUTE name with a probe value of each parameter's type: every boolean
// true, then, when there is a boolean, every boolean false. Citus plans each execution
// with its values, and a bound boolean changes the plan: true folds away "flag OR EXISTS
// (…)" and hides the subquery, and false leaves a qual that names no column (a
// pseudoconstant), which a PG15/16 coordinator refuses beside an outer join
// (RoomListNeedsYou's guests).
func probeCalls(ctx context.Context, conn *pgx.Conn, name string) ([]string, error) {
	var types []string
	if err := conn.QueryRow(ctx, "SELECT coalesce(parameter_types::text[], '{}') FROM pg_prepared_statements WHERE name = $1", name).Scan(&types); err != nil {
		return nil, err
	}
	if len(types) == 0 {
		return []string{"EXECUTE " + name}, nil
	}
	call := func(boolean string) string {
		args := make([]string, len(types))
		for i, typ := range types {
			if typ = strings.TrimPrefix(typ, "public."); typ == "boolean" {
				args[i] = boolean
			} else {
				args[i] = literalFor(typ)
			}
		}
		return "EXECUTE " + name + "(" + strings.Join(args, ", ") + ")"
	}
	if !slices.Contains(types, "boolean") {
		return []string{call("true")}, nil
	}
	return []string{call("true"), call("false")}, nil
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

// probeNotices runs call in a transaction whose tenant settings all hold the probe id
// (set as the service sets them on Citus), after the statements of settings, rolled back,
// and returns the messages of the notices keep picks.
func probeNotices(t *testing.T, ctx context.Context, u, call string, keep func(*pgconn.Notice) bool, settings ...string) []string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	var messages []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if keep(n) {
			messages = append(messages, n.Message)
		}
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	setup := append([]string{
		"BEGIN",
		"SET LOCAL citus.propagate_set_commands = 'local'",
		"SET LOCAL app.org_id = '" + probeID + "'",
		"SET LOCAL app.project_id = '" + probeID + "'",
		"SET LOCAL app.agent_id = '" + probeID + "'",
	}, settings...)
	for _, s := range setup {
		if _, err := c.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	defer func() { _, _ = c.Exec(ctx, "ROLLBACK") }()
	if _, err := c.Exec(ctx, call, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	return messages
}

// nestedPlans runs call as probeNotices does, with auto_explain reporting the plan of
// every statement it runs, nested ones included, to this client.
func nestedPlans(t *testing.T, ctx context.Context, u, call string) []string {
	t.Helper()
	plans := probeNotices(t, ctx, u, call, func(n *pgconn.Notice) bool { return strings.Contains(n.Message, "Query Text:") },
		"LOAD 'auto_explain'",
		"SET LOCAL auto_explain.log_min_duration = 0",
		"SET LOCAL auto_explain.log_nested_statements = on",
		"SET LOCAL client_min_messages = log")
	if len(plans) == 0 {
		t.Fatalf("%s: auto_explain reported no plan", call)
	}
	return plans
}

// routerPlannerMessages runs call as probeNotices does, with the Citus planner's DEBUG2
// messages reported to this client, and fails when a statement the call runs was planned
// across shards ("Router planner cannot handle multi-shard …", a repartition join) or when
// no statement was planned as a router query at all.
func routerPlannerMessages(t *testing.T, ctx context.Context, u, call string) {
	t.Helper()
	messages := probeNotices(t, ctx, u, call, func(n *pgconn.Notice) bool { return n.Severity == "DEBUG" },
		"SET LOCAL client_min_messages = debug2")
	routed := false
	for _, m := range messages {
		switch {
		case strings.Contains(m, "multi-shard"), strings.Contains(m, "repartition"), strings.Contains(m, "join prunable"):
			t.Errorf("%s plans a statement across shards: %q\nall planner messages: %q", call, m, messages)
		case strings.Contains(m, "Creating router plan"):
			routed = true
		}
	}
	if !routed {
		t.Errorf("%s: the Citus planner reported no router plan: %q", call, messages)
	}
}

// TestCitusPlacement places tables by their primary key and the foreign keys of sharded
// tables, as relayroom migrate citus does: a table only service tables reference stays on
// the coordinator even when its key is id alone.
func TestCitusPlacement(t *testing.T) {
	t.Parallel()
	pks := map[string][]string{
		"organisation": {"id"}, "project": {"id"}, "oauth_client": {"client_id"},
		"membership": {"project_id", "id"}, "oauth_grant": {"org_id", "id"},
		"oauth_auth_request": {"id"}, "auth_throttle": {"subject"},
	}
	refs := map[string][]string{
		"project":            {"organisation"},
		"membership":         {"project"},
		"oauth_grant":        {"oauth_client", "organisation"},
		"oauth_auth_request": {"oauth_client"},
	}
	want := map[string]string{
		"organisation": pg.DistReference, "project": pg.DistReference, "oauth_client": pg.DistReference,
		"membership": pg.DistProject, "oauth_grant": pg.DistOrg,
		"oauth_auth_request": pg.DistCoordinator, "auth_throttle": pg.DistCoordinator,
	}
	got := pg.Placement(pks, refs)
	for table, w := range want {
		if got[table] != w {
			t.Errorf("%s: placed %q, want %q", table, got[table], w)
		}
	}
}

// TestCitusQueriesRun executes, on a Citus coordinator, every query the service sends
// (sqlc's, as TestCitusHotPathsAreRouterQueries lists them) once with probe values, as the
// request role under a tenant, each in a savepoint of one transaction rolled back at the
// end. EXPLAIN alone does not show everything Citus refuses or trips on when it runs a
// statement: an INSERT with a subquery in its VALUES plans and is refused at run time
// ("subqueries are not supported within INSERT queries", AuditEventInsert), and a
// reference table left-joined to a sharded one crashed Citus 13.2's coordinator
// (PersonListRooms). A probe may fail on its values (a key, a check, a policy's WITH
// CHECK); it must not fail as unsupported, as an internal error, or by losing the
// connection. Skipped on plain PostgreSQL.
func TestCitusQueriesRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, _ := citusConn(t)
	setup := []string{
		"BEGIN",
		"SET LOCAL citus.propagate_set_commands = 'local'",
		"SET LOCAL ROLE relayroom_app",
		"SET LOCAL app.org_id = '" + probeID + "'",
		"SET LOCAL app.project_id = '" + probeID + "'",
		"SET LOCAL app.agent_id = '" + probeID + "'",
		"SET LOCAL statement_timeout = '30s'",
		// As pg.Tx sets it on Citus: the multi-shard reads before a write to a reference
		// table run sequentially.
		"SET LOCAL citus.multi_shard_modify_mode = 'sequential'",
	}
	for _, s := range setup {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	defer func() { _, _ = conn.Exec(ctx, "ROLLBACK") }()
	for _, q := range sqlcQueries(t) {
		if _, plain := plainOnly[q.name]; plain {
			continue
		}
		// probe runs one step in a savepoint and fails the test on what Citus refuses.
		probe := func(step string) bool {
			if _, err := conn.Exec(ctx, "SAVEPOINT probe"); err != nil {
				t.Fatalf("before %s: %v", q.name, err)
			}
			_, err := conn.Exec(ctx, step)
			var pgErr *pgconn.PgError
			switch {
			case err == nil:
			case !errors.As(err, &pgErr):
				t.Fatalf("%s lost the connection (the coordinator crashed?): %v\n%s", q.name, err, q.sql)
			case pgErr.Code == "0A000" || strings.HasPrefix(pgErr.Code, "XX"):
				t.Errorf("%s is refused by Citus when it runs (%s): %v\n%s", q.name, step, err, q.sql)
			}
			if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT probe"); err != nil {
				t.Fatalf("after %s: %v", q.name, err)
			}
			return err == nil
		}
		name := "run_" + strconv.Itoa(int(probeSeq.Add(1)))
		if !probe(fmt.Sprintf("PREPARE %s AS %s", name, q.sql)) {
			continue
		}
		calls, err := probeCalls(ctx, conn, name)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for _, call := range calls {
			probe(call)
		}
	}
}

// laterMigrations is how many of the latest migrations TestCitusLaterMigrations undoes and
// applies again on a distributed database.
const laterMigrations = 6

// TestCitusLaterMigrations undoes the latest migrations on a distributed database (a clone
// of the distributed test template) and applies them again, as `relayroom migrate up` does
// on a cluster distributed before they existed. Citus sends some DDL to the workers as the
// text of the command that held it: a migration file is one multi-statement command, which
// a worker refuses ("cannot insert multiple commands into a prepared statement"; 000043's
// ALTER INDEX did). The fresh-database path of every other test never shows it, since the
// template is migrated before it is distributed. Skipped on plain PostgreSQL.
func TestCitusLaterMigrations(t *testing.T) {
	t.Parallel()
	conn, u := citusConn(t)
	if err := conn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !t.Run("the latest migrations come down on a distributed database", func(t *testing.T) {
		if _, err := pg.MigrateDown(context.Background(), u, laterMigrations); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}
	if !t.Run("and go up again", func(t *testing.T) {
		if _, err := pg.MigrateUp(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		st, err := pg.StatusURL(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		if !st.UpToDate() {
			t.Fatalf("status after up: %+v", st)
		}
	}) {
		return
	}
	t.Run("and the schema distributes again", func(t *testing.T) {
		if _, err := pg.Distribute(context.Background(), u, pg.CitusOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
