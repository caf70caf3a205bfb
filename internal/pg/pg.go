// Package pg owns the connection pools and the tenant-scoped transaction every request
// runs in. It is the only package besides the domain packages that imports db.
package pg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// AppRole is the role requests run as: it owns no table and cannot bypass RLS.
const AppRole = "relayroom_app"

// DB holds the pools on one database. App's transactions run as AppRole, so RLS holds
// whatever credentials DATABASE_URL carries. Ops keeps the connecting role (the owner
// that ran the migrations) for the admin CLI and sweeps that span tenants. Session is
// for what needs a connection of its own for longer than a transaction (LISTEN, the job
// queue): Ops itself, unless Options.DirectURL names a way around a connection pooler.
type DB struct {
	App     *pgxpool.Pool
	Ops     *pgxpool.Pool
	Session *pgxpool.Pool
	// StatementTimeout is the database budget of a request (see WithBudget), and
	// the bound of every statement of a transaction run without one.
	StatementTimeout time.Duration

	// roundTrips counts the exchanges with the server the transactions made (RoundTrips).
	roundTrips atomic.Int64
	// waiting counts callers waiting for a connection of the App pool, for PoolExhausted
	// (pgxpool's Stat counts waits that happened, not waits in progress).
	waiting atomic.Int64
	// citus: the database is a Citus coordinator, whose workers see a transaction's
	// settings only when they are made with SET LOCAL (see setLocalSQL).
	citus bool
	// lockTimeout is what each App transaction sets lock_timeout to behind a pooler
	// (Options.DirectURL), where no startup parameter reaches the server. "" when
	// connected directly (the session's startup parameter sets it) and when
	// Options.LockTimeout is 0 (the server's own setting stays).
	lockTimeout string
}

// Options tune the pools.
type Options struct {
	MaxConns         int32
	OpsMaxConns      int32
	StatementTimeout time.Duration
	// LockTimeout bounds how long a request's statement waits for a lock (zero: only the
	// statement timeout bounds it). Shorter than the request's budget, it keeps a pile-up
	// behind one lock from holding every pooled connection for the whole budget, so calls
	// that never touch the locked rows still get a connection.
	LockTimeout time.Duration
	// DirectURL, when set, says that the URL Open is given reaches Postgres through a
	// connection pooler in transaction mode (PgBouncer), which hands each transaction
	// whichever server connection is free, and DirectURL reaches it without one. The
	// pools on the pooler then send no startup parameters (PgBouncer refuses them): each
	// transaction sets its timeouts itself, as it sets its role; their statements are not
	// prepared by name (a named statement lives on one server connection) unless the URL
	// chooses a default_query_exec_mode; and Session, on DirectURL, serves LISTEN and the
	// job queue, whose sessions a pooler would not keep.
	DirectURL string
}

// nameConnections names a pool's connections in pg_stat_activity (application_name):
// the pool, the host and the process, so that an operator tells the replicas, and each
// one's request and background connections, apart. A name DATABASE_URL sets is kept.
// Postgres keeps the first 63 bytes of it.
func nameConnections(cfg *pgxpool.Config, pool string) {
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; set {
		return
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown" // the name is for people reading pg_stat_activity; nothing depends on it
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = fmt.Sprintf("relayroom-%s %s:%d", pool, host, os.Getpid())
}

// Open connects both pools. The vector extension must exist (run migrations first), since
// its types are registered on every new connection.
func Open(ctx context.Context, url string, opt Options) (*DB, error) {
	if opt.StatementTimeout <= 0 {
		opt.StatementTimeout = 5 * time.Second
	}
	appCfg, err := PoolConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pg open: %w", err)
	}
	if opt.MaxConns > 0 {
		appCfg.MaxConns = opt.MaxConns
	}
	pooled := opt.DirectURL != ""
	if !pooled {
		// The session's own statement timeout bounds what runs before a transaction's
		// set_config does: the first pipelined batch is prepared (parsed, which takes the
		// tables' locks) before any of its statements runs. It travels in the startup
		// message, so it costs no round trip. Behind a pooler each transaction's settings
		// carry it, and the lock timeout (Tx.lockTimeout).
		appCfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opt.StatementTimeout.Milliseconds(), 10)
		if opt.LockTimeout > 0 {
			appCfg.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(opt.LockTimeout.Milliseconds(), 10)
		}
	} else {
		unnamedStatements(url, appCfg)
	}
	nameConnections(appCfg, "app")
	appCfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		// Every transaction sets its role itself (txRole). Connected directly, the
		// session switches too, a second wall: a statement that ever ran outside a
		// request's transaction would still run as AppRole, with no tenant, seeing
		// nothing. Behind a connection pooler in transaction mode the session is left as
		// it is: a session's SET ROLE stays on a server connection that the pooler then
		// hands to other clients (the migration check, the operator's pool); the role is
		// checked there, in a transaction of its own, so that a database without it is
		// said at once.
		check := "SET ROLE " + AppRole
		if pooled {
			check = "BEGIN; SET LOCAL ROLE " + AppRole + "; COMMIT"
		}
		if _, err := c.Exec(ctx, check); err != nil {
			return fmt.Errorf("pg connect: switch to %s (run migrations first): %w", AppRole, err)
		}
		return registerTypes(ctx, c)
	}
	opsCfg, err := PoolConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pg open: %w", err)
	}
	opsCfg.MaxConns = 4
	if opt.OpsMaxConns > 0 {
		opsCfg.MaxConns = opt.OpsMaxConns
	}
	opsCfg.AfterConnect = registerTypes
	nameConnections(opsCfg, "ops")
	var sessionCfg *pgxpool.Config
	if pooled {
		unnamedStatements(url, opsCfg)
		if sessionCfg, err = PoolConfig(opt.DirectURL); err != nil {
			return nil, fmt.Errorf("pg open: the direct URL: %w", err)
		}
		sessionCfg.MaxConns = opsCfg.MaxConns
		sessionCfg.AfterConnect = registerTypes
		nameConnections(sessionCfg, "session")
	}

	app, err := pgxpool.NewWithConfig(ctx, appCfg)
	if err != nil {
		return nil, fmt.Errorf("pg open: app pool: %w", err)
	}
	ops, err := pgxpool.NewWithConfig(ctx, opsCfg)
	if err != nil {
		app.Close()
		return nil, fmt.Errorf("pg open: ops pool: %w", err)
	}
	d := &DB{App: app, Ops: ops, Session: ops, StatementTimeout: opt.StatementTimeout}
	if pooled {
		if d.Session, err = pgxpool.NewWithConfig(ctx, sessionCfg); err != nil {
			app.Close()
			ops.Close()
			return nil, fmt.Errorf("pg open: session pool: %w", err)
		}
		if opt.LockTimeout > 0 {
			d.lockTimeout = fmt.Sprintf("%dms", opt.LockTimeout.Milliseconds())
		}
	}
	// Connected first, so that a database that cannot be reached is said as such (it was
	// reported as a failure to "look for the citus extension", the first query).
	if err := ops.Ping(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("pg open: connect to %s: %w", Describe(url), err)
	}
	if d.citus, err = HasCitus(ctx, ops); err != nil {
		d.Close()
		return nil, fmt.Errorf("pg open: look for the citus extension: %w", err)
	}
	if pooled {
		if err := sameDatabase(ctx, ops, d.Session); err != nil {
			d.Close()
			return nil, fmt.Errorf("pg open: %w", err)
		}
	}
	return d, nil
}

// sameDatabase checks that the direct URL reaches the database the pooler does: jobs
// queued through one and worked through the other, or a LISTEN on another database than
// the NOTIFY, would fail without a word.
func sameDatabase(ctx context.Context, pooled, direct *pgxpool.Pool) error {
	const which = `SELECT (pg_control_system()).system_identifier::text || '/' || current_database()`
	var a, b string
	if err := pooled.QueryRow(ctx, which).Scan(&a); err != nil {
		return fmt.Errorf("identify the database through the pooler: %w", err)
	}
	if err := direct.QueryRow(ctx, which).Scan(&b); err != nil {
		return fmt.Errorf("connect to the direct URL (RELAYROOM_DIRECT_DATABASE_URL): %w", err)
	}
	if a != b {
		return fmt.Errorf("the direct URL (RELAYROOM_DIRECT_DATABASE_URL) reaches database %s, not %s that DATABASE_URL reaches", b, a)
	}
	return nil
}

type budgetKey struct{}

// budget is the database time a request has left.
type budget struct {
	mu   sync.Mutex
	left time.Duration
}

// WithBudget gives every transaction run with ctx one shared database budget of d: the
// request's transactions together, each from the wait for a pooled connection through
// preparing and running its statements to the COMMIT, never spend more than d. The HTTP
// tier sets it once per request. Time between transactions (reading a body, calling the
// embedder) is not counted, and nothing but the database is cut by it. A transaction
// starts with the deadline "now + what is left"; past it, it fails with an error Classify
// turns into Unavailable. Transactions of one request that run at the same time are each
// counted in full, which only makes the budget stricter.
func WithBudget(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, budgetKey{}, &budget{left: d})
}

// requestDeadline is the deadline of a transaction starting now: what is left of ctx's
// budget, or ctx's own deadline when earlier; bounded is false without a budget (jobs,
// the admin CLI). spent must run when the transaction ends.
func requestDeadline(ctx context.Context) (deadline time.Time, bounded bool, spent func()) {
	spent = func() {}
	start := time.Now()
	if b, ok := ctx.Value(budgetKey{}).(*budget); ok {
		b.mu.Lock()
		deadline, bounded = start.Add(b.left), true
		b.mu.Unlock()
		spent = func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.left = max(b.left-time.Since(start), 0)
		}
	}
	if dl, has := ctx.Deadline(); has && bounded && dl.Before(deadline) {
		deadline = dl
	}
	return deadline, bounded, spent
}

// clientGrace is how much later than the deadline the client gives up on a statement
// itself: the server's statement_timeout fires at the deadline and answers a clean
// cancellation (the connection stays usable); the client's bound only acts when the
// server cannot answer at all, and then the connection is dropped.
const clientGrace = 250 * time.Millisecond

// ErrDeadline is returned (wrapped) when a request's database budget is spent before its
// transaction could start.
var ErrDeadline = fmt.Errorf("pg: the request's database time is spent: %w", context.DeadlineExceeded)

// RoundTrips is how many times the transactions of d sent statements and waited for their
// answers (a pipelined batch is one), since it was opened: the cost that dominates a
// request's time on a loaded machine, so tests can pin how many a path takes. Statement
// preparation by pgx on a connection's first use of a text is not counted.
func (d *DB) RoundTrips() int64 { return d.roundTrips.Load() }

// Citus reports whether the database is a Citus coordinator.
func (d *DB) Citus() bool { return d.citus }

// PoolExhausted reports whether every connection of the request pool is in use while
// callers wait for one: the cause /readyz names when requests time out waiting.
func (d *DB) PoolExhausted() bool {
	st := d.App.Stat()
	return st.AcquiredConns() >= st.MaxConns() && d.waiting.Load() > 0
}

func registerTypes(ctx context.Context, c *pgx.Conn) error {
	registerUUID(c.TypeMap())
	if err := pgxvec.RegisterTypes(ctx, c); err != nil {
		return fmt.Errorf("pg connect: register vector types: %w", err)
	}
	return nil
}

// Close closes the pools.
func (d *DB) Close() {
	d.App.Close()
	d.Ops.Close()
	if d.Session != d.Ops {
		d.Session.Close()
	}
}

// unnamedStatements has a pool behind a transaction pooler describe its statements
// without preparing them by name, unless the URL chooses a default_query_exec_mode (a
// pooler that keeps named statements, PgBouncer 1.21 and later with
// max_prepared_statements, may use cache_statement).
func unnamedStatements(url string, cfg *pgxpool.Config) {
	if !strings.Contains(url, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
}

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.App.Ping(ctx); err != nil {
		return fmt.Errorf("pg ping: %w", err)
	}
	return nil
}

// Tenant is what RLS policies see for one transaction. Zero values mean "none": a policy
// comparing against them matches nothing.
type Tenant struct {
	OrgID     uuid.UUID
	ProjectID uuid.UUID
	AgentID   uuid.UUID
	// Lookup holds the public id parts of the credentials under verification, comma
	// separated (an agent key's and a connect code's).
	Lookup string
	// Visible is what the directory tables (organisation, project, agent, app_user) show
	// beyond the tenant's own organisation and project. nil has the database compute it
	// from the ids above (rr_set_directory, pipelined with the settings: no round trip, a
	// few index reads), as a credential's bind does once per request; the bind returns
	// it, and the request's later transactions carry it here.
	Visible *Visible
	// SignIn has the database compute what the sign-in credentials named in Lookup show
	// (rr_set_signin, migration 000019): the person and memberships of a live session, the
	// client of a pending authorization request, the client of a grant of OrgID named by
	// its id. Without it the sign-in policies show people by their email and clients by
	// their id only.
	SignIn bool
}

// Visible lists the directory rows a tenant may see beyond its own organisation, the
// projects its organisation hosts, the current project and its organisation's agents
// (migration 000013): the directory policies compare rows with these lists alone, so
// they hold no subquery (Citus refuses them, and per-row subqueries cost more than the
// queries they guarded).
type Visible struct {
	Orgs     []uuid.UUID // the current project's host and member organisations, the hosts of the agent's projects
	Projects []uuid.UUID // the projects the agent is a member of
	Agents   []uuid.UUID // the current project's member agents
	Users    []uuid.UUID // the people of the organisation
}

// idsSetting is a uuid[] literal ("{…,…}"); none is the empty setting, which matches
// nothing.
func idsSetting(ids []uuid.UUID) string {
	if len(ids) == 0 {
		return ""
	}
	b := make([]byte, 0, 2+len(ids)*37)
	b = append(b, '{')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, id.String()...)
	}
	return string(append(b, '}'))
}

func idSetting(id uuid.UUID) string {
	if id == uuid.Nil {
		return ""
	}
	return id.String()
}

// tenantSettings are the transaction-local settings the policies read, in the order of
// the values SetTenant gives them.
var tenantSettings = []string{"app.org_id", "app.project_id", "app.agent_id", "app.lookup",
	"app.orgs", "app.projects", "app.agents", "app.users", "app.signin_users", "app.signin_clients"}

// setLocalSQL is the Citus form of a transaction's settings: Citus sends the workers a
// transaction's SET LOCAL commands (with citus.propagate_set_commands = 'local', set
// first) and nothing that set_config does, and the workers are where the policies of
// sharded tables are checked: with set_config alone every policy there would see no
// tenant and match nothing. SET takes no parameters, so the values are quoted here (they
// are uuids and credential ids; a quote is doubled all the same). It is one simple-protocol
// query: a text that changes with every tenant would otherwise be prepared, and cached,
// once per tenant.
func setLocalSQL(names, values []string) string {
	var b strings.Builder
	b.WriteString("SET LOCAL citus.propagate_set_commands = 'local'")
	for i, name := range names {
		fmt.Fprintf(&b, "; SET LOCAL %s = '%s'", name, strings.ReplaceAll(values[i], "'", "''"))
	}
	return b.String()
}

// The settings of a transaction; $9 and $11, when not empty, are its statement and lock
// timeouts, and $10 the role it runs as (txRole). The sign-in lists start empty with
// every tenant (rr_set_signin fills them on request): a tenant that names other
// credentials must not inherit what the previous one showed.
const setTenantSQL = `SELECT set_config('role', $10, true), set_config('app.org_id', $1, true), set_config('app.project_id', $2, true),
 set_config('app.agent_id', $3, true), set_config('app.lookup', $4, true), set_config('app.orgs', $5, true),
 set_config('app.projects', $6, true), set_config('app.agents', $7, true), set_config('app.users', $8, true),
 set_config('app.signin_users', '', true), set_config('app.signin_clients', '', true),
 CASE WHEN $9::text <> '' THEN set_config('statement_timeout', $9, true) END,
 CASE WHEN $11::text <> '' THEN set_config('lock_timeout', $11, true) END`

// txRole is the role a transaction of the pool runs as, set in the transaction itself
// (with its settings, no round trip) and not only once per connection: connected
// directly, the request pool's connections switch to AppRole when they connect too, but
// a connection pooler between the service and Postgres (PgBouncer in transaction mode)
// hands each transaction whichever server connection is free, one that another client
// of the pooler set to another role, or reset. A request transaction run as the owner would
// pass every row-level security policy; this one always runs as AppRole. The operator's
// pool runs as the login role ("none" resets to it), as when it connects.
func txRole(app bool) string {
	if app {
		return AppRole
	}
	return "none"
}

// setTenantDirectorySQL is setTenantSQL, then rr_set_directory on the settings it made.
const setTenantDirectorySQL = `SELECT rr_set_directory() FROM (` + setTenantSQL + ` OFFSET 0) s`

// setTenantSignInSQL and setTenantBothSQL are setTenantSQL, then rr_set_signin (and
// rr_set_directory) on the settings it made.
const (
	setTenantSignInSQL = `SELECT rr_set_signin() FROM (` + setTenantSQL + ` OFFSET 0) s`
	setTenantBothSQL   = `SELECT rr_set_directory(), rr_set_signin() FROM (` + setTenantSQL + ` OFFSET 0) s`
)

// InTenant runs fn in a transaction whose RLS tenant is t. BEGIN, the tenant settings and
// the statement timeout are not sent on their own: they travel in one pipelined batch with
// fn's first statement, so tenancy costs no round trip but the COMMIT. The settings are
// transaction-local, so nothing leaks to the next user of the pooled connection.
// fn's error is returned as is; the transaction commits only when fn returns nil.
func (d *DB) InTenant(ctx context.Context, t Tenant, fn func(tx *Tx) error) error {
	return d.inTx(ctx, d.App, t, fn)
}

// Operator runs fn in a transaction on the owner's pool (admin CLI, cross-tenant sweeps).
func (d *DB) Operator(ctx context.Context, fn func(tx *Tx) error) error {
	return d.inTx(ctx, d.Ops, Tenant{}, fn)
}

// inTx runs fn in a transaction, a second time on another connection when the first
// one's connection turned out dead before anything of it ran (Tx.lost): a backend
// terminated while idle in the pool (a failover, PgBouncer restarting, idle_session_timeout)
// failed the next request, and /readyz with it, though the database was up. fn runs again
// from its start, as for a request sent again.
func (d *DB) inTx(ctx context.Context, pool *pgxpool.Pool, t Tenant, fn func(tx *Tx) error) error {
	lost, err := d.inTxOnce(ctx, pool, t, fn)
	if lost && ctx.Err() == nil {
		_, err = d.inTxOnce(ctx, pool, t, fn)
	}
	return err
}

func (d *DB) inTxOnce(ctx context.Context, pool *pgxpool.Pool, t Tenant, fn func(tx *Tx) error) (lost bool, err error) {
	// A request's Verification rides with this transaction, or is made before it: the
	// operator's transactions, which no row-level security guards, always before.
	var ride *Verification
	if pool == d.App {
		var err error
		if ride, err = d.verifying(ctx, t); err != nil {
			return false, err
		}
	} else if v := verificationFrom(ctx); v != nil {
		if err := d.Verify(ctx, v); err != nil {
			return false, err
		}
	}
	// Without a request budget (jobs, the admin CLI) only the wait for a connection is
	// bounded here; every statement keeps its own statement timeout.
	deadline, bounded, spent := requestDeadline(ctx)
	defer spent()
	acquireBy := deadline
	if !bounded {
		acquireBy = time.Now().Add(d.StatementTimeout)
	}
	conn, err := d.acquire(ctx, pool, acquireBy)
	if err != nil {
		return false, err
	}
	tx := &Tx{conn: conn, citus: d.citus, settings: -1, trips: &d.roundTrips, role: txRole(pool == d.App)}
	if pool == d.App {
		tx.lockTimeout = d.lockTimeout
	}
	// A request's claim (an idempotency key's record) travels with the COMMIT of the first
	// of its tenant transactions that wrote: this one watches its statements for a write.
	c := claimFrom(ctx)
	if pool != d.App {
		c = nil
	}
	tx.watch = c != nil
	defer func() {
		if p := recover(); p != nil {
			tx.abort(ctx)
			panic(p)
		}
	}()
	timeout := d.StatementTimeout
	if bounded {
		// What is left of the request's budget bounds each statement on the server;
		// the client gives up shortly after it (see clientGrace).
		tx.deadline = deadline.Add(clientGrace)
		timeout = time.Until(deadline)
		if timeout < time.Millisecond {
			tx.abort(ctx)
			return false, fmt.Errorf("pg tx: %w", ErrDeadline)
		}
	}
	tx.timeout = fmt.Sprintf("%dms", timeout.Milliseconds())
	tx.pending = []stmt{{sql: "BEGIN"}}
	if tx.citus {
		// Sequential: a transaction that read several shards in parallel (one connection
		// per shard) may not write a reference table afterwards ("cannot modify table …
		// because there was a parallel operation"); the admin apply does both. Router
		// queries, the request path, are not affected.
		// The role (txRole) is set here: setLocalSQL's settings follow it.
		begin := fmt.Sprintf("BEGIN; SET LOCAL ROLE %s; SET LOCAL statement_timeout = '%dms'; SET LOCAL citus.multi_shard_modify_mode = 'sequential'", tx.role, timeout.Milliseconds())
		if tx.lockTimeout != "" {
			begin += "; SET LOCAL lock_timeout = '" + tx.lockTimeout + "'"
		}
		tx.pending = []stmt{{sql: begin, simple: true}}
	}
	if ride != nil {
		// The verification's statements set t when the credentials verify.
		tx.verify = ride
		tx.SetTenant(Tenant{Lookup: ride.Lookup})
		if err := ride.Queue(ctx, tx); err != nil {
			tx.abort(ctx)
			return false, fmt.Errorf("pg tx: queue the verification: %w", err)
		}
	} else {
		tx.SetTenant(t)
	}
	if err := fn(tx); err != nil {
		tx.abort(ctx)
		return tx.lost, err
	}
	if !tx.begun && !tx.queued {
		conn.Release() // fn sent nothing: there is no transaction to commit
		return false, nil
	}
	if tx.committed {
		// The COMMIT went with fn's last statement (CommitWithNext), and its error, if
		// any, came back from that statement.
		if len(tx.pending) > 0 {
			tx.abort(ctx)
			return false, fmt.Errorf("pg tx: statements queued after the commit")
		}
		conn.Release()
		for _, f := range tx.afterCommit {
			f()
		}
		return false, nil
	}
	// The claim goes with the COMMIT of a transaction that wrote, until one has committed it.
	var claimTag pgconn.CommandTag
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.committed || !tx.wrote() {
			c = nil
		} else {
			for _, st := range c.Statements {
				tx.pending = append(tx.pending, stmt{sql: st.SQL, args: st.Args, tag: &claimTag})
			}
		}
	}
	// Statements still queued (a Pipeline that ended with writes) go with the COMMIT.
	tag, err := tx.Exec(ctx, "COMMIT")
	if err == nil && tag.String() == "ROLLBACK" {
		// Postgres answers the COMMIT of a transaction a failed statement aborted with
		// ROLLBACK, not an error: fn went on after an error it dropped, and nothing of
		// the transaction was kept. Said as a failure, never as success.
		err = ErrRolledBack
	}
	if err != nil {
		tx.abort(ctx)
		return tx.lost, fmt.Errorf("pg tx: commit: %w", err)
	}
	if c != nil && claimTag.RowsAffected() > 0 {
		c.committed = true
	}
	conn.Release()
	for _, f := range tx.afterCommit {
		f()
	}
	return false, nil
}

// Claim is what must commit atomically with a request's write: the record that an
// idempotency key was used (internal/idempotency). Carried in the request's context
// (WithClaim), its statements are pipelined before the COMMIT of the first of the
// request's tenant transactions that wrote, costing no round trip; a transaction that only
// read leaves it to the next. The claim is committed when its last statement affected a
// row.
//
// A transaction wrote when one of its statements' command tags says INSERT, UPDATE,
// DELETE or MERGE with a row affected, when a SELECT's text holds a data-modifying
// statement (a WITH … AS (INSERT …) under a SELECT), or when a statement queued by
// Pipeline goes with the COMMIT (its tag is not read before). The tags, not the
// transaction's id, because on Citus the writes run on the workers: the coordinator's
// transaction has no id of its own (pg_current_xact_id_if_assigned is NULL there).
//
// The rule it relies on: a tool makes its writes in one transaction. A second writing
// transaction after the one that committed the claim would not be covered.
type Claim struct {
	Statements []ClaimStatement

	mu        sync.Mutex
	committed bool // a transaction committed it
}

// Committed reports whether one of the request's transactions committed the claim.
func (c *Claim) Committed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed
}

// ClaimStatement is one statement of a Claim.
type ClaimStatement struct {
	SQL  string
	Args []any
}

type claimKey struct{}

// WithClaim returns a context whose tenant transactions carry c.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// WithoutClaim returns a context whose transactions carry no claim: for work inside a
// request that is not the request's own write (resolving the caller's room).
func WithoutClaim(ctx context.Context) context.Context {
	return context.WithValue(ctx, claimKey{}, (*Claim)(nil))
}

func claimFrom(ctx context.Context) *Claim {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	return c
}

// acquire waits for a pooled connection until by at the latest.
func (d *DB) acquire(ctx context.Context, pool *pgxpool.Pool, by time.Time) (*pgxpool.Conn, error) {
	if !time.Now().Before(by) {
		return nil, fmt.Errorf("pg tx: acquire: %w", ErrDeadline)
	}
	actx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	if pool == d.App {
		d.waiting.Add(1)
		defer d.waiting.Add(-1)
	}
	conn, err := pool.Acquire(actx)
	if err != nil {
		return nil, fmt.Errorf("pg tx: acquire: %w", err)
	}
	return conn, nil
}

// stmt is a statement waiting to be pipelined with the next one.
type stmt struct {
	sql  string
	args []any
	tag  *pgconn.CommandTag // where to put its command tag, when someone reads it
	// simple: sent alone by the simple protocol (no args, possibly several commands).
	simple bool
	// exec: queued by Exec inside Pipeline, a write whose tag is read only with the
	// statement it travels with.
	exec bool
	// verify: a check of the request's Verification (Tx.Verifying), which must report a row.
	verify *Verification
}

// Tx is one transaction on one pooled connection. It satisfies db.DBTX. Statements that
// return nothing the caller reads (BEGIN, tenant settings) wait in pending and are sent in
// one batch with the next real statement.
type Tx struct {
	conn      *pgxpool.Conn
	pending   []stmt
	begun     bool // BEGIN has reached the server
	pipelined bool // inside Pipeline: Exec queues instead of sending
	queued    bool // a write waits in pending: the transaction must be sent and committed
	// afterCommit runs once the COMMIT succeeded (never on rollback).
	afterCommit []func()
	// deadline, when not zero, bounds every statement on the client's side (the
	// deadline from the request's budget plus clientGrace).
	deadline time.Time
	citus    bool   // settings go by SET LOCAL (setLocalSQL)
	role     string // the role the transaction runs as (txRole), set with its settings
	// lockTimeout, when not empty, is set with the first settings (DB.lockTimeout).
	lockTimeout string
	// timeout is the transaction's statement_timeout, set by its first settings
	// statement (one statement with the tenant's settings).
	timeout string
	// settings is the index in pending of a settings statement not sent yet, or -1: a
	// later SetTenant replaces it rather than queueing a second one.
	settings int
	// commitNext sends the COMMIT in the batch of the next statement (CommitWithNext);
	// committed says it was sent.
	commitNext, committed bool
	trips                 *atomic.Int64 // DB.roundTrips
	// verify is the request's Verification this transaction carries (Verification).
	verify *Verification
	// watch: the request carries a claim, so the statements' tags are read for a write
	// (wrote); other transactions skip the reading.
	watch, wroteTag bool
	// lost: the first round trip failed on its first result, the BEGIN, because the
	// connection was dead: nothing of the transaction ran (see markLost).
	lost bool
	// broken is the error of a first round trip of which nothing ran (send): the
	// transaction never began, and no statement may be sent in it any more.
	broken error
}

// errBroken is what a statement of a transaction that never began gets (Tx.broken).
func (t *Tx) errBroken() error {
	return fmt.Errorf("pg tx: the transaction did not begin: %w", t.broken)
}

// markLost notes that the transaction's first round trip failed at its BEGIN on a dead
// connection, when nothing of it can have run: pgx sent nothing (SafeToRetry), the
// server's first answer was that it had terminated the backend (57P0x: an administrator,
// a shutdown, idle_session_timeout; sent at the termination, so before any statement of
// ours ran), or the connection is gone and the trip held no COMMIT (a transaction that
// did not commit rolled back with its backend).
func (t *Tx) markLost(err error, committing bool) {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		// pgx closes a connection whose statement's context ended: that is the request's
		// time running out, not a connection found dead, and is not run again.
		return
	case pgconn.SafeToRetry(err):
	case strings.HasPrefix(sqlState(err), "57P0"):
	case !committing && t.conn.Conn().IsClosed():
	default:
		return
	}
	t.lost = true
}

// dataModifying finds a data-modifying statement in a statement's text, for a SELECT
// whose tag hides it (a data-modifying CTE under a SELECT).
var dataModifying = regexp.MustCompile(`(?i)\b(insert\s+into|delete\s+from|merge\s+into|update\s+\w+(\s+(as\s+)?\w+)?\s+set)\b`)

// note reads a statement's command tag for a write (see Claim).
func (t *Tx) note(sql string, tag pgconn.CommandTag) {
	if !t.watch || t.wroteTag {
		return
	}
	switch {
	case tag.Insert(), tag.Update(), tag.Delete(), strings.HasPrefix(tag.String(), "MERGE "):
		t.wroteTag = tag.RowsAffected() > 0
	case tag.Select():
		t.wroteTag = dataModifying.MatchString(sql)
	}
}

// wrote reports whether the transaction wrote: a tag said so, or a write queued by
// Pipeline is still pending (it goes with the COMMIT).
func (t *Tx) wrote() bool {
	if t.wroteTag {
		return true
	}
	for _, p := range t.pending {
		if p.exec && p.verify == nil {
			return true
		}
	}
	return false
}

// bound gives a statement the transaction's deadline. The returned cancel must run once
// the statement's results are read.
func (t *Tx) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, t.deadline)
}

// AfterCommit runs f after the transaction commits, and never if it rolls back: for what
// must not happen inside it (a NOTIFY, which serialises every notifying commit of the
// cluster behind one lock) yet only for work that was stored. f must not block.
func (t *Tx) AfterCommit(f func()) { t.afterCommit = append(t.afterCommit, f) }

// Pipeline runs fn with Exec deferred: every Exec statement fn issues is queued and sent
// in one round trip with the next statement that returns rows, or with the COMMIT. Use it
// for writes whose results nobody reads (sqlc :exec); a queued Exec reports no rows
// affected, and its error comes back from the statement it travels with, failing the
// transaction as a whole.
func (t *Tx) Pipeline(fn func() error) error {
	outer := t.pipelined
	t.pipelined = true
	defer func() { t.pipelined = outer }()
	return fn()
}

// abort rolls back even when ctx is already canceled; a connection that cannot roll back
// is closed so the pool never hands out a connection inside a failed transaction.
func (t *Tx) abort(ctx context.Context) {
	defer t.conn.Release()
	if !t.begun || t.conn.Conn().PgConn().TxStatus() == 'I' {
		return // nothing began, or the transaction is over (committed with its last statement)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	t.trips.Add(1)
	if _, err := t.conn.Exec(rctx, "ROLLBACK"); err != nil {
		_ = t.conn.Conn().Close(rctx) // the connection is discarded either way
	}
}

// needsDirectory: a tenant that comes without its directory lists has the database
// compute them from its ids.
func (tn Tenant) needsDirectory() bool {
	return tn.Visible == nil && (tn.OrgID != uuid.Nil || tn.ProjectID != uuid.Nil || tn.AgentID != uuid.Nil)
}

// SetTenant changes the RLS tenant for the rest of the transaction (once a credential has
// been verified and the tenant it names is known). It is sent with the next statement.
//
// It is one statement: the transaction's statement timeout (with its first settings), the
// settings and, when the tenant comes without its directory lists, rr_set_directory
// computing them from the settings just made (the subquery runs first: the outer select
// needs its row), and rr_set_signin when the tenant is marked SignIn. A SetTenant
// replaces one queued and not sent yet.
func (t *Tx) SetTenant(tn Tenant) {
	var v Visible
	if tn.Visible != nil {
		v = *tn.Visible
	}
	if t.citus {
		values := []string{idSetting(tn.OrgID), idSetting(tn.ProjectID), idSetting(tn.AgentID), tn.Lookup,
			idsSetting(v.Orgs), idsSetting(v.Projects), idsSetting(v.Agents), idsSetting(v.Users), "", ""}
		t.pending = append(t.pending, stmt{sql: setLocalSQL(tenantSettings, values), simple: true})
		if tn.needsDirectory() {
			t.pending = append(t.pending, stmt{sql: "SELECT rr_set_directory()"})
		}
		if tn.SignIn {
			t.pending = append(t.pending, stmt{sql: "SELECT rr_set_signin()"})
		}
		return
	}
	timeout, lockTimeout := "", ""
	if !t.begun {
		timeout, lockTimeout = t.timeout, t.lockTimeout
	}
	sql := setTenantSQL
	switch {
	case tn.needsDirectory() && tn.SignIn:
		sql = setTenantBothSQL
	case tn.needsDirectory():
		sql = setTenantDirectorySQL
	case tn.SignIn:
		sql = setTenantSignInSQL
	}
	st := stmt{sql: sql, args: []any{idSetting(tn.OrgID), idSetting(tn.ProjectID), idSetting(tn.AgentID), tn.Lookup,
		idsSetting(v.Orgs), idsSetting(v.Projects), idsSetting(v.Agents), idsSetting(v.Users), timeout, t.role, lockTimeout}}
	if t.settings >= 0 && t.settings == len(t.pending)-1 {
		// The timeouts ride with the first settings of the transaction only.
		st.args[8], st.args[10] = t.pending[t.settings].args[8], t.pending[t.settings].args[10]
		t.pending[t.settings] = st
		return
	}
	t.settings = len(t.pending)
	t.pending = append(t.pending, st)
}

// CommitWithNext sends the COMMIT in the same round trip as the transaction's next
// statement, when nothing the caller decides after reading that statement's result may
// undo the transaction (a credential's bind, whose one write is right whatever the
// caller concludes from the row; a read tool's last query). The statement's error, or the
// COMMIT's, comes back from reading its result; the transaction is over afterwards, and a
// statement sent after it fails (ErrCommitted) rather than run without the tenant.
// Without effect when the request carries an idempotency claim (it travels with the
// COMMIT, see Claim).
func (t *Tx) CommitWithNext(ctx context.Context) {
	if claimFrom(ctx) == nil {
		t.commitNext = true
	}
}

// SetLocal sets a setting for the rest of the transaction, sent with the next statement
// (no round trip of its own on plain PostgreSQL). On Citus it is a SET LOCAL, which Citus
// replays on the workers that run the transaction's statements (set_config's value would
// stay on the coordinator).
func (t *Tx) SetLocal(name, value string) {
	if t.citus {
		t.pending = append(t.pending, stmt{sql: setLocalSQL([]string{name}, []string{value}), simple: true})
		return
	}
	t.pending = append(t.pending, stmt{sql: "SELECT set_config($1, $2, true)", args: []any{name, value}})
}

// PreferGenericPlan lets the transaction's next prepared statements keep their cached
// generic plan (plan_cache_mode = force_generic_plan, sent with the next statement), for a
// statement whose planning costs more than its execution whatever its values (the joins'
// row-level security policies). Not on Citus: the coordinator cannot make a generic plan
// of a router query that joins a reference table ("could not create distributed plan"),
// and it plans each execution with its values anyway (under the default plan_cache_mode
// it prices its generic plan out).
func (t *Tx) PreferGenericPlan() {
	if t.citus {
		return
	}
	t.SetLocal("plan_cache_mode", "force_generic_plan")
}

// sendSimple sends the pending statements up to the last simple one, in order, before
// the rest are pipelined: each simple statement costs a round trip of its own (only on
// Citus, where the tenant settings are simple statements).
func (t *Tx) sendSimple(ctx context.Context) error {
	last := -1
	for i, p := range t.pending {
		if p.simple {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	head := t.pending[:last+1]
	t.pending = t.pending[last+1:]
	first := !t.begun
	t.begun = true
	for len(head) > 0 {
		t.trips.Add(1)
		if head[0].simple {
			tag, err := t.conn.Exec(ctx, head[0].sql, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				if first {
					t.markLost(err, false) // the BEGIN goes first, alone
					t.broken = err         // as in send: nothing may run after it
				}
				return fmt.Errorf("pg tx: settings: %w", err)
			}
			first = false
			if head[0].tag != nil {
				*head[0].tag = tag
			}
			head = head[1:]
			continue
		}
		n := 0
		b := &pgx.Batch{}
		for ; n < len(head) && !head[n].simple; n++ {
			b.Queue(head[n].sql, head[n].args...)
		}
		br := t.conn.SendBatch(ctx, b)
		for i := 0; i < n; i++ {
			tag, err := br.Exec()
			if err != nil {
				_ = br.Close() // the first error is the one worth returning
				return fmt.Errorf("pg tx: pipelined statement: %w", err)
			}
			if head[i].tag != nil {
				*head[i].tag = tag
			}
			t.note(head[i].sql, tag)
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("pg tx: pipelined statement: %w", err)
		}
		head = head[n:]
	}
	return nil
}

// send pipelines the pending statements with this one and reads the pending results.
func (t *Tx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if err := t.sendSimple(ctx); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	for _, p := range t.pending {
		b.Queue(p.sql, p.args...)
	}
	b.Queue(sql, args...)
	if t.commitNext {
		b.Queue("COMMIT")
		t.commitNext, t.committed = false, true
	}
	pending := t.pending
	n := len(pending)
	t.pending, t.settings = nil, -1
	first := !t.begun
	t.begun = true
	t.trips.Add(1)
	br := t.conn.SendBatch(ctx, b)
	for i := 0; i < n; i++ {
		tag, err := br.Exec()
		v := pending[i].verify
		if err != nil {
			_ = br.Close() // the first error is the one worth returning
			if v != nil && sqlState(err) == unverified {
				// The check raised: the server ran nothing after it (Verification).
				v.settle(false)
				return nil, fmt.Errorf("pg tx: %w", ErrUnverified)
			}
			if first && i == 0 {
				t.markLost(err, t.committed) // the BEGIN's result: committed says a COMMIT went too
				// Nothing of the batch ran, its BEGIN and settings included (a statement
				// the server refused to prepare fails the batch before it is sent): a
				// statement sent next would run outside any transaction, as the session's
				// role, with no tenant. Every later statement, the COMMIT included, fails.
				t.broken = err
			}
			return nil, fmt.Errorf("pg tx: pipelined statement: %w", err)
		}
		if v != nil {
			// A check of the verification: no row, and nothing else of the batch is read.
			v.settle(tag.RowsAffected() > 0)
			if tag.RowsAffected() == 0 {
				_ = br.Close() // the failed check is the answer
				return nil, fmt.Errorf("pg tx: %w", ErrUnverified)
			}
			continue // not the request's write (see Claim)
		}
		if pending[i].tag != nil {
			*pending[i].tag = tag
		}
		t.note(pending[i].sql, tag)
	}
	return br, nil
}

// ErrRolledBack is a transaction's error when its COMMIT rolled it back: one of its
// statements had failed, and the function that ran them went on without its error.
var ErrRolledBack = errors.New("pg tx: the transaction was rolled back: one of its statements failed")

// ErrCommitted is returned for a statement sent after the transaction committed with an
// earlier one (CommitWithNext): it would run outside the transaction and its tenant.
var ErrCommitted = errors.New("pg tx: statement after the transaction committed")

// Exec implements db.DBTX.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.committed {
		return pgconn.CommandTag{}, ErrCommitted
	}
	if t.broken != nil {
		return pgconn.CommandTag{}, t.errBroken()
	}
	if t.pipelined {
		t.pending = append(t.pending, stmt{sql: sql, args: args, exec: true})
		t.queued = true
		return pgconn.CommandTag{}, nil
	}
	ctx, cancel := t.bound(ctx)
	defer cancel()
	if len(t.pending) == 0 && !t.commitNext {
		t.trips.Add(1)
		tag, err := t.conn.Exec(ctx, sql, args...)
		t.note(sql, tag)
		return tag, err
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	t.note(sql, tag)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query implements db.DBTX.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.committed {
		return nil, ErrCommitted
	}
	rows, br, cancel, err := t.query(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return &batchRows{Rows: rows, br: br, cancel: cancel, tx: t, sql: sql}, nil
}

// QueryRow implements db.DBTX.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.committed {
		return errRow{ErrCommitted}
	}
	rows, br, cancel, err := t.query(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return &batchRow{rows: rows, br: br, cancel: cancel, tx: t, sql: sql}
}

// query sends a statement that returns rows: on its own when nothing is queued, else in
// one batch after the queued writes. br is nil when it went on its own; cancel ends the
// statement's deadline, the caller's to call once the rows are read.
func (t *Tx) query(ctx context.Context, sql string, args []any) (rows pgx.Rows, br pgx.BatchResults, cancel context.CancelFunc, err error) {
	if t.broken != nil {
		return nil, nil, nil, t.errBroken()
	}
	ctx, cancel = t.bound(ctx)
	if len(t.pending) == 0 && !t.commitNext {
		t.trips.Add(1)
		if rows, err = t.conn.Query(ctx, sql, args...); err != nil {
			cancel()
			return nil, nil, nil, err
		}
		return rows, nil, cancel, nil
	}
	if br, err = t.send(ctx, sql, args); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	if rows, err = br.Query(); err != nil {
		_ = br.Close() // the statement's own error is the one worth returning
		cancel()
		return nil, nil, nil, err
	}
	return rows, br, cancel, nil
}

// batchRows closes the batch (when the rows came from one) with the rows, so the
// connection is free again, and ends the statement's deadline.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults // nil when the statement was sent on its own
	cancel context.CancelFunc
	closed bool
	tx     *Tx // whose write the command tag may show (Tx.note)
	sql    string
}

// Next closes the rows once they are exhausted, as pgx's own rows do: a caller that reads
// to the end and checks Err without calling Close leaves no batch open on the connection
// (the COMMIT would find it busy).
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.tx.note(r.sql, r.Rows.CommandTag())
		if r.br != nil {
			_ = r.br.Close() // the rows' own error is reported by Err
		}
		r.cancel()
	}
}

// batchRow is pgx's QueryRow over rows, so the command tag can be read (Tx.note).
type batchRow struct {
	rows   pgx.Rows
	br     pgx.BatchResults // nil when the statement was sent on its own
	cancel context.CancelFunc
	tx     *Tx
	sql    string
}

func (r *batchRow) Scan(dest ...any) error {
	defer r.cancel()
	err := scanOne(r.rows, dest)
	r.tx.note(r.sql, r.rows.CommandTag())
	if r.br == nil {
		return err
	}
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// scanOne is pgx's QueryRow semantics: the first row or ErrNoRows, the rows closed.
func scanOne(rows pgx.Rows, dest []any) error {
	defer rows.Close()
	if !rows.Next() {
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// ErrNoRows is pgx's, re-exported so domain packages can test for it without pgx.
var ErrNoRows = pgx.ErrNoRows

// IsNoRows reports whether err means a query found nothing.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
