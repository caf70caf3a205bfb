package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestMigrationsRoundTrip applies every migration, reverts all of them, and applies them
// again: each down must undo its up completely, or the second up fails.
func TestMigrationsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.NewEmpty(t)
	latest, err := pg.LatestMigration()
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.MigrateUp(u); err != nil {
		t.Fatalf("first up: %v", err)
	}
	st, err := pg.StatusURL(ctx, u)
	if err != nil || !st.UpToDate() || st.Current != latest {
		t.Fatalf("after up: %+v, %v", st, err)
	}
	if err := pg.MigrateDown(u, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r','v','m','S','p') AND c.relname <> 'schema_migrations'`)
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if len(left) > 0 {
		t.Fatalf("down left objects behind: %v", left)
	}
	if err := pg.MigrateUp(u); err != nil {
		t.Fatalf("second up: %v", err)
	}
	st, err = pg.StatusURL(ctx, u)
	if err != nil || !st.UpToDate() {
		t.Fatalf("after second up: %+v, %v", st, err)
	}
}

// TestMigrateUpWaitsForAnotherReplicasMigration: a replica that starts while another holds
// the migration lock (a migration building an index can take minutes) waits for it and
// then finds nothing to do, instead of failing after golang-migrate's default 15 s.
func TestMigrateUpWaitsForAnotherReplicasMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.New(t)
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	// The lock golang-migrate's pgx driver takes: named by the database (as the URL's path
	// gives it, with its slash), the schema and the migrations table.
	var dbName string
	if err := holder.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	id, err := database.GenerateAdvisoryLockId("/"+dbName, "public", "schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pg.MigrateUp(u) }()
	// Past golang-migrate's own timeout, the second replica must still be waiting.
	select {
	case err := <-done:
		t.Fatalf("MigrateUp returned while another replica held the lock: %v", err)
	case <-time.After(migrate.DefaultLockTimeout + 2*time.Second):
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, id); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("MigrateUp after the lock was released: %v", err)
	}
}
