package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	sqlfiles "github.com/relayroom/relayroom/sql"
)

// MigrationStatus is where a database stands against the migrations built into the binary.
type MigrationStatus struct {
	Current uint `json:"current"`
	Latest  uint `json:"latest"`
	Dirty   bool `json:"dirty"`
}

// UpToDate reports whether the schema is exactly the binary's.
func (s MigrationStatus) UpToDate() bool { return !s.Dirty && s.Current == s.Latest }

// migrator opens golang-migrate on its own connection, opened under ctx and bounded by
// DefaultConnectTimeout: the driver's URL form connects without either, and a database
// that accepted TCP without answering held serve forever, deaf to SIGTERM. Opening it
// ourselves also keeps the URL out of the driver's errors, which quoted it, password
// included.
func migrator(ctx context.Context, dbURL string) (*migrate.Migrate, *sql.DB, error) {
	src, err := iofs.New(sqlfiles.Migrations(), ".")
	if err != nil {
		return nil, nil, fmt.Errorf("migrate: source: %w", err)
	}
	u, err := ParseURL(dbURL)
	if err != nil {
		return nil, nil, fmt.Errorf("migrate: DATABASE_URL %w", err)
	}
	cfg, err := ConnConfig(dbURL)
	if err != nil {
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close() // nothing was opened that needs reporting
		return nil, nil, fmt.Errorf("migrate: connect: %w", err)
	}
	// The database name as the driver's URL form gives it, slash included: it names the
	// advisory lock that serialises replicas' migrations, and a replica of an older build
	// (which opened the driver by URL) must take the same lock.
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{DatabaseName: u.Path})
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("migrate: connect: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	m.LockTimeout = MigrateLockTimeout
	return m, db, nil
}

// MigrateLockTimeout is how long a replica starting while another migrates waits for it.
// Opening the migrator already waits for the lock without a limit (the pgx driver takes
// it to create its version table), but a replica that opened just before another took
// the lock waits again in Up, where golang-migrate's default of 15 s is shorter than a
// migration that builds an index over a large table: it would exit instead of serving
// once the migration is done.
const MigrateLockTimeout = 30 * time.Minute

// MigrateStopWait is how long a cancelled migration run is given to finish the migration
// in progress (golang-migrate stops between two, leaving the schema clean) before the
// caller gets its error anyway: what remains then is a wait for a lock or a connection.
const MigrateStopWait = 10 * time.Second

// Migrated is what a migration run did.
type Migrated struct {
	From, To uint
}

// MigrateUp applies every pending migration. golang-migrate takes an advisory lock, so
// replicas starting together migrate once: the others wait for it (MigrateLockTimeout).
func MigrateUp(ctx context.Context, dbURL string) (Migrated, error) {
	return runMigrator(ctx, dbURL, "migrate up", func(m *migrate.Migrate) error { return m.Up() })
}

// MigrateDown reverts n migrations (all of them when n <= 0).
func MigrateDown(ctx context.Context, dbURL string, n int) (Migrated, error) {
	return runMigrator(ctx, dbURL, "migrate down", func(m *migrate.Migrate) error {
		if n <= 0 {
			return m.Down()
		}
		return m.Steps(-n)
	})
}

// MigrateForce records version v as applied and clean without running anything: the way
// out of a dirty schema (a migration that failed half-way), once someone has finished or
// undone by hand what it did (docs/upgrades.md).
func MigrateForce(ctx context.Context, dbURL string, v uint) (Migrated, error) {
	latest, err := LatestMigration()
	if err != nil {
		return Migrated{}, err
	}
	if v > latest {
		return Migrated{}, fmt.Errorf("migrate force: version %d is past this build's latest, %d", v, latest)
	}
	version := int(v)
	if v == 0 {
		// Nothing applied (the version before a first migration that failed half-way).
		// golang-migrate has no version 0: forced, it was recorded as one, and every `up`
		// then failed "no migration found for version 0".
		version = database.NilVersion
	}
	return runMigrator(ctx, dbURL, "migrate force", func(m *migrate.Migrate) error { return m.Force(version) })
}

// runMigrator runs fn under ctx. Cancelled, the run stops after the migration in
// progress, leaving the schema clean; the caller waits for that at most MigrateStopWait,
// since what remains then is a wait for a lock or a connection.
func runMigrator(ctx context.Context, dbURL, what string, fn func(*migrate.Migrate) error) (Migrated, error) {
	type result struct {
		m   Migrated
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := migrateRun(ctx, dbURL, what, fn)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		return r.m, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		return r.m, r.err
	case <-time.After(MigrateStopWait):
		return Migrated{}, fmt.Errorf("%s: %w (gave up waiting for the database)", what, ctx.Err())
	}
}

func migrateRun(ctx context.Context, dbURL, what string, fn func(*migrate.Migrate) error) (Migrated, error) {
	m, db, err := migrator(ctx, dbURL)
	if err != nil {
		return Migrated{}, err
	}
	defer closeMigrator(m, db)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			m.GracefulStop <- true // buffered: golang-migrate reads it between two migrations
		case <-finished:
		}
	}()
	var out Migrated
	if out.From, err = version(m); err != nil {
		return out, fmt.Errorf("%s: %w", what, err)
	}
	err = fn(m)
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return out, fmt.Errorf("%s: %w", what, err)
	}
	if out.To, err = version(m); err != nil {
		return out, fmt.Errorf("%s: %w", what, err)
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("%s: stopped at version %d: %w", what, out.To, err)
	}
	return out, nil
}

// version is the schema's version, 0 for none.
func version(m *migrate.Migrate) (uint, error) {
	v, _, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read version: %w", err)
	}
	return v, nil
}

func closeMigrator(m *migrate.Migrate, db *sql.DB) {
	// Both errors are about closing connections after the work is done; the driver's
	// Close closes db too, and closing it again is harmless.
	_, _ = m.Close()
	_ = db.Close()
}

// LatestMigration is the highest migration version built into the binary.
func LatestMigration() (uint, error) {
	entries, err := fs.ReadDir(sqlfiles.Migrations(), ".")
	if err != nil {
		return 0, fmt.Errorf("migrations: list: %w", err)
	}
	var versions []int
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".up.sql") {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return 0, fmt.Errorf("migrations: bad file name %q: %w", e.Name(), err)
		}
		versions = append(versions, n)
	}
	if len(versions) == 0 {
		return 0, errors.New("migrations: none embedded")
	}
	sort.Ints(versions)
	return uint(versions[len(versions)-1]), nil
}

// Status reads the schema version. It uses the ops pool: schema_migrations is not a
// tenant table and the request role has no grant on it.
func (d *DB) Status(ctx context.Context) (MigrationStatus, error) {
	latest, err := LatestMigration()
	if err != nil {
		return MigrationStatus{}, err
	}
	st := MigrationStatus{Latest: latest}
	var v int64
	// In a transaction of its own, so that a pooled connection found dead is replaced
	// (DB.inTx) instead of failing the readiness probe that asks.
	err = d.Operator(ctx, func(tx *Tx) error {
		return tx.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations LIMIT 1").Scan(&v, &st.Dirty)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	st.Current = uint(v)
	return st, nil
}

// StatusURL reads the schema version without opening pools (for `relayroom migrate status`
// on a database that may not be migrated at all).
func StatusURL(ctx context.Context, dbURL string) (MigrationStatus, error) {
	latest, err := LatestMigration()
	if err != nil {
		return MigrationStatus{}, err
	}
	st := MigrationStatus{Latest: latest}
	conn, err := Connect(ctx, dbURL)
	if err != nil {
		return st, fmt.Errorf("migration status: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	if !exists {
		return st, nil
	}
	var v int64
	err = conn.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations LIMIT 1").Scan(&v, &st.Dirty)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("migration status: %w", err)
	}
	st.Current = uint(v)
	return st, nil
}
