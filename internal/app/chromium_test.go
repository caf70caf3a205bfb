package app_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium package, which .ci/run installs (browser downloads do
// not work here).
const chromiumPath = "/usr/bin/chromium"

// headlessChromium starts a headless Chromium for one test; the test is skipped, saying why,
// when the package is not installed. CDP_DEBUG=1 logs the DevTools protocol to stderr.
func headlessChromium(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is absent: .ci/run installs it, and CI must run the browser tests", chromiumPath)
		}
		t.Skipf("browser test skipped: %s is absent (apt-get install -y chromium; .ci/run installs it)", chromiumPath)
	}
	// As root Chromium runs only without its sandbox; /dev/shm is small in containers.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(412, 915),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var copts []chromedp.ContextOption
	if os.Getenv("CDP_DEBUG") != "" {
		copts = append(copts, chromedp.WithDebugf(func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }))
	}
	ctx, cancelCtx := chromedp.NewContext(actx, copts...)
	// A bound on the whole test, so a stuck browser fails it rather than hang the run.
	ctx, cancelTime := context.WithTimeout(ctx, browserTestBound)
	t.Cleanup(func() { cancelTime(); cancelCtx(); cancelAlloc() })
	// Chromium starts here, so that its start-up is not spent inside a step's bound.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// browserTestBound ends a stuck browser test; waitBound a wait that will not succeed. Neither
// times anything: on a loaded machine Chromium alone takes 10-20 s to start.
const (
	browserTestBound = 5 * time.Minute
	waitBound        = 30 * time.Second
)

// screenshot saves the page under the test's artifacts (go test -artifacts keeps them).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := fullScreenshot(ctx)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	// RELAYROOM_SCREENSHOTS=docs/img (make screenshots) also keeps it for the docs, under
	// its bare name; a relative directory is the module's (tests run in their package's).
	if dir := os.Getenv(screenshotsEnv); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(moduleRoot(t), dir)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fullScreenshot waits for a laid-out page, then takes it whole. Chromium answers "Cannot
// take screenshot with 0 width" when asked between a form post's response and the new
// page's first layout (a CI run met it after an upload), so a refused shot is asked again
// until waitBound; only a page that never lays out fails.
func fullScreenshot(ctx context.Context) ([]byte, error) {
	deadline := time.Now().Add(waitBound)
	for {
		err := waitFor(ctx, `document.readyState === "complete" && document.documentElement.getBoundingClientRect().width > 0`)
		if err == nil {
			var png []byte
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 is PNG; below it chromedp writes JPEG
			if err == nil {
				return png, nil
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshotsEnv names the directory that keeps the browser tests' screenshots for the
// docs (docs/dashboard.md shows docs/img).
const screenshotsEnv = "RELAYROOM_SCREENSHOTS"

// moduleRoot is the directory of go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// waitFor waits until the JavaScript expression is true. It asks again after a navigation
// (a form post replaces the page under a running query); the bound only ends a failing test.
func waitFor(ctx context.Context, expr string) error {
	deadline := time.Now().Add(waitBound)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("never true (last error %v): %s", err, expr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitText waits until the element's text contains want.
func waitText(ctx context.Context, sel, want string) error {
	if err := waitFor(ctx, `(document.querySelector(`+jsString(sel)+`)||{textContent:""}).textContent.includes(`+jsString(want)+`)`); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`)||{textContent:"(absent)"}).textContent`))
		return fmt.Errorf("%s never contained %q (%w): %s", sel, want, err, text)
	}
	return nil
}

// waitLocation waits until the browser's page is at an address starting with prefix.
func waitLocation(ctx context.Context, prefix string) error {
	if err := waitFor(ctx, `location.href.startsWith(`+jsString(prefix)+`)`); err != nil {
		return fmt.Errorf("the browser never reached %s (%w): %s", prefix, err, pageText(ctx))
	}
	return nil
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// chromiumConsent opens an authorization URL in the browser as a person would: signs in as
// Ana when the login page comes first (not when the browser's session cookie is still
// good), ticks the choice whose label contains pick on the consent page and presses
// Allow. Chromium itself follows the server's redirect to the client's callback; the
// caller waits for it there.
func chromiumConsent(ctx context.Context, authURL, pick string) error {
	if err := chromedp.Do(ctx, chromedp.Navigate(authURL)); err != nil {
		return fmt.Errorf("open %s: %w", authURL, err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return fmt.Errorf("location: %w", err)
	}
	u, err := url.Parse(loc)
	if err != nil {
		return fmt.Errorf("location %q: %w", loc, err)
	}
	// Each wait has its own bound, so that a page that never comes fails the test in
	// waitBound with what the browser shows instead of at the whole test's bound.
	step, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	if u.Path == "/login" {
		err := chromedp.Do(step,
			chromedp.WaitVisible("#email"),
			chromedp.SendKeys("#email", anaEmail),
			chromedp.SendKeys("#password", anaPassword),
			chromedp.Submit("#password"),
		)
		if err != nil {
			return fmt.Errorf("sign in: %w (%s)", err, pageText(ctx))
		}
	}
	allow := `button[name="decision"][value="allow"]`
	if err := chromedp.Do(step, chromedp.WaitVisible(allow)); err != nil {
		return fmt.Errorf("the consent page never showed its Allow button: %w (%s)", err, pageText(ctx))
	}
	picked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		for (const l of document.querySelectorAll('label[for^="choice"]')) {
			if (l.textContent.includes(`+jsString(pick)+`)) { document.getElementById(l.htmlFor).click(); return true; }
		}
		return false;
	})()`))
	if err != nil || !picked {
		return fmt.Errorf("no choice %q on the consent page (%v): %s", pick, err, pageText(ctx))
	}
	if err := chromedp.Do(step, chromedp.Click(allow)); err != nil {
		return fmt.Errorf("allow: %w", err)
	}
	return nil
}

// browserSignIn opens a dashboard page signed out, signs in on the sign-in page it is sent
// to and waits until the browser is back at the page.
func browserSignIn(ctx context.Context, page, email, password string) error {
	step, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	if err := chromedp.Do(step,
		chromedp.Navigate(page),
		chromedp.WaitVisible("#email"),
		chromedp.SendKeys("#email", email),
		chromedp.SendKeys("#password", password),
		chromedp.Submit("#password"),
	); err != nil {
		return fmt.Errorf("sign in as %s: %w (%s)", email, err, pageText(ctx))
	}
	// The address changes before the page has loaded: a field looked up in between
	// belonged to a document about to be replaced ("Could not find node with given id").
	if err := waitFor(ctx, `location.href.startsWith(`+jsString(page)+`) && document.readyState === "complete"`); err != nil {
		return fmt.Errorf("the browser never loaded %s (%w): %s", page, err, pageText(ctx))
	}
	return nil
}

// submitAndLoad presses a form's button (or submits the form of a field) and waits until
// the page that answers has loaded: a mark left on the old page is gone.
func submitAndLoad(ctx context.Context, sel string, submit func(string, ...chromedp.QueryOption) chromedp.Action[chromedp.Void]) error {
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__beforeSubmit = true`)); err != nil {
		return fmt.Errorf("mark the page: %w", err)
	}
	if err := chromedp.Do(ctx, submit(sel)); err != nil {
		return fmt.Errorf("submit %s: %w", sel, err)
	}
	if err := waitFor(ctx, `document.readyState === "complete" && window.__beforeSubmit === undefined`); err != nil {
		return fmt.Errorf("the answer to %s never loaded: %w (%s)", sel, err, pageText(ctx))
	}
	return nil
}

// pageText is the open page's address and text, for a failure message.
func pageText(ctx context.Context) string {
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return loc + ": " + text
}
