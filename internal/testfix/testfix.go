// Package testfix is the tests' one fixture: a Bundle (a fresh real database seeded from
// an admin file, with the resolver and the operator's helpers) and factories for what
// tests seed most (the usual cast of two projects, the shared secret detector, a part's
// scope). Tests of every package build their setup from it instead of copying one.
package testfix

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// PublicURL is the base of the URLs the seeding prints (none is ever fetched).
const PublicURL = "http://x.test"

// Bundle is one test's database, seeded.
type Bundle struct {
	DB       *pg.DB
	URL      string       // the database's URL (for a second pool or a server under test)
	Result   admin.Result // keys, connect codes and ids of what the file created
	Resolver *tenancy.Resolver
}

// Options shape the bundle's pools; zero values are pgtest.Open's.
type Options struct {
	MaxConns, OpsMaxConns int32
}

// Seed opens a fresh database and applies an admin file (YAML) to it.
func Seed(t testing.TB, file string) *Bundle {
	t.Helper()
	return SeedWith(t, file, Options{})
}

// SeedWith is Seed with pools of the given sizes.
func SeedWith(t testing.TB, file string, o Options) *Bundle {
	t.Helper()
	var (
		d   *pg.DB
		url string
	)
	if o == (Options{}) {
		d, url = pgtest.Open(t)
	} else {
		url = pgtest.New(t)
		var err error
		if d, err = pg.Open(context.Background(), url, pg.Options{MaxConns: o.MaxConns, OpsMaxConns: o.OpsMaxConns}); err != nil {
			t.Fatalf("testfix: open: %v", err)
		}
		t.Cleanup(d.Close)
	}
	f, err := admin.ParseFile(strings.NewReader(file))
	if err != nil {
		t.Fatalf("testfix: admin file: %v", err)
	}
	res, err := admin.New(d, PublicURL).Apply(context.Background(), f, admin.Options{})
	if err != nil {
		t.Fatalf("testfix: apply: %v", err)
	}
	return &Bundle{DB: d, URL: url, Result: res, Resolver: tenancy.NewResolver(d)}
}

// PartScope resolves the threads scope of agent (org/slug) as part of project, the way
// the threads endpoint does.
func (b *Bundle) PartScope(t testing.TB, project, part, agent string) tenancy.Scope {
	t.Helper()
	p, ok := b.Result.Projects[project]
	if !ok {
		t.Fatalf("testfix: no project %q in the seed", project)
	}
	a, ok := b.Result.Agents[agent]
	if !ok {
		t.Fatalf("testfix: no agent %q in the seed", agent)
	}
	sc, err := b.Resolver.Part(context.Background(), p.ConnectCode, part, a.Key)
	if err != nil {
		t.Fatalf("testfix: resolve part %s: %v", part, err)
	}
	return sc
}

// CastScopes resolves the scope of every part of a TwoProjects cast, by part name.
func (b *Bundle) CastScopes(t testing.TB, members ...string) map[string]tenancy.Scope {
	t.Helper()
	out := map[string]tenancy.Scope{}
	for _, m := range members {
		slug := memberSlug(m)
		out[slug] = b.PartScope(t, "one", slug, "acme/"+slug)
	}
	out[Peter] = b.PartScope(t, "two", Peter, "initech/"+Peter)
	return out
}

// Op runs fn as the operator (the owner, outside any tenant), failing the test on error.
func (b *Bundle) Op(t testing.TB, fn func(tx *pg.Tx) error) {
	t.Helper()
	if err := b.DB.Operator(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// Exec runs one statement as the operator, as a seed (OpAll).
func (b *Bundle) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	Exec(t, b.DB, sql, args...)
}

// Count runs a query of one integer (a count) as the operator.
func (b *Bundle) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	return Value[int](t, b, sql, args...)
}

// Value runs a query of one value (one row, one column) as the operator.
func Value[T any](t testing.TB, b *Bundle, sql string, args ...any) T {
	t.Helper()
	return Scalar[T](t, b.DB, sql, args...)
}

// Scalar is Value on a database of the test's own seeding: one row's one column, read as
// the operator (the owner, behind RLS), failing the test on error.
func Scalar[T any](t testing.TB, d *pg.DB, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), sql, args...).Scan(&v)
	}); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// Column runs a query of one column as the operator on d and returns its rows' values,
// failing the test on error.
func Column[T any](t testing.TB, d *pg.DB, sql string, args ...any) []T {
	t.Helper()
	var out []T
	if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
		rows, err := tx.Query(context.Background(), sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[T])
		return err
	}); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// Peter is the one part of project "two" in a TwoProjects cast (Initech's agent).
const Peter = "peter"

// TwoProjects is the usual cast as an admin file: Acme hosts project "one", whose members
// are Acme agents named by members, each the part of its own slug; Initech hosts project
// "two" with its agent peter. A member is a slug, optionally followed by more fields of
// its membership in YAML flow syntax: "reader, access: read".
func TwoProjects(members ...string) string {
	var agents, parts strings.Builder
	for _, m := range members {
		slug, extra, _ := strings.Cut(m, ",")
		slug = strings.TrimSpace(slug)
		fmt.Fprintf(&agents, "  - {org: acme, slug: %s, name: %s}\n", slug, title(slug))
		if extra = strings.TrimSpace(extra); extra != "" {
			extra = ", " + extra
		}
		fmt.Fprintf(&parts, "      - {agent: acme/%s, part: %s%s}\n", slug, slug, extra)
	}
	return "organisations:\n  - {slug: acme, name: Acme Corp}\n  - {slug: initech, name: Initech}\n" +
		"agents:\n" + agents.String() + "  - {org: initech, slug: peter, name: Peter}\n" +
		"projects:\n  - slug: one\n    name: One\n    host: acme\n    members:\n" + parts.String() +
		"  - slug: two\n    name: Two\n    host: initech\n    members:\n      - {agent: initech/peter, part: peter}\n"
}

func memberSlug(m string) string {
	slug, _, _ := strings.Cut(m, ",")
	return strings.TrimSpace(slug)
}

func title(slug string) string {
	if slug == "" {
		return slug
	}
	return strings.ToUpper(slug[:1]) + slug[1:]
}

var detector = sync.OnceValues(secrets.NewDetector)

// Detector is the secret detector, built once per test binary (it takes tens of
// milliseconds and tens of MB) and shared by parallel tests, as the service shares one.
func Detector(t testing.TB) *secrets.Detector {
	t.Helper()
	d, err := detector()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Holder is the package-level Holder on the bundle's database.
func (b *Bundle) Holder(t testing.TB) pgx.Tx {
	t.Helper()
	return Holder(t, b.URL)
}

// Holder opens a transaction on a connection of its own to the database at url, as its
// owner (behind no row-level security), for a test to hold locks that a call under test
// must wait for. The test commits it to let the call go on; it is rolled back and closed
// at the end. Tests with a server rather than a Bundle reach it by the server's URL.
func Holder(t testing.TB, url string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// After a commit the rollback is a no-op; a closed connection ends either way.
		_ = tx.Rollback(ctx)
		if err := conn.Close(ctx); err != nil {
			t.Errorf("close the holder's connection: %v", err)
		}
	})
	return tx
}

// AwaitLockWaiter returns once a backend of the test's database waits on a lock (a call
// under test blocked behind a transaction the test holds open), or fails the test after
// 30 s or when done delivers first (the call did not wait).
func (b *Bundle) AwaitLockWaiter(t testing.TB, done <-chan error) {
	t.Helper()
	b.AwaitLockWaiters(t, 1, done)
}

// AwaitLockWaiters is AwaitLockWaiter for n backends waiting at once (on a row, a table
// or an advisory lock); done may be nil. It polls on a connection of its own, not the
// bundle's pools: the calls under test (and a test's other parallel subtests) may hold
// every pooled connection, and a poll queued behind them for longer than the held call's
// statement timeout saw the call give up rather than wait (seen on Citus in CI).
func (b *Bundle) AwaitLockWaiters(t testing.TB, n int, done <-chan error) {
	t.Helper()
	AwaitLockWaitersAt(t, b.URL, n, done)
}

// AwaitLockWaitersAt is AwaitLockWaiters for the database at url (a test server's), read
// on a connection of its own, one statement (so one snapshot) a poll. A test must not
// poll from the transaction that holds the lock: within one transaction the set of
// backends pg_stat_activity lists is read once, and a call's backend that connects later
// is never seen.
func AwaitLockWaitersAt(t testing.TB, url string, n int, done <-chan error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Errorf("close the lock poller's connection: %v", err)
		}
	}()
	var citus bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		t.Fatal(err)
	}
	awaitLockWaiters(t, n, done, citus, func(sql string) int {
		var v int
		if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	})
}

// awaitLockWaiters polls count until n backends of the database wait on a lock. Each poll
// is a transaction of its own: inside one, pg_stat_activity is a single snapshot. On
// Citus a call waits on the worker that holds the row's shard, which citus_stat_activity
// sees.
func awaitLockWaiters(t testing.TB, n int, done <-chan error, citus bool, count func(sql string) int) {
	t.Helper()
	activity := "pg_stat_activity"
	if citus {
		activity = "citus_stat_activity"
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the call returned (%v) without waiting on the held lock", err)
		default:
		}
		if count(`SELECT count(*) FROM `+activity+`
			WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("fewer than %d backends waited on a lock within 30 s", n)
}
