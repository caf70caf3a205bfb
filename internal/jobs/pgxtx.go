package jobs

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayroom/relayroom/internal/pg"
)

// PgxTx lets River insert jobs in a transaction of pg.DB.Operator: River takes a pgx.Tx,
// and pg.Tx runs its own BEGIN/COMMIT. Only statements pass through; the transaction's
// owner still commits or rolls back. Tenant transactions cannot enqueue jobs: the request
// role has no grant on schema river (they write their own outbox rows instead, as wakes do).
func PgxTx(tx *pg.Tx) pgx.Tx { return pgTx{tx} }

type pgTx struct{ tx *pg.Tx }

var errNotHere = errors.New("jobs: not available on a pg.Tx (its owner controls the transaction)")

func (t pgTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNotHere }
func (t pgTx) Commit(context.Context) error          { return errNotHere }
func (t pgTx) Rollback(context.Context) error        { return errNotHere }
func (t pgTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errNotHere
}
func (t pgTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return errBatch{} }
func (t pgTx) LargeObjects() pgx.LargeObjects                         { return pgx.LargeObjects{} }
func (t pgTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, errNotHere
}
func (t pgTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.tx.Exec(ctx, sql, args...)
}
func (t pgTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}
func (t pgTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}
func (t pgTx) Conn() *pgx.Conn { return nil }

// errBatch answers every read of a batch with errNotHere (pg.Tx pipelines on its own).
type errBatch struct{}

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errNotHere }
func (errBatch) Query() (pgx.Rows, error)         { return nil, errNotHere }
func (errBatch) QueryRow() pgx.Row                { return errRow{} }
func (errBatch) Close() error                     { return errNotHere }
func (errBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{}

func (errRow) Scan(...any) error { return errNotHere }
