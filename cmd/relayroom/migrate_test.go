package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestMigrateCLI: the migrate commands act on the database the operator named, say what a
// destructive one will do before doing it, and never print the environment's password.
func TestMigrateCLI(t *testing.T) {
	target := pgtest.New(t)
	empty := pgtest.NewEmpty(t) // before DATABASE_URL is set to a database that must not be used
	// An environment that must not be used, and whose password must not be printed.
	t.Setenv("DATABASE_URL", "postgres://nobody:EnvPassw0rd@127.0.0.1:1/none?sslmode=disable")
	t.Setenv("RELAYROOM_SECRET_KEY", strings.Repeat("ab", 32))
	t.Setenv("RELAYROOM_EMBED_API_KEY", "sk-embed-EnvSecret")
	latest, err := pg.LatestMigration()
	if err != nil {
		t.Fatal(err)
	}
	status := func(t *testing.T) pg.MigrationStatus {
		t.Helper()
		code, out, stderr := runCLI(t, "migrate", "status", "--database-url", target)
		var st pg.MigrationStatus
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status: exit %d: %s %s", code, out, stderr)
		}
		return st
	}

	for _, args := range [][]string{{"migrate", "--help"}, {"serve", "--help"}, {"serve", "--bogus"}, {"migrate", "up", "--bogus"}} {
		t.Run(strings.Join(args, " ")+" prints no secret of the environment", func(t *testing.T) {
			_, out, stderr := runCLI(t, args...)
			for _, secret := range []string{"EnvPassw0rd", "abababab", "EnvSecret"} {
				if strings.Contains(out+stderr, secret) {
					t.Fatalf("%q printed:\n%s%s", secret, out, stderr)
				}
			}
		})
	}
	t.Run("a flag after the command names the database", func(t *testing.T) {
		if st := status(t); st.Current != latest || st.Dirty {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("down without --yes names the database and changes nothing", func(t *testing.T) {
		code, _, stderr := runCLI(t, "migrate", "down", "1", "--database-url", target)
		if code != 2 || !strings.Contains(stderr, "--yes") || !strings.Contains(stderr, pg.Describe(target)) {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if st := status(t); st.Current != latest {
			t.Fatalf("reverted without --yes: %+v", st)
		}
	})
	t.Run("down with --yes reverts, and up applies again", func(t *testing.T) {
		if code, _, stderr := runCLI(t, "migrate", "down", "1", "--yes", "--database-url", target); code != 0 {
			t.Fatalf("down: exit %d: %s", code, stderr)
		}
		if st := status(t); st.Current >= latest {
			t.Fatalf("not reverted: %+v", st)
		}
		if code, _, stderr := runCLI(t, "migrate", "up", "--database-url", target); code != 0 {
			t.Fatalf("up: exit %d: %s", code, stderr)
		}
		if st := status(t); st.Current != latest {
			t.Fatalf("not applied again: %+v", st)
		}
	})
	t.Run("force makes a dirty schema clean", func(t *testing.T) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET dirty = true`); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := runCLI(t, "migrate", "up", "--database-url", target); code != 1 || !strings.Contains(stderr, "Dirty") {
			t.Fatalf("up on a dirty schema: exit %d: %s", code, stderr)
		}
		if code, _, stderr := runCLI(t, "migrate", "force", strconv.Itoa(int(latest)+1), "--database-url", target); code != 1 {
			t.Fatalf("force past the build's latest: exit %d: %s", code, stderr)
		}
		if code, _, stderr := runCLI(t, "migrate", "force", strconv.Itoa(int(latest)), "--database-url", target); code != 0 {
			t.Fatalf("force: exit %d: %s", code, stderr)
		}
		if st := status(t); st.Current != latest || st.Dirty {
			t.Fatalf("after force: %+v", st)
		}
	})
	t.Run("force 0 records that nothing is applied, and up applies everything", func(t *testing.T) {
		// Recorded as a version 0 that no migration has, every up failed "no migration
		// found for version 0".
		for _, args := range [][]string{{"force", "0"}, {"up"}} {
			if code, _, stderr := runCLI(t, append(append([]string{"migrate"}, args...), "--database-url", empty)...); code != 0 {
				t.Fatalf("migrate %v: exit %d: %s", args, code, stderr)
			}
		}
		code, out, stderr := runCLI(t, "migrate", "status", "--database-url", empty)
		var st pg.MigrationStatus
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Current != latest || st.Dirty {
			t.Fatalf("status after force 0 and up: exit %d: %s %s", code, out, stderr)
		}
	})
	for _, args := range [][]string{
		{"migrate", "status", "extra", "--database-url", target},
		{"migrate", "down", "--yes", "--database-url", target},
		{"migrate", "sideways", "--database-url", target},
		{"serve", "extra"},
		{"healthcheck", "--bogus"},
		{"healthcheck", "extra"},
		{"pager", "--bogus"},
	} {
		t.Run(strings.Join(args[:2], " ")+" with a wrong argument is a usage error", func(t *testing.T) {
			if code, _, stderr := runCLI(t, args...); code != 2 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
		})
	}
	t.Run("a keyword=value DATABASE_URL is refused without its password", func(t *testing.T) {
		code, _, stderr := runCLI(t, "migrate", "status", "--database-url", "host=127.0.0.1 user=postgres password=TopSecretPW dbname=x")
		if code != 1 || !strings.Contains(stderr, "postgres://") || strings.Contains(stderr, "TopSecretPW") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
}
