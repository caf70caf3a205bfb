package pg

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Distribution methods of the schema's tables on a Citus coordinator (docs/scale.md).
const (
	// DistReference: a directory keyed by id alone, copied to every node.
	DistReference = "reference"
	// DistProject and DistOrg: sharded by the tenant column that leads the primary key,
	// each class in one co-location group (a tenant's rows of every table of the class
	// live in one shard group, so a tenant's queries and foreign keys stay on one node).
	DistProject = "project_id"
	DistOrg     = "org_id"
	// DistCoordinator: left a plain table on the coordinator (no tenant: the schema
	// version, the refused-credential counters).
	DistCoordinator = "coordinator"
)

// CitusOptions tune Distribute.
type CitusOptions struct {
	// ShardCount is the number of shards of each co-location group created now; 0 keeps
	// Citus's citus.shard_count (32 unless the cluster says otherwise).
	ShardCount int
}

// CitusTable is one table's place in the cluster.
type CitusTable struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	// Done is false when the table had this place already.
	Done bool `json:"distributed_now"`
}

// CitusReport says what Distribute found and did.
type CitusReport struct {
	Tables []CitusTable `json:"tables"`
	// ForeignKeys lists the foreign keys Citus accepts only without their ON DELETE SET
	// NULL action (it refuses the action on any key that holds the distribution column,
	// even when only the other columns are set to NULL): they are kept as plain keys.
	ForeignKeys []string `json:"foreign_keys_without_on_delete_set_null"`
}

// Placement decides where each table goes from its primary key and the foreign keys
// between tables (refs: table → the tables its keys reference), by the rules
// TestCatalogTenancyRules enforces, so a new table is placed without a list to update: a
// primary key led by project_id or org_id is tenant data, sharded by it; a table a
// sharded table references (directly, or through another reference table) is a directory
// copied to every node (a reference table: Citus lets a sharded table reference only
// those and its own group); anything else stays on the coordinator (no tenant: the schema
// version, the refused-credential counters, sign-in sessions).
func Placement(primaryKeys map[string][]string, refs map[string][]string) map[string]string {
	out := make(map[string]string, len(primaryKeys))
	var queue []string
	for t, pk := range primaryKeys {
		switch {
		case len(pk) > 0 && pk[0] == "project_id":
			out[t] = DistProject
		case len(pk) > 0 && pk[0] == "org_id":
			out[t] = DistOrg
		default:
			out[t] = DistCoordinator
			continue
		}
		queue = append(queue, t)
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, r := range refs[t] {
			if out[r] == DistCoordinator {
				out[r] = DistReference
				queue = append(queue, r)
			}
		}
	}
	return out
}

// ErrNotCitus is returned by Distribute on a database without the citus extension.
var ErrNotCitus = errors.New("the database has no citus extension: run this on a Citus coordinator (CREATE EXTENSION citus, then citus_set_coordinator_host and citus_add_node for each worker)")

// Distribute makes a migrated schema a distributed one, once, on a Citus coordinator
// (`relayroom migrate citus`): directory tables become reference tables, project- and
// org-scoped tables are sharded by their tenant column, co-located per class. It runs
// in one transaction (all or nothing) and is idempotent: tables already placed are left
// alone, so it runs again after a later migration adds tables.
//
// Foreign keys between the tables are dropped first and added back last: Citus checks
// each key when it distributes a table, and a key between two tables not yet placed
// would make it turn the referencing table into a "Citus local table" that cannot be
// co-located any more. The request role gets LOGIN: Citus opens its connections to the
// workers as the current role, which is the request role once a request transaction
// has set it (txRole).
func Distribute(ctx context.Context, dbURL string, opt CitusOptions) (CitusReport, error) {
	var rep CitusReport
	conn, err := Connect(ctx, dbURL)
	if err != nil {
		return rep, fmt.Errorf("citus: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	citus, err := HasCitus(ctx, conn)
	if err != nil {
		return rep, fmt.Errorf("citus: check extension: %w", err)
	}
	if !citus {
		return rep, ErrNotCitus
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var e error
		rep, e = distribute(ctx, tx, opt)
		return e
	})
	if err != nil {
		return CitusReport{}, err
	}
	return rep, nil
}

type citusTable struct {
	name, method string
	current      string // pg_dist_partition's partmethod, "" when not in Citus's metadata
	colocation   int
}

func distribute(ctx context.Context, tx pgx.Tx, opt CitusOptions) (CitusReport, error) {
	var rep CitusReport
	// Distributing in a transaction: one connection per worker, and triggers allowed
	// (rr_knowledge_words keeps knowledge_word in step with knowledge; both are sharded
	// by project_id and co-located, so the trigger's insert stays in the shard group).
	setup := []string{
		"SET LOCAL citus.multi_shard_modify_mode TO 'sequential'",
		"SET LOCAL citus.enable_unsafe_triggers TO on",
	}
	for _, s := range setup {
		if _, err := tx.Exec(ctx, s); err != nil {
			return rep, fmt.Errorf("citus: %s: %w", s, err)
		}
	}
	if err := unforceGenericPlans(ctx, tx); err != nil {
		return rep, err
	}
	tables, err := citusTables(ctx, tx)
	if err != nil {
		return rep, err
	}
	before, err := functionCount(ctx, tx)
	if err != nil {
		return rep, err
	}

	var toPlace []citusTable
	for _, t := range tables {
		done := placed(t)
		rep.Tables = append(rep.Tables, CitusTable{Name: t.name, Method: t.method, Done: !done && t.method != DistCoordinator})
		if !done && t.method != DistCoordinator {
			toPlace = append(toPlace, t)
		}
	}
	if len(toPlace) == 0 {
		return rep, nil
	}

	// The foreign keys of every table to be placed, and those pointing at them.
	names := make([]string, len(toPlace))
	for i, t := range toPlace {
		names[i] = t.name
	}
	rows, err := tx.Query(ctx, `SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid),
			c.confdeltype IN ('n', 'd'),
			EXISTS (SELECT 1 FROM unnest(c.conkey) k JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k
			        WHERE a.attname IN ('project_id', 'org_id'))
		FROM pg_constraint c
		WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
		  AND (c.conrelid::regclass::text = ANY ($1) OR c.confrelid::regclass::text = ANY ($1))
		ORDER BY 1, 2`, names)
	if err != nil {
		return rep, fmt.Errorf("citus: read foreign keys: %w", err)
	}
	type fkey struct {
		table, name, def string
		setNull, tenant  bool
	}
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fkey, error) {
		var k fkey
		return k, r.Scan(&k.table, &k.name, &k.def, &k.setNull, &k.tenant)
	})
	if err != nil {
		return rep, fmt.Errorf("citus: read foreign keys: %w", err)
	}
	for _, k := range fks {
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", pgx.Identifier{k.table}.Sanitize(), pgx.Identifier{k.name}.Sanitize())); err != nil {
			return rep, fmt.Errorf("citus: drop foreign key %s.%s: %w", k.table, k.name, err)
		}
	}

	if _, err := tx.Exec(ctx, "ALTER ROLE "+AppRole+" LOGIN"); err != nil {
		return rep, fmt.Errorf("citus: let %s log in to the workers: %w", AppRole, err)
	}

	// A group's first table names the group the others join; one already placed (a
	// schema distributed before a later migration) is found among the placed tables.
	groupOf := map[string]string{}
	for _, t := range tables {
		if placed(t) && (t.method == DistProject || t.method == DistOrg) && groupOf[t.method] == "" {
			groupOf[t.method] = t.name
		}
	}
	// A table a later migration added with a foreign key to a reference table is a "Citus
	// local table" by now (Citus adds it to its metadata to enforce the key), which cannot
	// join a co-location group: with its keys dropped above, Citus lets it go back to a
	// plain table.
	if slices.ContainsFunc(toPlace, func(t citusTable) bool { return t.current != "" }) {
		if _, err := tx.Exec(ctx, "SELECT remove_local_tables_from_metadata()"); err != nil {
			return rep, fmt.Errorf("citus: turn Citus local tables back into plain ones: %w", err)
		}
	}
	for _, t := range toPlace {
		switch t.method {
		case DistReference:
			_, err = tx.Exec(ctx, "SELECT create_reference_table($1::regclass)", t.name)
		default:
			group := groupOf[t.method]
			if group != "" {
				_, err = tx.Exec(ctx, "SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)", t.name, t.method, group)
				break
			}
			// The group's first table: a new co-location group, of ShardCount shards.
			groupOf[t.method] = t.name
			var shards *int
			if opt.ShardCount > 0 {
				shards = &opt.ShardCount
			}
			_, err = tx.Exec(ctx, "SELECT create_distributed_table($1::regclass, $2, colocate_with => 'none', shard_count => $3)", t.name, t.method, shards)
		}
		if err != nil {
			return rep, fmt.Errorf("citus: distribute %s by %s: %w", t.name, t.method, err)
		}
	}

	for _, k := range fks {
		def := k.def
		if k.setNull && k.tenant {
			def = stripOnDelete(def)
			rep.ForeignKeys = append(rep.ForeignKeys, k.table+"."+k.name)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", pgx.Identifier{k.table}.Sanitize(), pgx.Identifier{k.name}.Sanitize(), def)); err != nil {
			return rep, fmt.Errorf("citus: add foreign key %s.%s back (%s): %w", k.table, k.name, def, err)
		}
	}

	// Citus recreates a Citus local table when it converts it, and PostgreSQL then drops
	// what depends on its row type (a function returning SETOF it) with a notice only.
	after, err := functionCount(ctx, tx)
	if err != nil {
		return rep, err
	}
	if after != before {
		return rep, fmt.Errorf("citus: distributing changed the schema's functions (%d before, %d after): nothing was changed", before, after)
	}
	return rep, nil
}

// placed reports whether t already has the place its class asks for.
func placed(t citusTable) bool {
	switch t.method {
	case DistReference:
		return t.current == "n" && t.colocation != 0
	case DistProject, DistOrg:
		return t.current == "h"
	default:
		return true
	}
}

func citusTables(ctx context.Context, tx pgx.Tx) ([]citusTable, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname,
			coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord)
			          FROM pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, ord)
			          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
			          WHERE i.indrelid = c.oid AND i.indisprimary), '{}'),
			coalesce((SELECT array_agg(DISTINCT f.confrelid::regclass::text) FROM pg_constraint f
			          WHERE f.conrelid = c.oid AND f.contype = 'f' AND f.confrelid <> c.oid), '{}'),
			coalesce(p.partmethod::text, ''), coalesce(p.colocationid, 0)
		FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
		ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("citus: read tables: %w", err)
	}
	pks, refs := map[string][]string{}, map[string][]string{}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (citusTable, error) {
		var t citusTable
		var pk, ref []string
		err := r.Scan(&t.name, &pk, &ref, &t.current, &t.colocation)
		pks[t.name], refs[t.name] = pk, ref
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("citus: read tables: %w", err)
	}
	place := Placement(pks, refs)
	for i := range out {
		out[i].method = place[out[i].name]
	}
	return out, nil
}

func functionCount(ctx context.Context, tx pgx.Tx) (int, error) {
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace").Scan(&n); err != nil {
		return 0, fmt.Errorf("citus: count functions: %w", err)
	}
	return n, nil
}

var onDeleteSet = regexp.MustCompile(` ON DELETE SET (NULL|DEFAULT)( \([^)]*\))?`)

// stripOnDelete removes a key's ON DELETE SET NULL / SET DEFAULT action (leaving NO
// ACTION): the key still refuses a row that points nowhere; deleting the row it points
// at is refused while it is pointed at (relayroom never deletes those rows).
func stripOnDelete(def string) string { return onDeleteSet.ReplaceAllString(def, "") }

// unforceGenericPlans lets the coordinator plan each call of the functions that plain
// PostgreSQL plans once (plan_cache_mode = force_generic_plan: rr_recall and
// rr_memory_lexical, migrations 000036 and 000038). A coordinator cannot make a generic plan of a
// router query ("could not create distributed plan"), as with pg.Tx.PreferGenericPlan;
// under the default mode Citus plans each execution with its values. Run on every
// distribution, so that a function a later migration forces is let go too.
func unforceGenericPlans(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace
		  AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig)
		ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("citus: read the functions with forced generic plans: %w", err)
	}
	fns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("citus: read the functions with forced generic plans: %w", err)
	}
	for _, fn := range fns {
		// fn is regprocedure's own text, a quoted signature: not user input.
		if _, err := tx.Exec(ctx, "ALTER FUNCTION "+fn+" RESET plan_cache_mode"); err != nil {
			return fmt.Errorf("citus: let the coordinator plan %s per call: %w", fn, err)
		}
	}
	return nil
}

// HasCitus reports whether the connected database has the citus extension (a coordinator,
// or a worker's copy of a distributed database).
func HasCitus(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var citus bool
	err := q.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus)
	return citus, err
}
