package pg_test

import (
	"context"
	"testing"

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
