package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/localpg"
	"github.com/relayroom/relayroom/internal/pg"
)

// devCredentials are the demo's keys and connect codes, kept under .data/ (mode 0600) so
// that a second `make run` prints the same ones instead of issuing new keys.
type devCredentials struct {
	Agents       map[string]string `json:"agents"`        // "org/slug" -> key
	ConnectCodes map[string]string `json:"connect_codes"` // admin.File.ProjectKey -> code
	DeskTokens   map[string]string `json:"desk_tokens"`   // desk workspace -> a personal access token
	// Saved keys and codes revoked or rotated since they were saved (on the dashboard,
	// with the CLI): the banner says so instead of printing what would be refused. A new
	// one is not issued here: that would undo the revocation.
	RevokedAgents map[string]bool `json:"-"`
	RevokedCodes  map[string]bool `json:"-"`
	// Members are the demo people's memberships as the database holds them now, by
	// "org/email": a role changed, or a person deactivated or removed, on the dashboard
	// since the last run is what the banner prints, not the demo file's first word.
	Members map[string]admin.UserLine `json:"-"`
}

func dev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.Flags("relayroom dev", stderr)
	dataDir := fs.String("data", ".data", "where the local cluster and the demo credentials live")
	demo := fs.String("demo", "deploy/demo.yaml", "demo data applied on start")
	pgScript := fs.String("pg-script", "deploy/local/pg.sh", "the script that installs and runs the local Postgres")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: relayroom dev [flags]\n\nWithout DATABASE_URL: installs PostgreSQL 15 + pgvector when missing, starts a private cluster\nunder --data, migrates, applies the demo data and serves, printing URLs, keys and client configuration.\nCtrl-C stops the server and the cluster.")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	lock, err := lockDataDir(*dataDir)
	if err != nil {
		return err
	}
	defer lock.Close() // the lock goes with the descriptor, and with the process however it ends
	// localDB is the URL of the cluster started here ("" when DATABASE_URL names another):
	// the banner prints it for the admin CLI in another terminal. It holds no password.
	localDB := ""
	if os.Getenv("DATABASE_URL") == "" && os.Getenv("DATABASE_URL"+config.FileSuffix) == "" {
		pgDir, err := filepath.Abs(filepath.Join(*dataDir, "pg"))
		if err != nil {
			return err
		}
		// Stop the cluster even though ctx is done: that is the point of Ctrl-C. Deferred
		// before the start: a Ctrl-C while it starts the cluster ends the script, and the
		// server it had started stayed up (stop is a no-op when there is none).
		defer func() {
			if _, err := localpg.Run(context.WithoutCancel(ctx), stderr, *pgScript, "stop", pgDir); err != nil {
				fmt.Fprintln(stderr, "stopping the local Postgres:", err)
			}
		}()
		url, err := localpg.Run(ctx, stderr, *pgScript, "start", pgDir)
		if err != nil {
			return err
		}
		if err := os.Setenv("DATABASE_URL", url); err != nil {
			return err
		}
		localDB = url
	}
	if err := ensureServerKeys(filepath.Join(*dataDir, "server-keys.json")); err != nil {
		return err
	}
	cfg, err := config.Load(nil, nil, os.Getenv)
	if err != nil {
		return err
	}
	if os.Getenv("RELAYROOM_WEBHOOK_PRIVATE_TARGETS") == "" {
		// Local development: a webhook on this machine is the point.
		cfg.WebhookPrivateTargets = true
	}
	log := app.NewLogger(stderr, cfg.LogLevel)
	// Libraries that log through the process's default logger (the OAuth server library
	// does, and the standard log package) then write the same redacted JSON lines.
	slog.SetDefault(app.LibraryLogger(log))
	warnUnknownNames(log)
	if _, err := pg.MigrateUp(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	if err := jobs.MigrateUp(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	creds, res, file, err := applyDemo(ctx, cfg, *demo, filepath.Join(*dataDir, "demo-credentials.json"))
	if err != nil {
		return err
	}
	cfg.MigrateOnStart = false
	return app.Run(ctx, cfg, log, func(public string) {
		// The dashboard's pages get the agents' activity to show (a fresh demo only).
		seeded, err := seedDashboardDemo(ctx, public, file, res, creds)
		if err != nil {
			log.Warn("dashboard demo data", "error", err.Error())
		}
		// The seed spoke as the demo's agents, none of which is connected: left seen, a
		// pager started now would get its first wake only a minute later.
		if err := forgetDemoPresence(ctx, cfg, seeded); err != nil {
			log.Warn("dashboard demo data: presence", "error", err.Error())
		}
		printBanner(stdout, public, cfg.MetricsAddr, localDB, creds, res, file)
	})
}

// forgetDemoPresence marks the parts of the projects the demo seeded as never seen.
func forgetDemoPresence(ctx context.Context, cfg config.Config, projects []uuid.UUID) error {
	if len(projects) == 0 {
		return nil
	}
	database, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 1, OpsMaxConns: 1})
	if err != nil {
		return err
	}
	defer database.Close()
	svc := admin.New(database, cfg.Public())
	for _, id := range projects {
		if err := svc.ForgetPresence(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// lockDataDir holds dir for this process: one `relayroom dev` a data folder. A second
// one reused the first's running cluster and, on its Ctrl-C, stopped it under the first
// server, which then answered "the database is unavailable" to every call. A cluster
// left running by a `dev` that was killed has no lock holder: it is reused and stopped
// as before.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "dev.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // the lock was not taken: nothing to release
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another `relayroom dev` (make run) is using %s: stop it first (Ctrl-C in its terminal), or give this one its own folder with --data", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// ensureServerKeys gives the local service its two server keys (sealing webhook secrets,
// signing download links), generated once and kept under .data/ so that webhook secrets
// and links survive a restart. Keys already in the environment win.
func ensureServerKeys(path string) error {
	keys := map[string]string{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &keys); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	changed := false
	for _, name := range []string{"RELAYROOM_SECRET_KEY", "RELAYROOM_SIGNING_KEY"} {
		if keys[name] == "" {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			keys[name], changed = hex.EncodeToString(b), true
		}
		if os.Getenv(name) == "" && os.Getenv(name+config.FileSuffix) == "" {
			if err := os.Setenv(name, keys[name]); err != nil {
				return err
			}
		}
	}
	if !changed {
		return nil
	}
	b, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func applyDemo(ctx context.Context, cfg config.Config, demoPath, credPath string) (devCredentials, admin.Result, admin.File, error) {
	creds := devCredentials{Agents: map[string]string{}, ConnectCodes: map[string]string{}}
	fresh := true // no earlier run's credentials: the demo is applied whole
	if b, err := os.ReadFile(credPath); err == nil {
		fresh = false
		if err := json.Unmarshal(b, &creds); err != nil {
			return creds, admin.Result{}, admin.File{}, fmt.Errorf("read %s: %w", credPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return creds, admin.Result{}, admin.File{}, err
	}
	fh, err := os.Open(demoPath)
	if err != nil {
		return creds, admin.Result{}, admin.File{}, err
	}
	defer fh.Close()
	file, err := admin.ParseFile(fh)
	if err != nil {
		return creds, admin.Result{}, admin.File{}, err
	}
	database, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 2, OpsMaxConns: 2})
	if err != nil {
		return creds, admin.Result{}, admin.File{}, err
	}
	defer database.Close()
	svc := admin.New(database, cfg.Public())
	// A restart applies the file again only when it declares an agent or project the
	// database lacks: applied on every start, it set back what people changed on the
	// dashboard since (a revoked agreement active again, an accepted one pending).
	var res admin.Result
	if fresh {
		res, err = svc.Apply(ctx, file, admin.Options{})
	} else {
		res, _, err = svc.ApplyIfNew(ctx, file)
	}
	if err != nil {
		return creds, res, file, err
	}
	for ref, a := range res.Agents {
		if a.Key != "" {
			creds.Agents[ref] = a.Key
		} else if creds.Agents[ref] == "" {
			// The key was issued by an earlier run whose credentials file is gone: the only
			// way to show a working key is a new one.
			out, err := svc.RotateAgentKey(ctx, ref)
			if err != nil {
				return creds, res, file, err
			}
			creds.Agents[ref] = out.Key
		}
	}
	for _, ps := range file.Projects {
		key := file.ProjectKey(ps)
		if code := res.Projects[key].ConnectCode; code != "" {
			creds.ConnectCodes[key] = code
		} else if creds.ConnectCodes[key] == "" {
			out, err := svc.RotateConnectCode(ctx, ps.Host+"/"+ps.Slug)
			if err != nil {
				return creds, res, file, err
			}
			creds.ConnectCodes[key] = out.ConnectCode
		}
	}
	if !fresh {
		if err := markRevoked(ctx, svc, &creds); err != nil {
			return creds, res, file, err
		}
	}
	if err := seedDeskDemo(ctx, database, file, res, &creds); err != nil {
		return creds, res, file, err
	}
	users, err := svc.ListUsers(ctx, "")
	if err != nil {
		return creds, res, file, err
	}
	creds.Members = make(map[string]admin.UserLine, len(users))
	for _, u := range users {
		creds.Members[u.OrgSlug+"/"+u.Email] = u
	}
	b, err := json.MarshalIndent(creds, "", "  ")
	if err != nil {
		return creds, res, file, err
	}
	if err := os.MkdirAll(filepath.Dir(credPath), 0o755); err != nil {
		return creds, res, file, err
	}
	if err := os.WriteFile(credPath, b, 0o600); err != nil {
		return creds, res, file, fmt.Errorf("save demo credentials: %w", err)
	}
	return creds, res, file, nil
}

// markRevoked finds the saved keys and codes that no longer verify.
func markRevoked(ctx context.Context, svc *admin.Service, creds *devCredentials) error {
	creds.RevokedAgents, creds.RevokedCodes = map[string]bool{}, map[string]bool{}
	for _, set := range []struct {
		saved   map[string]string
		revoked map[string]bool
	}{{creds.Agents, creds.RevokedAgents}, {creds.ConnectCodes, creds.RevokedCodes}} {
		for name, credential := range set.saved {
			active, err := svc.CredentialActive(ctx, credential)
			if err != nil {
				return err
			}
			set.revoked[name] = !active
		}
	}
	return nil
}

// printBanner prints what to paste; metricsAddr is RELAYROOM_METRICS_ADDR ("" when the
// metrics are on the main listener), localDB the local cluster's URL ("" when the
// database is the user's own, whose URL may hold a password).
func printBanner(w io.Writer, public, metricsAddr, localDB string, creds devCredentials, res admin.Result, file admin.File) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nrelayroom is running at %s   (Ctrl-C stops it and the local Postgres)\n", public)
	metrics := public + "/metrics"
	if metricsAddr != "" {
		metrics = "on " + metricsAddr + " (RELAYROOM_METRICS_ADDR)"
	}
	fmt.Fprintf(&b, "health: %s/healthz   ready: %s/readyz   metrics: %s\n", public, public, metrics)
	if localDB != "" {
		// The admin commands this banner suggests read DATABASE_URL: in another terminal
		// they said only "DATABASE_URL is required".
		fmt.Fprintf(&b, "admin CLI, in another terminal: export DATABASE_URL='%s'   then ./bin/relayroom admin --help\n", localDB)
	}
	dashboardBanner(&b, public, file, creds.Members)
	agents := sortedKeys(creds.Agents)
	fmt.Fprintln(&b, "\nDemo agent keys (send as X-Agent-Key or Authorization: Bearer):")
	for _, ref := range agents {
		if creds.RevokedAgents[ref] {
			fmt.Fprintf(&b, "  %-18s (revoked since the last run: make a new key on the dashboard's agent page, or ./bin/relayroom admin agent rotate-key --agent %s)\n", ref, ref)
			continue
		}
		fmt.Fprintf(&b, "  %-18s %s\n", ref, creds.Agents[ref])
	}
	mcpServers := map[string]any{}
	for _, ps := range file.Projects {
		project := file.ProjectKey(ps)
		p, code := res.Projects[project], creds.ConnectCodes[project]
		if code == "" {
			continue
		}
		room := fmt.Sprintf("%s/api/mcp/p/%s", public, p.ID)
		fmt.Fprintf(&b, "\nProject %q of %q (id %s)\n", ps.Slug, ps.Host, p.ID)
		fmt.Fprintf(&b, "  room (one room):   %s\n", room)
		fmt.Fprintf(&b, "  all rooms:         %s/api/mcp\n", public)
		members := bannerMembers(ps)
		if creds.RevokedCodes[project] {
			fmt.Fprintf(&b, "  threads: the connect code was rotated since the last run; its URLs are on the dashboard's project page, or ./bin/relayroom admin project rotate-code --project %s/%s\n", ps.Host, ps.Slug)
		} else {
			fmt.Fprintln(&b, "  threads, one URL per part:")
			for _, m := range members {
				fmt.Fprintf(&b, "    %-12s %s\n", m.part, admin.ThreadsURL(public, code, m.part))
			}
		}
		fmt.Fprintln(&b, "\nClaude Code (paste one line per agent you want to be):")
		for _, m := range members {
			if creds.RevokedCodes[project] || creds.RevokedAgents[m.agent] {
				continue
			}
			url, key := admin.ThreadsURL(public, code, m.part), creds.Agents[m.agent]
			fmt.Fprintf(&b, "  claude mcp add --transport http relayroom-%s '%s' --header 'X-Agent-Key: %s'\n", m.part, url, key)
			mcpServers["relayroom-"+m.part] = map[string]any{"type": "http", "url": url, "headers": map[string]string{"X-Agent-Key": key}}
		}
		for _, m := range members {
			if creds.RevokedAgents[m.agent] {
				continue
			}
			key := creds.Agents[m.agent]
			fmt.Fprintf(&b, "  claude mcp add --transport http room-%s '%s' --header 'X-Agent-Key: %s'\n", m.part, room, key)
			mcpServers["room-"+m.part] = map[string]any{"type": "http", "url": room, "headers": map[string]string{"X-Agent-Key": key}}
		}
		// Signing in (OAuth): the endpoint URL alone, without query (the part is chosen at
		// consent), and a demo person of the project's host.
		for _, u := range file.Users {
			if u.Org != ps.Host || u.Password == "" {
				continue
			}
			endpoints := []string{room, public + "/api/mcp"}
			if !creds.RevokedCodes[project] {
				endpoints = append([]string{strings.SplitN(admin.ThreadsURL(public, code, "x"), "?", 2)[0]}, endpoints...)
			}
			for _, ep := range endpoints {
				fmt.Fprintf(&b, "  Or connect with only the URL: paste %s into your client and sign in as %s / %s\n", ep, u.Email, u.Password)
			}
			break
		}
	}
	if len(creds.DeskTokens) > 0 {
		deskBanner(&b, public, creds, mcpServers)
	}
	for _, ref := range agents {
		if creds.RevokedAgents[ref] {
			continue
		}
		fmt.Fprintf(&b, "\nWake an agent when work arrives (runs CMD once per wake, the wake as JSON on stdin):\n")
		fmt.Fprintf(&b, "  RELAYROOM_AGENT_KEY='%s' ./bin/relayroom pager --url %s --exec 'cat'\n", creds.Agents[ref], public)
		break
	}
	js, _ := json.MarshalIndent(map[string]any{"mcpServers": mcpServers}, "  ", "  ")
	fmt.Fprintf(&b, "\nGeneric MCP client configuration (JSON):\n  %s\n\n", js)
	fmt.Fprint(w, b.String())
}

type bannerMember struct{ part, agent string }

// bannerMembers lists a project's parts with their agents, by part; a part defaults to
// the agent's slug, as apply does.
func bannerMembers(ps admin.ProjectSpec) []bannerMember {
	out := make([]bannerMember, 0, len(ps.Members))
	for _, m := range ps.Members {
		part := m.Part
		if part == "" {
			part = m.Agent[strings.Index(m.Agent, "/")+1:]
		}
		out = append(out, bannerMember{part: part, agent: m.Agent})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].part < out[j].part })
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
