// Package pg owns the connection pools and the tenant-scoped transaction every request
// runs in. It is the only package besides the domain packages that imports db.
package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// AppRole is the role requests run as: it owns no table and cannot bypass RLS.
const AppRole = "relayroom_app"

// DB holds two pools on one database. App switches every connection to AppRole, so RLS
// holds whatever credentials DATABASE_URL carries. Ops keeps the connecting role (the
// owner that ran the migrations) for the admin CLI and sweeps that span tenants.
type DB struct {
	App *pgxpool.Pool
	Ops *pgxpool.Pool
	// StatementTimeout bounds every statement of a tenant transaction.
	StatementTimeout time.Duration
}

// Options tune the pools.
type Options struct {
	MaxConns         int32
	OpsMaxConns      int32
	StatementTimeout time.Duration
}

// Open connects both pools. The vector extension must exist (run migrations first), since
// its types are registered on every new connection.
func Open(ctx context.Context, url string, opt Options) (*DB, error) {
	if opt.StatementTimeout <= 0 {
		opt.StatementTimeout = 5 * time.Second
	}
	appCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pg open: parse DATABASE_URL: %w", err)
	}
	if opt.MaxConns > 0 {
		appCfg.MaxConns = opt.MaxConns
	}
	appCfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "SET ROLE "+AppRole); err != nil {
			return fmt.Errorf("pg connect: switch to %s (run migrations first): %w", AppRole, err)
		}
		return registerTypes(ctx, c)
	}
	opsCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pg open: parse DATABASE_URL: %w", err)
	}
	opsCfg.MaxConns = 4
	if opt.OpsMaxConns > 0 {
		opsCfg.MaxConns = opt.OpsMaxConns
	}
	opsCfg.AfterConnect = registerTypes

	app, err := pgxpool.NewWithConfig(ctx, appCfg)
	if err != nil {
		return nil, fmt.Errorf("pg open: app pool: %w", err)
	}
	ops, err := pgxpool.NewWithConfig(ctx, opsCfg)
	if err != nil {
		app.Close()
		return nil, fmt.Errorf("pg open: ops pool: %w", err)
	}
	return &DB{App: app, Ops: ops, StatementTimeout: opt.StatementTimeout}, nil
}

func registerTypes(ctx context.Context, c *pgx.Conn) error {
	if err := pgxvec.RegisterTypes(ctx, c); err != nil {
		return fmt.Errorf("pg connect: register vector types: %w", err)
	}
	return nil
}

// Close closes both pools.
func (d *DB) Close() {
	d.App.Close()
	d.Ops.Close()
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
	// Lookup is the public id part of a credential under verification.
	Lookup string
}

func idSetting(id uuid.UUID) string {
	if id == uuid.Nil {
		return ""
	}
	return id.String()
}

const setTenantSQL = `SELECT set_config('app.org_id', $1, true), set_config('app.project_id', $2, true),
 set_config('app.agent_id', $3, true), set_config('app.lookup', $4, true)`

// InTenant runs fn in a transaction whose RLS tenant is t. BEGIN, the tenant settings and
// the statement timeout go to the server in one pipelined round trip; the settings are
// transaction-local, so nothing leaks to the next user of the pooled connection.
// fn's error is returned as is; the transaction commits only when fn returns nil.
func (d *DB) InTenant(ctx context.Context, t Tenant, fn func(tx *Tx) error) error {
	return d.inTx(ctx, d.App, t, fn)
}

// Operator runs fn in a transaction on the owner's pool (admin CLI, cross-tenant sweeps).
func (d *DB) Operator(ctx context.Context, fn func(tx *Tx) error) error {
	return d.inTx(ctx, d.Ops, Tenant{}, fn)
}

func (d *DB) inTx(ctx context.Context, pool *pgxpool.Pool, t Tenant, fn func(tx *Tx) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pg tx: acquire: %w", err)
	}
	tx := &Tx{conn: conn}
	defer func() {
		if p := recover(); p != nil {
			tx.abort(ctx)
			panic(p)
		}
	}()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(setTenantSQL, idSetting(t.OrgID), idSetting(t.ProjectID), idSetting(t.AgentID), t.Lookup)
	b.Queue("SELECT set_config('statement_timeout', $1, true)", fmt.Sprintf("%dms", d.StatementTimeout.Milliseconds()))
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		tx.abort(ctx)
		return fmt.Errorf("pg tx: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.abort(ctx)
		return err
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		tx.abort(ctx)
		return fmt.Errorf("pg tx: commit: %w", err)
	}
	conn.Release()
	return nil
}

// Tx is one transaction on one pooled connection. It satisfies db.DBTX.
type Tx struct {
	conn *pgxpool.Conn
}

// abort rolls back even when ctx is already canceled; a connection that cannot roll back
// is closed so the pool never hands out a connection inside a failed transaction.
func (t *Tx) abort(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := t.conn.Exec(rctx, "ROLLBACK"); err != nil {
		_ = t.conn.Conn().Close(rctx) // the connection is discarded either way
	}
	t.conn.Release()
}

// SetTenant changes the RLS tenant for the rest of the transaction (used once a credential
// has been verified and the tenant it names is known).
func (t *Tx) SetTenant(ctx context.Context, tn Tenant) error {
	if _, err := t.conn.Exec(ctx, setTenantSQL, idSetting(tn.OrgID), idSetting(tn.ProjectID), idSetting(tn.AgentID), tn.Lookup); err != nil {
		return fmt.Errorf("pg set tenant: %w", err)
	}
	return nil
}

// Exec implements db.DBTX.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Query implements db.DBTX.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow implements db.DBTX.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// SendBatch runs several statements in one round trip.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// ErrNoRows is pgx's, re-exported so domain packages can test for it without pgx.
var ErrNoRows = pgx.ErrNoRows

// IsNoRows reports whether err means a query found nothing.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
