package app_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relayroom/relayroom/internal/pg"
)

func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	ctx := headlessChromium(t)
	s := startServerFile(t, dashboardFile, nil)
	room := s.res.Projects["escalations"].ID.String()
	roomURL := s.base + "/api/mcp/p/" + room
	qa := s.key("globex/qa-lead")

	t.Run("a person signs in, opens a room and posts; the agent reads it as (human)", func(t *testing.T) {
		if err := browserSignIn(ctx, s.base+"/app/rooms/"+room, "ana@acme.test", "demo-password-ana"); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#live-status", "Live"); err != nil {
			t.Fatalf("the live stream did not open: %v", err)
		}
		err := chromedp.Do(ctx,
			chromedp.SendKeys("#content", "Browser hello to the room"),
			chromedp.Click("#composer button"),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#messages", "Browser hello to the room"); err != nil {
			t.Fatalf("the posted message did not appear on the page: %v", err)
		}
		screenshot(t, ctx, "room-after-post")
		got := served(t, roomURL, qa, "get_messages", map[string]any{"limit": 20})
		if !strings.Contains(got, `"from":"Ana [Acme Corp] (human)","content":"Browser hello to the room"`) {
			t.Fatalf("the agent does not see the person's post as (human): %s", got)
		}
		// The composer was cleared without a reload.
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("content").value`))
		if err != nil || v != "" {
			t.Fatalf("composer after posting: %q, %v", v, err)
		}
	})

	t.Run("an agent posts and the open page shows it without a reload", func(t *testing.T) {
		marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload = true`))
		if err != nil || !marker {
			t.Fatal(err)
		}
		served(t, roomURL, qa, "post_message", map[string]any{"content": "Agent says: fix deployed to staging"})
		if err := waitText(ctx, "#messages", "Agent says: fix deployed to staging"); err != nil {
			t.Fatalf("the agent's message did not appear live: %v", err)
		}
		if err := waitText(ctx, "#messages", "QA Lead [Globex] (agent · gpt-5)"); err != nil {
			t.Fatal(err)
		}
		still, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload === true`))
		if err != nil || !still {
			t.Fatalf("the page was reloaded: %v", err)
		}
		screenshot(t, ctx, "room-live-agent-message")
	})

	t.Run("a memory entry deprecated on the Memory tab leaves read_memory", func(t *testing.T) {
		text := served(t, roomURL, qa, "write_memory", map[string]any{"content": "Old build server is buildbox-3", "category": "infra"})
		id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(text)
		err := chromedp.Do(ctx,
			chromedp.Navigate(s.base+"/app/rooms/"+room+"/memory?category=infra"),
			chromedp.WaitVisible(`form[action$="/memory/`+id+`/deprecate"] button`),
			chromedp.Click(`form[action$="/memory/`+id+`/deprecate"] button`),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "main", "Deprecated by Ana"); err != nil {
			t.Fatalf("the Memory tab does not show the deprecation: %v", err)
		}
		screenshot(t, ctx, "memory-deprecated")
		if got := served(t, roomURL, qa, "read_memory", map[string]any{"query": "build server buildbox"}); strings.Contains(got, "buildbox-3") {
			t.Fatalf("read_memory still returns it: %s", got)
		}
	})
	t.Run("the home page lists what needs the person, and a dead wake opens its own page", func(t *testing.T) {
		// A wake the qa-lead's webhook refused until it was given up (the dead letter).
		d := openSeeded(t, s)
		if err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			_, err := tx.Exec(context.Background(), `INSERT INTO wake (project_id, id, member_id, agent_id, part, status, attempts, last_error, created_at, updated_at)
				SELECT project_id, gen_random_uuid(), id, agent_id, part, 'dead', 8, 'webhook answered 502', now(), now() FROM membership WHERE project_id = $1 AND part = 'qa-lead'`, room)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(s.base+"/app/"), chromedp.WaitVisible("li.need-wake a")); err != nil {
			t.Fatalf("no dead wake on the home page: %v (%s)", err, pageText(ctx))
		}
		screenshot(t, ctx, "home-needs-you")
		if err := chromedp.Do(ctx, chromedp.Click("li.need-wake a")); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#wake-h", "Wake of qa-lead"); err != nil {
			t.Fatalf("the dead wake's page did not open: %v", err)
		}
		if err := waitText(ctx, "main", "webhook answered 502"); err != nil {
			t.Fatalf("the dead wake's page does not show its error: %v", err)
		}
		screenshot(t, ctx, "wake-dead")
	})
}
