package pg_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// appName is the application_name a pool's connection reports.
func appName(t *testing.T, p *pgxpool.Pool) string {
	t.Helper()
	var n string
	if err := p.QueryRow(context.Background(), "SELECT current_setting('application_name')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConnectionsAreNamed: every connection said nothing of itself in pg_stat_activity,
// so an operator could not tell the replicas, or a replica's request connections from its
// background ones, apart.
func TestConnectionsAreNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.New(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("each pool by its name, the host and the process", func(t *testing.T) {
		d, err := pg.Open(ctx, u, pg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for pool, p := range map[string]*pgxpool.Pool{"app": d.App, "ops": d.Ops} {
			n := appName(t, p)
			if want := "relayroom-" + pool + " " + host; !strings.HasPrefix(n, want[:min(len(want), 63)]) {
				t.Fatalf("%s: application_name %q, want it to begin %q", pool, n, want)
			}
		}
	})
	t.Run("a name DATABASE_URL sets is kept", func(t *testing.T) {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		d, err := pg.Open(ctx, u+sep+"application_name=mine", pg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if n := appName(t, d.App); n != "mine" {
			t.Fatalf("application_name %q, want mine", n)
		}
	})
}
