package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/testfix"
)

// pgbouncerPath is Debian's pgbouncer package, which .ci/run installs.
const pgbouncerPath = "/usr/sbin/pgbouncer"

// startPgBouncer runs PgBouncer in transaction mode in front of the database at dbURL
// for one test and returns the URL of the same database through it. The test is skipped
// without the package, except in CI.
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	if _, err := os.Stat(pgbouncerPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is absent: .ci/run installs it, and CI must run the pooler test", pgbouncerPath)
		}
		t.Skipf("pooler test skipped: %s is absent (apt-get install -y pgbouncer; .ci/run installs it)", pgbouncerPath)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is private to this user, and PgBouncer runs as another.
	dir, err := os.MkdirTemp("", "relayroom-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ini := filepath.Join(dir, "pgbouncer.ini")
	users := filepath.Join(dir, "users.txt")
	// Transaction mode, the startup parameters a pgx pool sends ignored (relayroom sends
	// none behind a pooler), trust as the test cluster; a server pool smaller than the
	// server's, so that transactions share server connections as in production.
	conf := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 100
ignore_startup_parameters = extra_float_digits
logfile = %s
`, db, u.Hostname(), u.Port(), db, u.User.Username(), port, users, filepath.Join(dir, "pgbouncer.log"))
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte(strconv.Quote(u.User.Username())+` ""`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pgbouncerPath, ini)
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root: as the cluster's own user, as pg.sh runs it.
		pgUser, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(pgUser.Uid)
		gid, _ := strconv.Atoi(pgUser.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // killed: its exit status says so
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer did not listen within 30 s: %s\n%s", out.String(), log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pooled := *u
	pooled.Host = fmt.Sprintf("127.0.0.1:%d", port)
	return pooled.String()
}

// TestBehindATransactionPooler: relayroom serves through PgBouncer in transaction mode
// when RELAYROOM_DIRECT_DATABASE_URL says how to reach the database without it. Before,
// the pooler refused the pool's startup parameters; allowed, the request pool's session
// SET ROLE stayed on a server connection that the migration check then got ("permission
// denied for schema public"), and a request could run as the owner.
func TestBehindATransactionPooler(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, serverOptions{tune: func(cfg *config.Config) {
		cfg.DirectDatabaseURL = cfg.DatabaseURL
		cfg.DatabaseURL = startPgBouncer(t, cfg.DatabaseURL)
	}})
	arch, backend := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "backend")
	t.Run("tools answer through the pooler", func(t *testing.T) {
		if a := callTool(t, arch, s.key("acme/architect"), "whoami", nil); a.status != http.StatusOK || a.isErr || !strings.Contains(a.text, `"architect"`) {
			t.Fatalf("whoami: %d %s", a.status, a.body)
		}
	})
	t.Run("a waiting pager is woken by a message, through the listener on the direct URL", func(t *testing.T) {
		type poll struct {
			status int
			body   string
		}
		got := make(chan poll, 1)
		go func() {
			status, body := s.awaitWake(t, s.key("acme/backend"))
			got <- poll{status, body}
		}()
		// The poll is waiting once the server sees it wait; a message before that would be
		// found by its first look, not by the listener.
		time.Sleep(500 * time.Millisecond)
		a := callTool(t, arch, s.key("acme/architect"), "send", map[string]any{"to": []string{"backend"}, "subject": "Through the pooler", "body": "Does the wake arrive?"})
		var sent struct{ ThreadID string }
		if a.status != http.StatusOK || a.isErr || json.Unmarshal([]byte(a.text), &sent) != nil || sent.ThreadID == "" {
			t.Fatalf("send: %d %s", a.status, a.body)
		}
		if p := <-got; p.status != http.StatusOK || !strings.Contains(p.body, sent.ThreadID) {
			t.Fatalf("the pager's poll (want a wake naming thread %s): %d %s", sent.ThreadID, p.status, p.body)
		}
	})
	t.Run("the listeners hold their LISTEN on the direct URL, not through the pooler", func(t *testing.T) {
		// The direct URL is the test database's own: its backends that listen are the
		// session pool's. (Through PgBouncer a LISTEN would sit on a server connection
		// that other clients' transactions then share, and no notification would reach it.)
		// A connection of its own, one statement a poll: inside one transaction
		// pg_stat_activity is read once.
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		testfix.WaitFor(t, "the wake listener", 30*time.Second, func() bool {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND query = 'LISTEN rr_wake' AND application_name LIKE 'relayroom-session %'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
	})
	t.Run("concurrent calls of two agents are each answered as their own caller", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u, key, want := arch, s.key("acme/architect"), `"architect"`
				if i%2 == 1 {
					u, key, want = backend, s.key("acme/backend"), `"backend"`
				}
				for range 10 {
					if a := callTool(t, u, key, "whoami", nil); a.status != http.StatusOK || !strings.Contains(a.text, want) {
						errs <- fmt.Sprintf("%d %s", a.status, a.body)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
	t.Run("nothing failed in the server's log", func(t *testing.T) {
		if logs := s.logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
			t.Fatalf("errors logged behind the pooler:\n%s", logs)
		}
	})
}
