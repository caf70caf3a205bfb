package pg_test

import (
	"context"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	sqlfiles "github.com/relayroom/relayroom/sql"
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
	if _, err := pg.MigrateUp(ctx, u); err != nil {
		t.Fatalf("first up: %v", err)
	}
	st, err := pg.StatusURL(ctx, u)
	if err != nil || !st.UpToDate() || st.Current != latest {
		t.Fatalf("after up: %+v, %v", st, err)
	}
	if _, err := pg.MigrateDown(ctx, u, 0); err != nil {
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
	if _, err := pg.MigrateUp(ctx, u); err != nil {
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
	go func() {
		_, err := pg.MigrateUp(ctx, u)
		done <- err
	}()
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

// firstSingleStatementMigration is the first migration held to one statement: a file of
// several statements with DDL applied to a Citus coordinator whose tables are distributed
// already is refused ("cannot insert multiple commands into a prepared statement";
// docs/scale.md). TestCitusLaterMigrations shows it on a Citus cluster; this catches it
// in the plain suite, before a cluster is at hand. Earlier files are as they shipped.
const firstSingleStatementMigration = 52

// TestMigrationsAreOneStatementEach: every migration from firstSingleStatementMigration
// on, up and down, is a single statement (several go in a DO block).
func TestMigrationsAreOneStatementEach(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(sqlfiles.Migrations(), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("%v %v", files, err)
	}
	for _, name := range files {
		n, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil || n < firstSingleStatementMigration {
			continue
		}
		raw, err := fs.ReadFile(sqlfiles.Migrations(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := statements(string(raw)); got != 1 {
			t.Errorf("%s holds %d statements, want 1 (put several in a DO block, the DDL through EXECUTE: docs/scale.md)", name, got)
		}
	}
	t.Run("the counter sees through comments and dollar quotes", func(t *testing.T) {
		for sql, want := range map[string]int{
			"-- a; b\nSELECT 1;":                       1,
			"SELECT 1; SELECT 2;":                      2,
			"DO $$ BEGIN x; y; END $$;":                1,
			"CREATE FUNCTION f() AS $fn$ a; b $fn$;\n": 1,
			"SELECT 'a;b';":                            1,
		} {
			if got := statements(sql); got != want {
				t.Errorf("statements(%q) = %d, want %d", sql, got, want)
			}
		}
	})
}

// statements counts the statements of a migration: its semicolons outside comments,
// string literals and dollar-quoted bodies, and a last statement without one.
func statements(sql string) int {
	n, pending := 0, false
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '\'':
			for i++; i < len(sql) && sql[i] != '\''; i++ {
			}
			pending = true
		case c == '$':
			end := strings.IndexByte(sql[i+1:], '$')
			if end < 0 {
				pending = true
				continue
			}
			tag := sql[i : i+end+2]
			close := strings.Index(sql[i+len(tag):], tag)
			if close < 0 {
				return -1 // an unterminated body: not a migration that applies
			}
			i += len(tag) + close + len(tag) - 1
			pending = true
		case c == ';':
			n, pending = n+1, false
		case c != ' ' && c != '\n' && c != '\t' && c != '\r':
			pending = true
		}
	}
	if pending {
		n++
	}
	return n
}

// TestASilentDatabaseDoesNotHoldTheProcess: a server that accepts TCP and never answers
// (a stopped VM behind a proxy, a firewall dropping packets) held serve's migration
// forever, deaf to SIGTERM, and the admin commands too.
func TestASilentDatabaseDoesNotHoldTheProcess(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn // accepted and never answered
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	u := "postgres://postgres@" + ln.Addr().String() + "/relayroom?sslmode=disable"
	t.Run("a cancelled migration returns", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		if _, err := pg.MigrateUp(ctx, u); err == nil {
			t.Fatal("migrated a database that never answered")
		}
	})
	t.Run("a connection without connect_timeout gives up by itself", func(t *testing.T) {
		t.Parallel()
		cfg, err := pg.ConnConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ConnectTimeout != pg.DefaultConnectTimeout {
			t.Fatalf("connect timeout %v", cfg.ConnectTimeout)
		}
		if _, err := pg.StatusURL(context.Background(), u); err == nil {
			t.Fatal("read the status of a database that never answered")
		}
	})
	t.Run("the URL's connect_timeout is kept", func(t *testing.T) {
		t.Parallel()
		cfg, err := pg.ConnConfig(u + "&connect_timeout=3")
		if err != nil || cfg.ConnectTimeout != 3*time.Second {
			t.Fatalf("%v %v", cfg, err)
		}
	})
}
