package app_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardThreadsInABrowser opens a thread's page in Chromium and watches it change
// without a reload as the agents work: the composing indicator lights up, a reply and its
// read state appear, and a new event reaches the open activity feed. The roster's amber
// badge and the usage charts are captured too.
func TestDashboardThreadsInABrowser(t *testing.T) {
	t.Parallel()
	ctx := headlessChromium(t)
	s := startServerFile(t, threadsFile, nil)
	pages := s.base + "/app/projects/" + s.res.Projects["escalations"].ID.String()
	architect, backend, qa := s.key("acme/architect"), s.key("acme/backend"), s.key("globex/qa-lead")
	asArchitect, asBackend, asQA := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend"), s.threadsURL("escalations", "qa-lead")
	thread := threadIDField.FindStringSubmatch(served(t, asArchitect, architect, "send", map[string]any{"to": []string{"qa-lead"},
		"subject": "Flaky login test", "body": "QA: the login test fails one run in ten. Can you look?", "needsHuman": true}))[1]

	t.Run("the composing indicator and a reply appear on the open thread without a reload", func(t *testing.T) {
		if err := browserSignIn(ctx, pages+"/threads/"+thread, "ana@acme.test", "demo-password-ana"); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#live-status", "Live"); err != nil {
			t.Fatalf("the live stream did not open: %v", err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload = true`)); err != nil {
			t.Fatal(err)
		}
		served(t, asQA, qa, "event", map[string]any{"type": "composing", "detail": map[string]any{"threadId": thread}})
		if err := waitText(ctx, "#composing", "qa-lead is composing"); err != nil {
			t.Fatalf("the composing indicator did not light up: %v", err)
		}
		screenshot(t, ctx, "thread-composing")
		inbox := served(t, asQA, qa, "inbox", map[string]any{"limit": 5})
		served(t, asQA, qa, "ack", map[string]any{"messageId": messageIDField.FindStringSubmatch(inbox)[1]})
		served(t, asQA, qa, "reply", map[string]any{"threadId": thread, "body": "Reproduced: the session cookie expires mid-test."})
		if err := waitText(ctx, "#thread-messages", "Reproduced: the session cookie expires mid-test."); err != nil {
			t.Fatalf("the reply did not appear live: %v", err)
		}
		if err := waitText(ctx, "#thread-messages", "qa-lead: read"); err != nil {
			t.Fatalf("the read state did not change live: %v", err)
		}
		if still, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload === true`)); err != nil || !still {
			t.Fatalf("the page was reloaded: %v", err)
		}
		screenshot(t, ctx, "thread-live-reply")
	})

	t.Run("a new event appears on the open activity feed without a reload", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(pages+"/activity"), chromedp.WaitVisible("#activity")); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#live-status", "Live"); err != nil {
			t.Fatalf("the live stream did not open: %v", err)
		}
		served(t, asBackend, backend, "event", map[string]any{"type": "deploy", "detail": map[string]any{"service": "billing-api", "version": "2.4.1"}})
		if err := waitText(ctx, "#activity", "billing-api"); err != nil {
			t.Fatalf("the event did not appear live: %v", err)
		}
		screenshot(t, ctx, "activity-live")
	})

	t.Run("the roster's amber badge, the thread list and the usage charts", func(t *testing.T) {
		served(t, asBackend, backend, "event", map[string]any{"type": "limited", "detail": map[string]any{"resetAt": time.Now().Add(90 * time.Minute).UTC().Format(time.RFC3339)}})
		for _, u := range []map[string]any{
			{"model": "claude-opus-4", "input_tokens": 12000, "output_tokens": 3000, "cost_usd": 0.42},
			{"model": "claude-sonnet-4", "input_tokens": 8000, "output_tokens": 1500, "cache_tokens": 4000, "cost_usd": 0.09},
		} {
			served(t, asArchitect, architect, "event", map[string]any{"type": "work", "usage": u})
		}
		served(t, asQA, qa, "event", map[string]any{"type": "work", "usage": map[string]any{"model": "gpt-5", "input_tokens": 5000, "output_tokens": 900, "cost_usd": 0.05}})
		for _, c := range []struct{ path, sel, want, shot string }{
			{"/roster", "main", "limited until", "roster-limited"},
			{"/threads", "main", "Flaky login test", "threads-list"},
			{"/usage?days=7", "main", "Tokens per day by model", "usage-charts"},
		} {
			if err := chromedp.Do(ctx, chromedp.Navigate(pages+c.path)); err != nil {
				t.Fatal(err)
			}
			if err := waitText(ctx, c.sel, c.want); err != nil {
				t.Fatalf("%s: %v", c.path, err)
			}
			screenshot(t, ctx, c.shot)
		}
	})
}
