package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relayroom/relayroom/internal/testfix"
)

// TestDashboardKnowledgeInABrowser drives the Knowledge tab, the settings page, the
// roster's amber badge and a task upload in Chromium, as a person would, and saves a
// screenshot of each page.
func TestDashboardKnowledgeInABrowser(t *testing.T) {
	t.Parallel()
	ctx := headlessChromium(t)
	s := startDashboard(t, dashboardFile)
	d, room, roomURL, architect, threads := s.d, s.room, s.roomURL, s.architect, s.threads
	page := s.base + "/app/rooms/" + room

	// Ana signs in once; the browser keeps her session for every step.
	if err := browserSignIn(ctx, page+"/knowledge", "ana@acme.test", "demo-password-ana"); err != nil {
		t.Fatal(err)
	}

	t.Run("a lesson is approved with an edited title on the review queue and recall returns it", func(t *testing.T) {
		// Some recalls first, so the Learning panel has bars and an empty query.
		seed := idRe.FindString(served(t, threads, architect, "learn", map[string]any{"title": "Deploys happen on Tuesdays",
			"body": "Production deploys happen on Tuesday mornings only.", "kind": "procedure"}))
		testfix.Exec(t, d, `UPDATE knowledge SET status = 'trusted', confidence = 1 WHERE id = $1`, seed)
		var rec struct {
			QueryID string `json:"queryId"`
		}
		if err := json.Unmarshal([]byte(served(t, threads, architect, "recall", map[string]any{"query": "when do deploys happen"})), &rec); err != nil {
			t.Fatal(err)
		}
		served(t, threads, architect, "recall_used", map[string]any{"queryId": rec.QueryID, "knowledgeId": seed})
		served(t, threads, architect, "recall", map[string]any{"query": "deploy tuesday morning"})
		served(t, threads, architect, "recall", map[string]any{"query": "office plant watering rota"})
		id := idRe.FindString(served(t, threads, architect, "learn", map[string]any{"title": "flag thing",
			"body": "Turn the feature flag off before rolling back a deploy, or the migration reruns.", "kind": "pitfall"}))
		title := "#title-" + id
		err := chromedp.Do(ctx,
			chromedp.Navigate(page+"/knowledge"),
			chromedp.WaitVisible(title),
			chromedp.Clear(title),
			chromedp.SendKeys(title, "Flag off before a rollback"),
		)
		if err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "knowledge-review-queue")
		if err := chromedp.Do(ctx, chromedp.Click(`form[action$="/knowledge/`+id+`/approve"] button`)); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "main", "recall returns it"); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#learning", "office plant watering rota"); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "knowledge-learning-panel")
		got := served(t, threads, architect, "recall", map[string]any{"query": "feature flag rollback"})
		if !strings.Contains(got, "Flag off before a rollback") {
			t.Fatalf("recall does not return the lesson approved in the browser: %s", got)
		}
	})

	t.Run("the knowledge settings page keeps a distillOnClose set by SQL when the rules are saved", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(page+"/knowledge/settings"), chromedp.WaitVisible(`input[name="name_0"]`)); err != nil {
			t.Fatal(err)
		}
		// Set while the page is open: the page still shows it on, and saving must not undo it.
		testfix.Exec(t, d, `UPDATE project SET knowledge_config = knowledge_config || '{"distillOnClose":false}'::jsonb WHERE id = $1`, room)
		err := chromedp.Do(ctx,
			chromedp.SendKeys(`input[name="name_0"]`, "ticket"),
			chromedp.SendKeys(`input[name="pattern_0"]`, `TCK-[0-9]+`),
			chromedp.Click(`form.settings button[type="submit"]`),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "main", "The knowledge settings were saved."); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "knowledge-settings")
		cfg, set := knowledgeConfig(t, d, room)
		if cfg["distillOnClose"] != false {
			t.Fatalf("saving the page overwrote distillOnClose: %v", cfg)
		}
		if rules, _ := json.Marshal(set["redactionRules"]); string(rules) != `[{"name":"ticket","pattern":"TCK-[0-9]+"}]` {
			t.Fatalf("rules saved: %s", rules)
		}
		// The reloaded page shows the stored value: off.
		checked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('input[name="distill_on_close"]').checked`))
		if err != nil || checked {
			t.Fatalf("the page shows distillOnClose on after the save: %v", err)
		}
	})

	t.Run("a parked agent shows the amber limited badge", func(t *testing.T) {
		until := time.Now().UTC().Add(2 * time.Hour)
		testfix.Exec(t, d, `UPDATE membership SET parked_until = $2 WHERE project_id = $1 AND part = 'qa-lead'`, room, until)
		if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible("#messages")); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, ".roster .badge.amber", "limited until "+until.Format("15:04")); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "room-roster-limited")
	})

	t.Run("the host attaches a file to a task and the recipient reads it", func(t *testing.T) {
		task := idRe.FindString(served(t, roomURL, architect, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "Check the release notes"}))
		file := filepath.Join(t.TempDir(), "release-notes.txt")
		if err := os.WriteFile(file, []byte("Release 4.2: login fixed."), 0o644); err != nil {
			t.Fatal(err)
		}
		err := chromedp.Do(ctx,
			chromedp.Navigate(page+"/tasks"),
			chromedp.WaitVisible("#file-"+task),
			chromedp.SetUploadFiles("#file-"+task, []string{file}),
			chromedp.Click(`form[action$="/tasks/`+task+`/attachments"] button`),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#task-"+task, "release-notes.txt"); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "tasks-attachment")
		if got := served(t, roomURL, s.key("globex/qa-lead"), "get_inbox", map[string]any{}); !strings.Contains(got, "Release 4.2: login fixed.") {
			t.Fatalf("the recipient does not read the file: %s", got)
		}
	})
}
