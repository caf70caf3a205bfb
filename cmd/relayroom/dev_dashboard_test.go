package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestMakeRunDashboard: `make run`'s banner names the dashboard and every demo person's
// sign-in, and the demo data (deploy/demo.yaml plus the agents' activity seeded through
// the endpoints) leaves no dashboard page empty; a restart seeds nothing twice.
func TestMakeRunDashboard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config.Config{DatabaseURL: pgtest.New(t), Addr: "127.0.0.1:0", LogLevel: "error", ShutdownTimeout: 10 * time.Second,
		StatementTimeout: testfix.StatementTimeout(t), MaxConns: 8, MaxBodyBytes: 4 << 20}
	creds, res, file, err := applyDemo(ctx, cfg, "../../deploy/demo.yaml", filepath.Join(t.TempDir(), "creds.json"))
	if err != nil {
		t.Fatal(err)
	}
	var banner strings.Builder
	ready, errc := make(chan string, 1), make(chan error, 1)
	go func() {
		errc <- app.Run(ctx, cfg, app.NewLogger(io.Discard, "error"), func(public string) {
			seeded, err := seedDashboardDemo(ctx, public, file, res, creds)
			if err == nil {
				err = forgetDemoPresence(ctx, cfg, seeded)
			}
			if err != nil {
				errc <- err
				return
			}
			printBanner(&banner, public, "", "", creds, res, file)
			ready <- public
		})
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not start")
	}

	t.Run("the banner names the dashboard and each person's sign-in", func(t *testing.T) {
		testfix.CheckContains(t, "banner", banner.String(), "Dashboard: "+base+"/app/", "sign in as ana@acme.test", "demo-password-ana", "(Acme Corp, owner)", "ivy@initech.test")
	})

	room := res.Projects["escalations"].ID.String()
	pages := []struct {
		email, password, path string
		want                  []string
	}{
		{"ana@acme.test", "demo-password-ana", "/app/", []string{"Thread flagged for people", "Result to accept or reject", "Knowledge to review", "Agreement not yet accepted"}},
		{"ana@acme.test", "demo-password-ana", "/app/rooms/" + room, []string{"checkout timeout", "On it."}},
		{"ana@acme.test", "demo-password-ana", "/app/rooms/" + room + "/memory", []string{"retries on payment calls"}},
		{"ana@acme.test", "demo-password-ana", "/app/rooms/" + room + "/tasks", []string{"Add a 5 s budget", "checkout completed in 11 s"}},
		{"ana@acme.test", "demo-password-ana", "/app/rooms/" + room + "/knowledge", []string{"Payment retries need their own budget"}},
		{"ana@acme.test", "demo-password-ana", "/app/admin/agents", []string{"Architect", "Backend"}},
		{"ana@acme.test", "demo-password-ana", "/app/admin/projects/" + room, []string{"qa-lead", "Globex", "Initech"}},
		{"ana@acme.test", "demo-password-ana", "/app/admin/people", []string{"bo@acme.test"}},
		{"ana@acme.test", "demo-password-ana", "/app/admin/clients", []string{demoAppName}},
		{"ana@acme.test", "demo-password-ana", "/app/desk/reports", []string{"Conversations created", `<rect x="`, "Mean resolution time"}}, // <rect x=: a bar drawn (legend swatches have no x)
		{"ana@acme.test", "demo-password-ana", "/app/desk/inboxes", []string{"Support", "Billing", "Restricted to Bo"}},
		{"ana@acme.test", "demo-password-ana", "/app/desk/replies", []string{"CSV import requirements", "Refund policy"}},
		{"ana@acme.test", "demo-password-ana", "/app/desk/import", []string{`<option value="inbox_1">Support</option>`}},
		{"ivy@initech.test", "demo-password-ivy", "/app/", []string{"Agreement waiting for your company"}},
		{"ivy@initech.test", "demo-password-ivy", "/app/admin/agreements", []string{"Escalations", "waits for your acceptance"}},
		{"gus@globex.test", "demo-password-gus", "/app/rooms/" + room + "/memory", []string{"Checkout times out"}},
	}
	for _, p := range pages {
		t.Run(p.email+" "+p.path, func(t *testing.T) {
			c := demoSignIn(t, base, p.email, p.password)
			status, body := testfix.Get(t, c, base+p.path)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			for _, w := range p.want {
				if !strings.Contains(body, w) {
					t.Errorf("%s lacks %q", p.path, w)
				}
			}
		})
	}

	t.Run("no demo part is online once seeded: a pager started now gets its wake at once", func(t *testing.T) {
		d, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 1, OpsMaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if n := testfix.Scalar[int](t, d, `SELECT count(*) FROM membership WHERE last_seen_at IS NOT NULL`); n != 0 {
			t.Fatalf("%d parts seen", n)
		}
	})

	t.Run("a restart seeds nothing twice", func(t *testing.T) {
		seeded, err := seedDashboardDemo(ctx, base, file, res, creds)
		if err != nil || len(seeded) != 0 {
			t.Fatalf("seeded %v again: %v", seeded, err)
		}
		c := demoSignIn(t, base, "ana@acme.test", "demo-password-ana")
		_, body := testfix.Get(t, c, base+"/app/rooms/"+room)
		if n := strings.Count(body, "checkout timeout from yesterday"); n != 1 {
			t.Fatalf("the first message is shown %d times", n)
		}
	})
}

var demoCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// demoSignIn signs a person in through the sign-in form with a cookie jar.
func demoSignIn(t *testing.T, base, email, password string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, page := testfix.Get(t, c, base+"/login")
	m := demoCSRF.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form: %s", page)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"csrf": {m[1]}, "email": {email}, "password": {password}, "return": {"/app/"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d", email, resp.StatusCode)
	}
	return c
}
