package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// migrateLock serialises River migrations of replicas starting together (rivermigrate
// takes no lock of its own).
const migrateLock = 727402

// LatestVersion is River's newest schema version built into the binary (part of the test
// template's identity).
func LatestVersion() int {
	m, err := rivermigrate.New(riverpgxv5.New(nil), &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return 0
	}
	all := m.AllVersions()
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// MigrateUp creates schema river when missing and applies River's pending migrations. Run
// it after the service's own migrations, as the owning role.
func MigrateUp(ctx context.Context, dbURL string) error {
	return withMigrator(ctx, dbURL, func(pool *pgxpool.Pool, m *rivermigrate.Migrator[pgx.Tx]) error {
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("river migrate up: %w", err)
		}
		return nil
	}, true)
}

// MigrateDown removes River's tables and schema river: everything MigrateUp made. Jobs not
// yet run are lost with them.
func MigrateDown(ctx context.Context, dbURL string) error {
	return withMigrator(ctx, dbURL, func(pool *pgxpool.Pool, m *rivermigrate.Migrator[pgx.Tx]) error {
		var exists bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass('river.river_migration') IS NOT NULL").Scan(&exists); err != nil {
			return fmt.Errorf("river migrate down: %w", err)
		}
		if exists {
			if _, err := m.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
				return fmt.Errorf("river migrate down: %w", err)
			}
		}
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+Schema); err != nil {
			return fmt.Errorf("river migrate down: drop schema: %w", err)
		}
		return nil
	}, false)
}

func withMigrator(ctx context.Context, dbURL string, fn func(*pgxpool.Pool, *rivermigrate.Migrator[pgx.Tx]) error, create bool) (err error) {
	cfg, err := pg.PoolConfig(dbURL)
	if err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("river migrate: connect: %w", err)
	}
	defer pool.Close()
	lock, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river migrate: connect: %w", err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		return fmt.Errorf("river migrate: lock: %w", err)
	}
	defer func() {
		if _, uerr := lock.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLock); uerr != nil {
			err = errors.Join(err, fmt.Errorf("river migrate: unlock: %w", uerr))
		}
	}()
	if create {
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema); err != nil {
			return fmt.Errorf("river migrate: create schema: %w", err)
		}
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return fn(pool, m)
}
