package app_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

const demo = `
organisations:
  - {slug: acme, name: Acme Corp, plan: scale}
  - {slug: globex, name: Globex, plan: growth}
  - {slug: initech, name: Initech}
agents:
  - {org: acme, slug: architect, name: Architect, model: claude-opus-4, kind: always_on}
  - {org: acme, slug: backend, name: Backend, model: claude-sonnet-4}
  - {org: globex, slug: qa-lead, name: QA Lead, model: gpt-5}
  - {org: initech, slug: peter, name: Peter}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, access: manager, capabilities: [urgent, needsHuman]}
      - {agent: acme/backend, part: backend}
      - {agent: globex/qa-lead, part: qa-lead}
    guests:
      - {org: globex, status: active, grants: [read_memory]}
  - slug: other
    name: Other
    host: initech
    members:
      - {agent: initech/peter, part: peter}
`

// applyFile seeds d with an admin file. The URLs admin prints are not used: tests build
// them from their own base; only the credentials and ids matter.
func applyFile(ctx context.Context, d *pg.DB, file string) (admin.Result, error) {
	f, err := admin.ParseFile(strings.NewReader(file))
	if err != nil {
		return admin.Result{}, err
	}
	return admin.New(d, "http://unused").Apply(ctx, f, admin.Options{})
}

// syncBuffer collects log lines written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is a running relayroom started by app.Run, exactly as `relayroom serve` starts it.
type server struct {
	dbURL string
	base  string
	logs  *syncBuffer
	res   admin.Result
	stop  func() error
}

func (s *server) threadsURL(project, part string) string {
	return admin.ThreadsURL(s.base, s.res.Projects[project].ConnectCode, part)
}

func (s *server) key(agent string) string { return s.res.Agents[agent].Key }

// nextWake is one pager poll that does not wait (GET /api/wakes/next?wait=0) by the agent
// of key, sent with c.
func (s *server) nextWake(t testing.TB, c *http.Client, key string) (int, string) {
	t.Helper()
	return s.pollWake(t, c, key, 0)
}

// awaitWake is one pager poll that waits up to 10 s for a wake the test expects. A poll
// that does not wait can miss a wake that is there: the sweep folding the same events at
// that moment holds them (SKIP LOCKED), and the pager claims them at its next look.
func (s *server) awaitWake(t testing.TB, key string) (int, string) {
	t.Helper()
	return s.pollWake(t, http.DefaultClient, key, 10)
}

func (s *server) pollWake(t testing.TB, c *http.Client, key string, waitSeconds int) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+"/api/wakes/next?wait="+strconv.Itoa(waitSeconds), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Agent-Key", key)
	status, _, body := testfix.Do(t, c, req)
	return status, body
}

func startServer(t testing.TB) *server { return startServerWith(t, nil) }

// startServerWith runs before(ctx, db, credentials) on the seeded database before the
// server starts.
func startServerWith(t testing.TB, before func(ctx context.Context, d *pg.DB, res admin.Result)) *server {
	t.Helper()
	return startServerOpts(t, serverOptions{before: before})
}

// startServerFile is startServerWith seeded from another admin file than demo.
func startServerFile(t testing.TB, file string, before func(ctx context.Context, d *pg.DB, res admin.Result)) *server {
	t.Helper()
	return startServerOpts(t, serverOptions{file: file, before: before})
}

// serverOptions change how a test server is seeded and configured; the zero value is the
// demo file and the default configuration.
type serverOptions struct {
	file   string                                                // admin file applied first (demo when empty)
	before func(ctx context.Context, d *pg.DB, res admin.Result) // runs on the seeded database
	tune   func(*config.Config)                                  // changes the configuration before the start
}

func startServerOpts(t testing.TB, o serverOptions) *server {
	t.Helper()
	if o.file == "" {
		o.file = demo
	}
	u, res := seedFile(t, o.file, o.before)
	cfg := testConfig(t, u)
	if o.tune != nil {
		o.tune(&cfg)
	}
	logs := &syncBuffer{}
	s := &server{logs: logs, res: res, dbURL: u}
	if n := testReplicas(t); n > 1 {
		s.base, s.stop = startReplicas(t, cfg, logs, n)
	} else {
		s.base, s.stop = startOne(t, cfg, logs)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

// testConfig is a test server's configuration on the database at u.
func testConfig(t testing.TB, u string) config.Config {
	t.Helper()
	return config.Config{
		DatabaseURL: u, Addr: "127.0.0.1:0", LogLevel: "info",
		ShutdownTimeout: 10 * time.Second, StatementTimeout: testfix.StatementTimeout(t),
		MaxConns: 8, MaxBodyBytes: 4 << 20,
	}
}

// serverStartBound only ends a test whose server never starts: at a load average of 30 a
// start (the embedder's load, the migrations' check) outlasted 30 s.
const serverStartBound = 2 * time.Minute

// startOne runs one in-process server with cfg and returns its URL and how to stop it.
func startOne(t testing.TB, cfg config.Config, logs *syncBuffer) (string, func() error) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- app.Run(runCtx, cfg, app.NewLogger(logs, "info"), func(p string) { ready <- p }) }()
	var base string
	select {
	case base = <-ready:
	case err := <-errc:
		t.Fatalf("app.Run: %v", err)
	case <-time.After(serverStartBound):
		t.Fatalf("server did not start in %s", serverStartBound)
	}
	var once sync.Once
	var stopErr error
	return base, func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-errc:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("server did not stop")
			}
		})
		return stopErr
	}
}

// seedDemo makes a fresh database with the demo file applied, then runs before (if any)
// on it; it returns the database URL and the credentials.
func seedDemo(t testing.TB, before func(ctx context.Context, d *pg.DB, res admin.Result)) (string, admin.Result) {
	t.Helper()
	return seedFile(t, demo, before)
}

// seedFile is seedDemo with another admin file.
func seedFile(t testing.TB, file string, before func(ctx context.Context, d *pg.DB, res admin.Result)) (string, admin.Result) {
	t.Helper()
	u := pgtest.New(t)
	ctx := context.Background()
	// Seeding is no test of the deadline: it gets the test servers' budget.
	d, err := pg.Open(ctx, u, pg.Options{MaxConns: 2, OpsMaxConns: 2, StatementTimeout: testfix.StatementTimeout(t)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := applyFile(ctx, d, file)
	if err == nil && before != nil {
		before(ctx, d, res)
	}
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	return u, res
}

// post sends one raw JSON-RPC message and returns status, headers and body.
func post(t testing.TB, url, key, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	setCredential(req.Header, key)
	return testfix.Do(t, http.DefaultClient, req)
}

// setCredential sends a credential the way its holder does: an agent key as X-Agent-Key,
// a person's desk token as Authorization: Bearer.
func setCredential(h http.Header, key string) {
	switch {
	case strings.HasPrefix(key, desk.TokenPrefix):
		h.Set("Authorization", "Bearer "+key)
	case key != "":
		h.Set("X-Agent-Key", key)
	}
}

// openSeeded opens pools on the server's database, for tests that look behind the API.
func openSeeded(t testing.TB, s *server) *pg.DB {
	t.Helper()
	return openDB(t, s.dbURL)
}

// openDB opens small pools on the database u, closed when the test ends.
func openDB(t testing.TB, u string) *pg.DB {
	t.Helper()
	d, err := pg.Open(context.Background(), u, pg.Options{MaxConns: 2, OpsMaxConns: 2, StatementTimeout: testfix.StatementTimeout(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}
