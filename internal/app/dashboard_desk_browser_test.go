package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardDeskInABrowser: Ana signs in, creates a saved reply, imports a CSV file with
// a bad row (the preview names its line and offers no Import), fixes it and imports it,
// seeing the import's progress and result; each page is captured.
func TestDashboardDeskInABrowser(t *testing.T) {
	t.Parallel()
	ctx := headlessChromium(t)
	s := startServerOpts(t, serverOptions{file: dashboardDeskFile})
	deskURL := s.base + "/app/desk"
	if err := browserSignIn(ctx, deskURL+"/replies", "ana@acme.test", "demo-password-ana"); err != nil {
		t.Fatal(err)
	}

	// show opens a desk page, waits until sel holds want and captures it as name.
	show := func(t *testing.T, path, sel, want, name string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(deskURL+path)); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, sel, want); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, name)
	}

	t.Run("a saved reply is created and opens with its history", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.WaitVisible("#r-title"),
			chromedp.SendKeys("#r-title", "Shipping times"),
			chromedp.SendKeys("#r-body", "Orders ship within 2 business days."),
			chromedp.Click(`#new-reply button`),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, ".history", "created"); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "desk-saved-reply")
		show(t, "/replies", "#replies", "Shipping times", "desk-replies")
	})

	t.Run("a form posts once: the second submit of a double-click is dropped", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(deskURL+"/replies"), chromedp.WaitVisible("#new-reply")); err != nil {
			t.Fatal(err)
		}
		// Synthetic submit events run the page's handlers without posting: the first
		// passes, the second (the double-click's) is cancelled.
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const f = document.getElementById("new-reply");
			const first = new Event("submit", {cancelable: true, bubbles: true});
			const second = new Event("submit", {cancelable: true, bubbles: true});
			f.dispatchEvent(first);
			f.dispatchEvent(second);
			return first.defaultPrevented + "," + second.defaultPrevented;
		})()`))
		if err != nil || got != "false,true" {
			t.Fatalf("first and second submit cancelled: %q, %v", got, err)
		}
	})

	t.Run("the inboxes and who may see them", func(t *testing.T) {
		show(t, "/inboxes", "main", "Restricted to Bo", "desk-inboxes")
		show(t, "/inboxes/inbox_2", "#access-members", "Mo", "desk-inbox-access")
	})

	t.Run("a CSV file with a bad row is refused by line, fixed and imported", func(t *testing.T) {
		dir := t.TempDir()
		bad, good := filepath.Join(dir, "bad.csv"), filepath.Join(dir, "fixed.csv")
		if err := os.WriteFile(bad, []byte(deskImportBad), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(good, []byte(strings.Replace(deskImportBad, "not-an-email", "lee@customer.test", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		err := chromedp.Do(ctx,
			chromedp.Navigate(deskURL+"/import"),
			chromedp.WaitVisible("#i-file"),
			chromedp.SetValue("#i-inbox", "inbox_1"),
			chromedp.SetUploadFiles("#i-file", []string{bad}),
			chromedp.Click(`#upload button`),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#problems", "line 3"); err != nil {
			t.Fatal(err)
		}
		if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#run-import").length`)); err != nil || n != 0 {
			t.Fatalf("a file with a bad row is offered the Import button (%d, %v)", n, err)
		}
		screenshot(t, ctx, "desk-import-bad-row")
		err = chromedp.Do(ctx,
			chromedp.SetUploadFiles("#i-file", []string{good}),
			chromedp.Click(`#upload button`),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#run-import", "Import 2 row(s) into Support"); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "desk-import-preview")
		if err := chromedp.Do(ctx, chromedp.Click(`#run-import button`)); err != nil {
			t.Fatal(err)
		}
		if err := waitText(ctx, "#import-result", "2 conversation(s) created"); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "desk-import-done")
	})
	t.Run("the reports as charts", func(t *testing.T) {
		show(t, "/reports", "main", "Largest:", "desk-reports")
	})
}
