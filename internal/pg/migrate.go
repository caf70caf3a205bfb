package pg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers the pgx5:// driver
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

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

func migrator(dbURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(sqlfiles.Migrations(), ".")
	if err != nil {
		return nil, fmt.Errorf("migrate: source: %w", err)
	}
	u, err := ParseURL(dbURL)
	if err != nil {
		return nil, fmt.Errorf("migrate: DATABASE_URL %w", err)
	}
	u.Scheme = "pgx5"
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	m.LockTimeout = MigrateLockTimeout
	return m, nil
}

// MigrateLockTimeout is how long a replica starting while another migrates waits for it.
// Opening the migrator already waits for the lock without a limit (the pgx driver takes
// it to create its version table), but a replica that opened just before another took
// the lock waits again in Up, where golang-migrate's default of 15 s is shorter than a
// migration that builds an index over a large table: it would exit instead of serving
// once the migration is done.
const MigrateLockTimeout = 30 * time.Minute

// MigrateUp applies every pending migration. golang-migrate takes an advisory lock, so
// replicas starting together migrate once: the others wait for it (MigrateLockTimeout).
func MigrateUp(dbURL string) error {
	m, err := migrator(dbURL)
	if err != nil {
		return err
	}
	defer closeMigrator(m)
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrateDown reverts n migrations (all of them when n <= 0).
func MigrateDown(dbURL string, n int) error {
	m, err := migrator(dbURL)
	if err != nil {
		return err
	}
	defer closeMigrator(m)
	if n <= 0 {
		err = m.Down()
	} else {
		err = m.Steps(-n)
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

func closeMigrator(m *migrate.Migrate) {
	_, _ = m.Close() // both errors are about closing connections after the work is done
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
	err = d.Ops.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations LIMIT 1").Scan(&v, &st.Dirty)
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
	conn, err := pgx.Connect(ctx, dbURL)
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
