package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestAPersonWithoutANameActs: a person may have no name (`admin user create` and an
// admin file leave it out). Every audited change of theirs failed (503: the audit trail
// records its actor by name), and the pages, which took a name for "signed in", showed
// them neither the admin links nor Sign out. They act under their email now.
func TestAPersonWithoutANameActs(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{file: dashboardFile})
	d := openSeeded(t, s)
	ctx := context.Background()
	if err := d.Operator(ctx, func(tx *pg.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE app_user SET name = '' WHERE email = 'ana@acme.test'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ana := signIn(t, s.base, "ana@acme.test", "demo-password-ana")
	t.Run("the pages show their links and Sign out", func(t *testing.T) {
		_, body := ana.get("/app/")
		if !strings.Contains(body, `action="/logout"`) || !strings.Contains(body, `href="/app/admin"`) {
			t.Fatalf("home: %.600s", body)
		}
	})
	t.Run("an audited change is made, recorded under their email", func(t *testing.T) {
		status, body := ana.postForm("/app/admin/agents", ana.form("slug", "nameless-bot", "name", "Nameless Bot", "kind", "session"))
		if status != http.StatusCreated {
			t.Fatalf("create agent: %d %.300s", status, body)
		}
		if actor := testfix.Scalar[string](t, d, `SELECT actor_name FROM audit_event WHERE detail->>'slug' = 'nameless-bot'`); actor != "ana@acme.test" {
			t.Fatalf("recorded under %q", actor)
		}
	})
}
