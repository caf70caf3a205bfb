// Package pgtest gives each test its own real Postgres database, cloned from a template
// that is migrated once per migration set (shared by every test binary of a run), so
// tests run in parallel without seeing each other's rows.
//
// When DATABASE_URL names a Citus coordinator (its database has the citus extension and
// registered workers: deploy/citus/cluster.sh start), the template is a distributed
// database: made on every node, migrated and distributed once (`relayroom migrate
// citus`), and each test's database is cloned from it on every node under the same name.
// The clones are consistent: each node copies its own part (the coordinator its metadata
// and reference tables, each worker its shards and metadata), and Citus reaches a
// database's shards on the workers by the database's own name.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	// Workers first, the coordinator last: its database is the one that is used.
	nodes := nodeURLs(t, ctx, base)
	for i := len(nodes) - 1; i >= 0; i-- {
		clone(t, ctx, nodes[i], name, tpl)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			drop(t, n, name)
		}
	})
	return withDatabase(t, base, name)
}

// objectInUse is the SQLSTATE of "database … is being accessed by other users".
const objectInUse = "55006"

// drop drops the database name on server. FORCE terminates the database's backends and
// waits 5 s for them to exit; on a Citus worker those are the coordinator's connections
// to it, which end only as the coordinator's own backends (terminated by the drop there
// just before) wind down, and on a loaded machine that can take longer: the drop is then
// tried again.
func drop(t testing.TB, server, name string) {
	t.Helper()
	ctx := context.Background()
	c := connect(t, ctx, server)
	defer c.Close(ctx)
	var err error
	for attempt := 0; attempt < 12; attempt++ {
		_, err = c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != objectInUse {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Errorf("pgtest: drop %s on %s: %v", name, redactURL(server), err)
	}
}

func clone(t testing.TB, ctx context.Context, server, name, tpl string) {
	t.Helper()
	admin := connect(t, ctx, server)
	defer admin.Close(ctx)
	// Concurrent clones of one template are fine; the template has no open connections.
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl))
		if err == nil {
			return
		}
		// "source database is being accessed by other users": another process is still
		// closing its connection to the template.
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pgtest: create database from template: %v", err)
}

// nodeURLs returns base itself, then, when it is a Citus coordinator, the base database
// of each worker registered in it (same credentials).
func nodeURLs(t testing.TB, ctx context.Context, base string) []string {
	t.Helper()
	nodes, err := pg.CitusNodes(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return nodes
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

// NewEmpty creates an empty database (for migration round trips) and returns its URL. On
// a Citus coordinator it is a plain database on the coordinator alone.
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
	nodes := nodeURLs(t, ctx, base)
	for _, n := range nodes {
		c := connect(t, ctx, n)
		for _, q := range []string{
			fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name),
			"CREATE DATABASE " + name,
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("pgtest: template on %s: %s: %v", redactURL(n), q, err)
			}
		}
		_ = c.Close(ctx)
	}
	tplURL := withDatabase(t, base, name)
	if len(nodes) > 1 {
		if err := pg.MakeCitusDatabase(ctx, nodes, name); err != nil {
			t.Fatalf("pgtest: template: %v", err)
		}
	}
	if _, err := pg.MigrateUp(ctx, tplURL); err != nil {
		t.Fatalf("pgtest: migrate template: %v", err)
	}
	// River's schema (its own, "river"), as the service migrates it on start.
	if err := jobs.MigrateUp(ctx, tplURL); err != nil {
		t.Fatalf("pgtest: migrate template (river): %v", err)
	}
	if len(nodes) > 1 {
		// Few shards: a test database holds a handful of tenants, and every clone and
		// every drop copies each shard.
		if _, err := pg.Distribute(ctx, tplURL, pg.CitusOptions{ShardCount: citusTestShards}); err != nil {
			t.Fatalf("pgtest: distribute template: %v", err)
		}
	}
	for _, n := range nodes {
		c := connect(t, ctx, n)
		// No connection may stay on a template: Citus's maintenance daemon (one per
		// database on every node) would hold it open, so connections are refused first
		// and the daemon ended.
		for _, q := range []string{
			fmt.Sprintf("ALTER DATABASE %s WITH is_template true ALLOW_CONNECTIONS false", name),
			fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'", name),
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("pgtest: mark template on %s: %v", redactURL(n), err)
			}
		}
		_ = c.Close(ctx)
	}
	return name
}

// citusTestShards is the shard count of the test template's co-location groups.
const citusTestShards = 4

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
