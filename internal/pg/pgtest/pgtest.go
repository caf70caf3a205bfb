// Package pgtest gives each test its own real Postgres database, cloned from a template
// that is migrated once per migration set (shared by every test binary of a run), so
// tests run in parallel without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	sqlfiles "github.com/relayroom/relayroom/sql"
)

// BaseURL is the server that holds the test databases (make test starts it).
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		t.Fatal("DATABASE_URL is not set: run the tests with `make test`, which starts a private Postgres with pgvector")
	}
	return u
}

// New creates a fresh, migrated database for this test and returns its URL; it is dropped
// when the test ends.
func New(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	base := BaseURL(t)
	tpl := ensureTemplate(t, ctx, base)
	name := "t_" + randomHex(8)
	admin := connect(t, ctx, base)
	defer admin.Close(ctx)
	// Concurrent clones of one template are fine; the template has no open connections.
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl))
		if err == nil {
			break
		}
		// "source database is being accessed by other users": another process is still
		// closing its connection to the template.
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pgtest: create database from template: %v", err)
	}
	t.Cleanup(func() {
		c := connect(t, context.Background(), base)
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(t, base, name)
}

// Open returns pools on a fresh database.
func Open(t testing.TB) (*pg.DB, string) {
	t.Helper()
	u := New(t)
	d, err := pg.Open(context.Background(), u, pg.Options{MaxConns: 8, OpsMaxConns: 2})
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(d.Close)
	return d, u
}

// NewEmpty creates an empty database (for migration round trips) and returns its URL.
func NewEmpty(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	base := BaseURL(t)
	name := "t_" + randomHex(8)
	admin := connect(t, ctx, base)
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		c := connect(t, context.Background(), base)
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDatabase(t, base, name)
}

// ensureTemplate migrates the template for the current migration set once; other test
// processes wait on the advisory lock and reuse it.
func ensureTemplate(t testing.TB, ctx context.Context, base string) string {
	t.Helper()
	name := "rr_tpl_" + migrationsHash(t)
	admin := connect(t, ctx, base)
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(727401)"); err != nil {
		t.Fatalf("pgtest: lock: %v", err)
	}
	defer func() { _, _ = admin.Exec(ctx, "SELECT pg_advisory_unlock(727401)") }()
	var ready bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ready); err != nil {
		t.Fatalf("pgtest: check template: %v", err)
	}
	if ready {
		return name
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
		t.Fatalf("pgtest: drop stale template: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create template: %v", err)
	}
	if err := pg.MigrateUp(withDatabase(t, base, name)); err != nil {
		t.Fatalf("pgtest: migrate template: %v", err)
	}
	// River's schema (its own, "river"), as the service migrates it on start.
	if err := jobs.MigrateUp(ctx, withDatabase(t, base, name)); err != nil {
		t.Fatalf("pgtest: migrate template (river): %v", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH is_template true", name)); err != nil {
		t.Fatalf("pgtest: mark template: %v", err)
	}
	return name
}

func migrationsHash(t testing.TB) string {
	h := sha256.New()
	err := fs.WalkDir(sqlfiles.Migrations(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sqlfiles.Migrations(), p)
		if err != nil {
			return err
		}
		h.Write([]byte(p))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatalf("pgtest: hash migrations: %v", err)
	}
	fmt.Fprintf(h, "river:%d", jobs.LatestVersion())
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func connect(t testing.TB, ctx context.Context, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redactURL(u), err)
	}
	return c
}

func withDatabase(t testing.TB, base, name string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: parse DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
