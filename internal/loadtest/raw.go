package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rawRows is how many rows the raw read loop picks from.
const rawRows = 10000

// Raw is the baseline the tools are compared with: plain pgx transactions on the same
// database, from as many connections as the tools get clients, with no HTTP, no JSON and
// no row-level security in the way.
type Raw struct {
	pool *pgxpool.Pool
	ids  []uuid.UUID
}

// OpenRaw creates the baseline's own table in the (scratch) database and fills it.
func OpenRaw(ctx context.Context, dbURL string, conns int) (*Raw, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns, cfg.MinConns = int32(conns), int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r := &Raw{pool: pool, ids: make([]uuid.UUID, rawRows)}
	for i := range r.ids {
		r.ids[i] = uuid.Must(uuid.NewV7())
	}
	for _, stmt := range []string{
		"DROP TABLE IF EXISTS loadtest_raw",
		"CREATE TABLE loadtest_raw (id uuid PRIMARY KEY, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			pool.Close()
			return nil, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	if _, err := pool.Exec(ctx, "INSERT INTO loadtest_raw (id, body) SELECT id, 'row ' || id FROM unnest($1::uuid[]) AS u(id)", r.ids); err != nil {
		pool.Close()
		return nil, fmt.Errorf("fill loadtest_raw: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE loadtest_raw"); err != nil {
		pool.Close()
		return nil, err
	}
	return r, nil
}

// Close closes the baseline's pool.
func (r *Raw) Close() { r.pool.Close() }

// Read is BEGIN; one primary-key read; COMMIT.
func (r *Raw) Read(ctx context.Context, _, _ int) error {
	id := r.ids[rand.IntN(len(r.ids))]
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var body string
		return tx.QueryRow(ctx, "SELECT body FROM loadtest_raw WHERE id = $1", id).Scan(&body)
	})
}

// Insert is BEGIN; one INSERT; COMMIT.
func (r *Raw) Insert(ctx context.Context, _, _ int) error {
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO loadtest_raw (id, body) VALUES ($1, $2)", uuid.Must(uuid.NewV7()), "a raw insert of the baseline loop")
		return err
	})
}
