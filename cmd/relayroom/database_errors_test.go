package main

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestDatabaseConnectFailuresAreSaidPlainly: a database that cannot be reached failed
// admin and migrate with the driver's text ("migration status: connect: failed to connect
// to `user=… database=…`: …: dial error: dial tcp …"). The error names the database and
// the cause, and a database that never answers is given up on at connect_timeout.
func TestDatabaseConnectFailuresAreSaidPlainly(t *testing.T) {
	said := func(t *testing.T, dbURL string, args ...string) string {
		t.Helper()
		t.Setenv("DATABASE_URL", dbURL)
		code, out, stderr := runCLI(t, args...)
		var failure struct{ Error string }
		if code != 1 || out != "" || json.Unmarshal([]byte(stderr), &failure) != nil {
			t.Fatalf("%v: want exit 1 and a JSON error, got exit %d: %s %s", args, code, out, stderr)
		}
		for _, driver := range []string{"failed to connect", "dial error", "SQLSTATE"} {
			if strings.Contains(failure.Error, driver) {
				t.Fatalf("%v: the driver's words %q in %q", args, driver, failure.Error)
			}
		}
		return failure.Error
	}

	t.Run("nothing listening: refused, for admin and migrate alike", func(t *testing.T) {
		addr := testfix.FreeLoopback(t)
		for _, args := range [][]string{{"admin", "org", "list"}, {"migrate", "up"}, {"migrate", "status"}} {
			testfix.Check(t, strings.Join(args, " "), said(t, "postgres://postgres@"+addr+"/relayroom", args...),
				"cannot connect to the database at "+addr+"/relayroom (DATABASE_URL): connection refused (is Postgres running, and listening there?)")
		}
	})
	t.Run("serve logs the same words", func(t *testing.T) {
		addr := testfix.FreeLoopback(t)
		t.Setenv("DATABASE_URL", "postgres://postgres@"+addr+"/relayroom")
		t.Setenv("RELAYROOM_ADDR", testfix.FreeLoopback(t))
		code, _, stderr := runCLI(t, "serve")
		if code != 1 || strings.Contains(stderr, "failed to connect") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		testfix.CheckContains(t, "the log", stderr, "cannot connect to the database at "+addr+"/relayroom (DATABASE_URL): connection refused")
	})
	t.Run("a server that never answers: given up at connect_timeout", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // accepted and never answered: the connection waits for a reply
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		start := time.Now()
		got := said(t, "postgres://postgres@"+l.Addr().String()+"/relayroom?connect_timeout=1", "admin", "org", "list")
		testfix.CheckContains(t, "error", got, "no answer within the connect timeout, 1s")
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("gave up after %s, want about 1s", took)
		}
	})
	t.Run("the server refuses: its reason, without the driver's framing", func(t *testing.T) {
		u, err := url.Parse(pgtest.BaseURL(t))
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/no_such_database"
		testfix.CheckContains(t, "error", said(t, u.String(), "admin", "org", "list"),
			"cannot connect to the database at "+u.Host+"/no_such_database", `database "no_such_database" does not exist`)
	})
}

// TestDatabaseTimeoutIsSaidPlainly: a command that waited for a lock another session held
// failed at the statement timeout with Postgres's text ("set agreement: ERROR: canceling
// statement due to statement timeout (SQLSTATE 57014)").
func TestDatabaseTimeoutIsSaidPlainly(t *testing.T) {
	dbURL := demoDatabase(t)
	t.Run("a lock held past the statement timeout", func(t *testing.T) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "LOCK TABLE agreement IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := runCLI(t, "admin", "agreement", "revoke", "--project", "acme/escalations", "--guest", "globex")
		var failure struct{ Error string }
		if code != 1 || out != "" || json.Unmarshal([]byte(stderr), &failure) != nil {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
		testfix.Check(t, "error", failure.Error, "the database canceled a statement at its statement timeout: another session may hold a lock it waited for; retry")
	})
}

// TestInterruptedCommandSaysSo: a command stopped by Ctrl-C said "set agreement: context
// canceled".
func TestInterruptedCommandSaysSo(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.New(t))
	t.Run("a canceled command says it was interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // as Ctrl-C does to cli.Context's
		var out, errb strings.Builder
		code := run(ctx, []string{"admin", "org", "list"}, &out, &errb)
		var failure struct{ Error string }
		if code != 1 || out.Len() != 0 || json.Unmarshal([]byte(errb.String()), &failure) != nil {
			t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
		}
		testfix.Check(t, "error", failure.Error, interrupted)
	})
}
