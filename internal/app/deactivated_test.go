package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/dashboard"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestADeactivatedMemberActsInNothing: deactivating a member of an organisation
// (org_member.deactivated_at, `admin desk member deactivate`) ends every right they had
// in it, not only the helpdesk's. Before, a deactivated admin still made agent keys and
// invited admins on the company pages, entered and posted in rooms, and their OAuth
// tokens still acted as the organisation's agents.
func TestADeactivatedMemberActsInNothing(t *testing.T) {
	t.Parallel()

	t.Run("the dashboard", func(t *testing.T) {
		t.Parallel()
		s := startServerOpts(t, serverOptions{file: dashboardFile})
		ctx := context.Background()
		d := openSeeded(t, s)
		acme := s.res.Organisations["acme"].ID
		room := s.res.Projects["escalations"].ID.String()
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE org_member SET role = 'admin'
				WHERE org_id = $1 AND user_id = (SELECT id FROM app_user WHERE email = 'mo@acme.test')`, acme)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		mo := signIn(t, s.base, "mo@acme.test", "demo-password-mo")
		if status, body := mo.get("/app/rooms/" + room); status != http.StatusOK {
			t.Fatalf("active, the room: %d %s", status, body)
		}
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE org_member SET deactivated_at = now()
				WHERE org_id = $1 AND user_id = (SELECT id FROM app_user WHERE email = 'mo@acme.test')`, acme)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Run("company admin pages refuse them, saying why", func(t *testing.T) {
			status, body := mo.get("/app/admin/people")
			if status != http.StatusForbidden || !strings.Contains(body, "no longer an active member") {
				t.Fatalf("GET /app/admin/people: %d %s", status, body)
			}
			status, body = mo.postForm("/app/admin/agents", mo.form("slug", "ghost-bot", "name", "Ghost Bot", "model", "gpt-5", "kind", "session"))
			if status != http.StatusForbidden || agentKeyRe.MatchString(body) {
				t.Fatalf("POST /app/admin/agents: %d, key shown %v", status, agentKeyRe.MatchString(body))
			}
			status, body = mo.postForm("/app/admin/people", mo.form("email", "friend@evil.test", "role", "admin"))
			if status != http.StatusForbidden || inviteLinkRe.MatchString(body) {
				t.Fatalf("POST /app/admin/people: %d, link shown %v", status, inviteLinkRe.MatchString(body))
			}
			if !strings.Contains(dashboard.MsgDeactivated, "no longer an active member") {
				t.Fatal("the message changed: update this test's check")
			}
		})
		t.Run("home says why there is nothing", func(t *testing.T) {
			if _, body := mo.get("/app/"); !strings.Contains(body, "no longer an active member") {
				t.Fatalf("home: %.400s", body)
			}
		})
		t.Run("rooms are not theirs", func(t *testing.T) {
			if status, _ := mo.get("/app/rooms/" + room); status != http.StatusNotFound {
				t.Fatalf("GET the room: %d, want 404", status)
			}
			mo.postForm("/app/rooms/"+room+"/messages", mo.form("content", "posted while deactivated"))
			if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM room_message WHERE content = 'posted while deactivated'`); n != 0 {
				t.Fatalf("the message was stored: %d", n)
			}
		})
	})

	t.Run("OAuth tokens", func(t *testing.T) {
		t.Parallel()
		s := startServerFile(t, signInDemo, nil)
		g := newFlow(t, s, s.base+"/api/mcp")
		tok := g.accessToken(t, "Backend", "rooms")
		if st := bearerStatus(t, s.base+"/api/mcp", tok); st != http.StatusOK {
			t.Fatalf("active: %d", st)
		}
		ownerExec(t, s, `UPDATE org_member SET deactivated_at = now() WHERE user_id = (SELECT id FROM app_user WHERE email = $1)`, anaEmail)
		if st := bearerStatus(t, s.base+"/api/mcp", tok); st != http.StatusUnauthorized {
			t.Fatalf("a token of before, after the deactivation: %d, want 401", st)
		}
		// The consent page offers none of the organisation's agents any more.
		resp, body := g.br.get(g.authURL(nil))
		if resp.StatusCode != http.StatusOK || strings.Contains(body, "Backend") {
			t.Fatalf("consent after the deactivation: %d, offers Backend %v", resp.StatusCode, strings.Contains(body, "Backend"))
		}
	})
}
