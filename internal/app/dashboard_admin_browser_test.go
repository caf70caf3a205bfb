package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestDashboardCompanyAdminInABrowser drives the company admin pages in Chromium as a
// person would: Acme's owner creates an agent and copies its key (used on /api/mcp),
// rotates and revokes it, sets its webhook, opens a project, invites Initech to it and
// makes a one-time invitation link; Initech's owner accepts the agreement; Acme's owner
// disconnects a connected app. Each page is saved as a screenshot.
func TestDashboardCompanyAdminInABrowser(t *testing.T) {
	t.Parallel()
	ctx := headlessChromium(t)
	s := startServerOpts(t, serverOptions{file: dashboardFile, tune: func(c *config.Config) {
		c.SecretKey = strings.Repeat("ab", 32) // webhook secrets are sealed under it
	}})
	d := openSeeded(t, s)
	room := s.res.Projects["escalations"].ID.String()
	admin := s.base + "/app/admin"
	credential := func(t *testing.T) string {
		t.Helper()
		if err := waitFor(ctx, `!!document.querySelector(".secret output.credential")`); err != nil {
			t.Fatalf("no credential shown: %v (%s)", err, pageText(ctx))
		}
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".secret output.credential").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := browserSignIn(ctx, admin+"/agents", "ana@acme.test", "demo-password-ana"); err != nil {
		t.Fatal(err)
	}
	var agentPage string

	t.Run("an agent is created and its key, shown once, works", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.SendKeys("#a-slug", "triage-bot"),
			chromedp.SendKeys("#a-name", "Triage Bot"),
			chromedp.SendKeys("#a-model", "claude-sonnet-4"),
		)
		if err == nil {
			err = submitAndLoad(ctx, "#a-slug", chromedp.Submit[string])
		}
		if err != nil {
			t.Fatal(err)
		}
		key := credential(t)
		screenshot(t, ctx, "admin-agent-key-once")
		if a := callTool(t, s.base+"/api/mcp", key, "list_rooms", nil); a.status != http.StatusOK || a.isErr {
			t.Fatalf("the new key on /api/mcp: %d", a.status)
		}
		var id string
		if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT id::text FROM agent WHERE slug = 'triage-bot'`).Scan(&id)
		}); err != nil {
			t.Fatal(err)
		}
		agentPage = admin + "/agents/" + id
	})

	t.Run("the key is rotated (the old one refused), a webhook set, every key revoked", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(agentPage), chromedp.WaitVisible(`form[action*="/rotate"] button`)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(pageText(ctx), "qyt_") {
			t.Fatalf("the agent's page shows a key: %s", pageText(ctx))
		}
		if err := submitAndLoad(ctx, `form[action*="/rotate"] button`, chromedp.Click[string]); err != nil {
			t.Fatal(err)
		}
		fresh := credential(t)
		screenshot(t, ctx, "admin-agent-rotated")
		if a := callTool(t, s.base+"/api/mcp", fresh, "list_rooms", nil); a.status != http.StatusOK {
			t.Fatalf("the rotated key: %d", a.status)
		}
		err := chromedp.Do(ctx,
			chromedp.Navigate(agentPage), chromedp.WaitVisible("#w-url"),
			chromedp.SendKeys("#w-url", "https://hooks.example.com/relayroom"),
		)
		if err == nil {
			err = submitAndLoad(ctx, "#w-url", chromedp.Submit[string])
		}
		if err != nil {
			t.Fatal(err)
		}
		if secret := credential(t); secret == "" {
			t.Fatal("no webhook secret shown")
		}
		screenshot(t, ctx, "admin-agent-webhook")
		if err := chromedp.Do(ctx, chromedp.Navigate(agentPage), chromedp.WaitVisible(`form[action*="/revoke"] button`)); err != nil {
			t.Fatal(err)
		}
		if err := submitAndLoad(ctx, `form[action*="/revoke"] button`, chromedp.Click[string]); err != nil {
			t.Fatal(err)
		}
		if a := callTool(t, s.base+"/api/mcp", fresh, "list_rooms", nil); a.status != http.StatusUnauthorized {
			t.Fatalf("a revoked key: %d", a.status)
		}
		screenshot(t, ctx, "admin-agent-history")
	})

	t.Run("the project page invites a company with grants: a pending agreement", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.Navigate(admin+"/projects/"+room), chromedp.WaitVisible("#g-slug"),
			chromedp.SendKeys("#g-slug", "initech"),
			chromedp.Click(`form[action$="/guests"] input[value="read_memory"]`),
		)
		if err == nil {
			err = submitAndLoad(ctx, `form[action$="/guests"] button`, chromedp.Click[string])
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := waitFor(ctx, `document.body.innerText.includes("pending")`); err != nil {
			t.Fatalf("no pending agreement shown: %v (%s)", err, pageText(ctx))
		}
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM agreement WHERE guest_org_id = $1 AND status = 'pending'`, s.res.Organisations["initech"].ID); n != 1 {
			t.Fatalf("%d pending agreements", n)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/projects/"+room), chromedp.WaitVisible("#g-slug")); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "admin-project")
	})

	t.Run("a person is invited by email: a one-time link", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.Navigate(admin+"/people"), chromedp.WaitVisible("#i-email"),
			chromedp.SendKeys("#i-email", "zoe@acme.test"),
		)
		if err == nil {
			err = submitAndLoad(ctx, "#i-email", chromedp.Submit[string])
		}
		if err != nil {
			t.Fatal(err)
		}
		if link := credential(t); !strings.Contains(link, "/app/invite/qyt_iv_") {
			t.Fatalf("the invitation link: %q", link)
		}
		screenshot(t, ctx, "admin-people-invite")
	})

	t.Run("a connected app is listed and disconnected", func(t *testing.T) {
		testfix.Exec(t, d, `INSERT INTO oauth_client (client_id, client_name, redirect_uris, source) VALUES ('rrc_browser', 'Browser App', '{http://127.0.0.1/cb}', 'registration')`)
		testfix.Exec(t, d, `INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, code_id, code_hash, code_challenge, redirect_uri, code_expires_at)
			SELECT om.org_id, gen_random_uuid(), 'rrc_browser', om.user_id, 'http://x/api/mcp', substr(md5(random()::text), 1, 8), '\x00', 'c', 'http://127.0.0.1/cb', now()
			FROM org_member om JOIN app_user u ON u.id = om.user_id WHERE u.email = 'ana@acme.test'`)
		if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/clients"), chromedp.WaitVisible(`form[action$="/clients/disconnect"] button`)); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "admin-connected-apps")
		if err := submitAndLoad(ctx, `form[action$="/clients/disconnect"] button`, chromedp.Click[string]); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(ctx, `!document.querySelector('form[action$="/clients/disconnect"]')`); err != nil {
			t.Fatalf("the app is still listed: %v (%s)", err, pageText(ctx))
		}
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM oauth_grant WHERE client_id = 'rrc_browser' AND revoked_at IS NULL`); n != 0 {
			t.Fatalf("%d consents left", n)
		}
	})

	t.Run("the invited company's owner accepts the agreement on her agreements page", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(admin), chromedp.WaitVisible(`form[action="/logout"] button`)); err != nil {
			t.Fatal(err)
		}
		if err := submitAndLoad(ctx, `form[action="/logout"] button`, chromedp.Click[string]); err != nil {
			t.Fatal(err)
		}
		if err := browserSignIn(ctx, admin+"/agreements", "ivy@initech.test", "demo-password-ivy"); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "main", "waits for your acceptance"); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "admin-agreements-pending")
		accept := `form[action*="/accept"] button`
		if err := chromedp.Do(ctx, chromedp.Navigate(admin+"/agreements/"+room+"/"+s.res.Organisations["initech"].ID.String()), chromedp.WaitVisible(accept)); err != nil {
			t.Fatalf("no accept button: %v (%s)", err, pageText(ctx))
		}
		if err := submitAndLoad(ctx, accept, chromedp.Click[string]); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(ctx, `!document.querySelector('form[action*="/accept"]')`); err != nil {
			t.Fatalf("still waiting for acceptance: %v (%s)", err, pageText(ctx))
		}
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM agreement WHERE guest_org_id = $1 AND status = 'active'`, s.res.Organisations["initech"].ID); n != 1 {
			t.Fatalf("%d active agreements", n)
		}
		screenshot(t, ctx, "admin-agreement-accepted")
	})
}
