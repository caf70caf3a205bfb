package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestServerKeysAreMadeOnceAndKept: make run's keys survive a restart (webhook secrets
// sealed with one key must open after the next start), and a key in the environment wins.
func TestServerKeysAreMadeOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server-keys.json")
	t.Setenv("RELAYROOM_SECRET_KEY", "")
	t.Setenv("RELAYROOM_SIGNING_KEY", "")
	if err := ensureServerKeys(path); err != nil {
		t.Fatal(err)
	}
	first, second := os.Getenv("RELAYROOM_SECRET_KEY"), os.Getenv("RELAYROOM_SIGNING_KEY")
	if len(first) != 64 || len(second) != 64 || first == second {
		t.Fatalf("keys not generated: %q %q", first, second)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keys file must be private: %v %v", st, err)
	}
	t.Setenv("RELAYROOM_SECRET_KEY", "")
	t.Setenv("RELAYROOM_SIGNING_KEY", "from-the-environment-0123456789abcdef")
	if err := ensureServerKeys(path); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("RELAYROOM_SECRET_KEY") != first {
		t.Fatal("a restart made a new secret key: sealed webhook secrets would no longer open")
	}
	if os.Getenv("RELAYROOM_SIGNING_KEY") != "from-the-environment-0123456789abcdef" {
		t.Fatal("the environment's key was overridden")
	}
}

// TestHealthcheckFollowsReadiness: the container probe succeeds only on a ready server.
func TestHealthcheckFollowsReadiness(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := healthcheck(context.Background(), []string{"--addr", addr}, io.Discard); err != nil {
		t.Fatalf("ready server: %v", err)
	}
	ready = false
	if err := healthcheck(context.Background(), []string{"--addr", addr}, io.Discard); err == nil {
		t.Fatal("an unready server passed the healthcheck")
	}
	srv.Close()
	if err := healthcheck(context.Background(), []string{"--addr", addr}, io.Discard); err == nil {
		t.Fatal("a stopped server passed the healthcheck")
	}
}

// TestBannerUsesEachProjectsParts: the printed threads URLs name the part from the file
// (not the agent's slug) with that part's own agent's key, and an agent that is not a
// member of a project gets no URL in it.
func TestBannerUsesEachProjectsParts(t *testing.T) {
	file := admin.File{Projects: []admin.ProjectSpec{{Slug: "p", Host: "acme", Members: []admin.MemberSpec{
		{Agent: "acme/architect", Part: "lead"}, {Agent: "acme/backend"},
	}}}, Users: []admin.UserSpec{{Email: "ana@acme.test", Org: "acme", Password: "demo-pw"}}}
	creds := devCredentials{
		Agents:       map[string]string{"acme/architect": "sk-qyt-AAA", "acme/backend": "sk-qyt-BBB", "acme/outsider": "sk-qyt-CCC"},
		ConnectCodes: map[string]string{"p": "qyt_cc_CODE"},
	}
	var out strings.Builder
	printBanner(&out, "http://h", "", "", creds, admin.Result{Projects: map[string]admin.ProjectOut{"p": {}}}, file)
	s := out.String()
	testfix.CheckContains(t, "banner", s,
		"relayroom-lead 'http://h/mcp/qyt_cc_CODE?part=lead' --header 'X-Agent-Key: sk-qyt-AAA'",
		"relayroom-backend 'http://h/mcp/qyt_cc_CODE?part=backend' --header 'X-Agent-Key: sk-qyt-BBB'",
		"Or connect with only the URL: paste http://h/mcp/qyt_cc_CODE into your client and sign in as ana@acme.test / demo-pw",
		"Or connect with only the URL: paste http://h/api/mcp into your client and sign in as ana@acme.test / demo-pw",
	)
	if strings.Contains(s, "part=architect") || strings.Contains(s, "part=outsider") {
		t.Errorf("banner invents parts:\n%s", s)
	}
	if !strings.Contains(s, "metrics: http://h/metrics") {
		t.Errorf("banner without the metrics URL:\n%s", s)
	}
	// With a listener of their own, the banner does not send anyone to a 404.
	out.Reset()
	printBanner(&out, "http://h", "127.0.0.1:9090", "", creds, admin.Result{Projects: map[string]admin.ProjectOut{"p": {}}}, file)
	if s := out.String(); strings.Contains(s, "http://h/metrics") || !strings.Contains(s, "metrics: on 127.0.0.1:9090 (RELAYROOM_METRICS_ADDR)") {
		t.Errorf("banner with RELAYROOM_METRICS_ADDR:\n%s", s)
	}
	t.Run("the local cluster's URL is given for the admin CLI, the user's own database's never", func(t *testing.T) {
		if strings.Contains(s, "export DATABASE_URL") {
			t.Errorf("a banner without a local cluster names a database:\n%s", s)
		}
		out.Reset()
		printBanner(&out, "http://h", "", "postgres://postgres@127.0.0.1:54329/relayroom?sslmode=disable", creds, admin.Result{Projects: map[string]admin.ProjectOut{"p": {}}}, file)
		testfix.CheckContains(t, "banner", out.String(), "export DATABASE_URL='postgres://postgres@127.0.0.1:54329/relayroom?sslmode=disable'")
	})
}

// TestOneDevAFolder: a second `make run` on the same folder reused the first one's
// cluster and stopped it under the first server on its Ctrl-C. It now refuses to start
// while the first holds the folder, and starts once the first has ended.
func TestOneDevAFolder(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "another `relayroom dev`") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second dev on the same folder: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	third.Close()
}

// TestARestartNamesWhatWasRevoked: a key revoked (or rotated) on the dashboard since the
// last `make run` was printed again by the next one, with the client configuration built
// on it, and every line pasted from it was refused. The banner now says it was revoked
// and how to get a new one, and issues none itself: that would undo the revocation.
func TestARestartNamesWhatWasRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, credPath, first, d := firstDemoRun(t)
	svc := admin.New(d, "http://h")
	if _, err := svc.RotateAgentKey(ctx, "acme/architect"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RotateConnectCode(ctx, "acme/escalations"); err != nil {
		t.Fatal(err)
	}
	banner := restartBanner(t, cfg, credPath)
	t.Run("the revoked key and code are not printed", func(t *testing.T) {
		for _, old := range []string{first.Agents["acme/architect"], first.ConnectCodes["escalations"]} {
			if strings.Contains(banner, old) {
				t.Fatalf("the banner prints a revoked credential:\n%s", banner)
			}
		}
	})
	t.Run("the banner says they were revoked and how to get new ones", func(t *testing.T) {
		testfix.CheckContains(t, "banner", banner,
			"acme/architect     (revoked since the last run",
			"admin agent rotate-key --agent acme/architect)",
			"admin project rotate-code --project acme/escalations\n")
	})
	t.Run("the keys still valid are printed as before", func(t *testing.T) {
		testfix.CheckContains(t, "banner", banner, first.Agents["acme/backend"])
	})
}

// TestARestartPrintsTheRolesPeopleHaveNow: a restart does not apply the demo file again,
// so a role changed on the dashboard since stays; the banner printed the file's role
// anyway ("Bo (Acme Corp, member)" for an admin), and a person deactivated or removed as
// if they could still act.
func TestARestartPrintsTheRolesPeopleHaveNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, credPath, _, d := firstDemoRun(t)
	if err := d.Operator(ctx, func(tx *pg.Tx) error {
		_, err := tx.Exec(ctx, `
			WITH bo AS (UPDATE org_member SET role = 'admin' WHERE user_id = (SELECT id FROM app_user WHERE email = 'bo@acme.test')),
			     gus AS (UPDATE org_member SET deactivated_at = now() WHERE user_id = (SELECT id FROM app_user WHERE email = 'gus@globex.test'))
			DELETE FROM org_member WHERE user_id = (SELECT id FROM app_user WHERE email = 'ivy@initech.test')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	banner := restartBanner(t, cfg, credPath)
	for _, c := range []struct{ behaviour, line string }{
		{"a role changed since is the one printed", "bo@acme.test         demo-password-bo     (Acme Corp, admin)"},
		{"a deactivated person is said to be", "gus@globex.test      demo-password-gus    (Globex, admin, deactivated)"},
		{"a person removed from their organisation is said to be", "ivy@initech.test     demo-password-ivy    (no longer in Initech)"},
		{"an unchanged person is printed as before", "ana@acme.test        demo-password-ana    (Acme Corp, owner)"},
	} {
		t.Run(c.behaviour, func(t *testing.T) {
			testfix.CheckContains(t, "banner", banner, c.line)
		})
	}
}

// firstDemoRun is a first `make run`'s demo on a fresh database: the settings and the
// credentials file a restart reads again, what it saved, and the database to change
// between the two runs (closed when the test ends).
func firstDemoRun(t *testing.T) (config.Config, string, devCredentials, *pg.DB) {
	t.Helper()
	ctx := context.Background()
	cfg := config.Config{DatabaseURL: pgtest.New(t), StatementTimeout: testfix.StatementTimeout(t)}
	credPath := filepath.Join(t.TempDir(), "creds.json")
	first, _, _, err := applyDemo(ctx, cfg, "../../deploy/demo.yaml", credPath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 1, OpsMaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return cfg, credPath, first, d
}

// restartBanner is the banner a second `make run` prints, on the database and with the
// credentials file firstDemoRun left.
func restartBanner(t *testing.T, cfg config.Config, credPath string) string {
	t.Helper()
	again, res, file, err := applyDemo(context.Background(), cfg, "../../deploy/demo.yaml", credPath)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printBanner(&out, "http://h", "", "", again, res, file)
	return out.String()
}
