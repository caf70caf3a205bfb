package wake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

// runServer starts the real service (app.Run) on addr and returns its stop function.
func runServer(t *testing.T, dbURL, addr string) func() {
	t.Helper()
	cfg := config.Config{DatabaseURL: dbURL, Addr: addr, LogLevel: "error", MigrateOnStart: true,
		ShutdownTimeout: 10 * time.Second, StatementTimeout: testfix.StatementTimeout(t), MaxConns: 6, MaxBodyBytes: 1 << 20}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- app.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(p string) { ready <- p })
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("app.Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start")
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		awaitStop(t, errc, 30*time.Second, "the server (app.Run)")
	}
	t.Cleanup(stop)
	return stop
}

// awaitStop waits for what a cancelled goroutine returns: an error, or nothing within the
// bound, fails the test.
func awaitStop(t *testing.T, done <-chan error, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s stopped with %v", what, err)
		}
	case <-time.After(within):
		t.Errorf("%s did not stop within %s of its cancel", what, within)
	}
}

// TestPagerAgainstServer runs `relayroom pager`'s loop against the real server: a wake
// queued by a message reaches the command once, as JSON on stdin and in environment
// variables, and is acknowledged; a failing command's wake is replayed after its lease;
// the pager rides out a server restart and picks up the wake queued meanwhile.
func TestPagerAgainstServer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.svc.Now = nil
	addr := testfix.FreeLoopback(t)
	stop := runServer(t, f.url, addr)

	out := t.TempDir()
	// The command records the wake, and fails for a wake whose marker file exists (once).
	script := fmt.Sprintf(`set -e
cat > %[1]s/$RELAYROOM_WAKE_ID.json
echo "$RELAYROOM_WAKE_ID $RELAYROOM_PART $RELAYROOM_PROJECT_ID $RELAYROOM_WAKE_COUNT $RELAYROOM_WAKE_ATTEMPT" >> %[1]s/runs
if [ -e %[1]s/fail-next ]; then rm %[1]s/fail-next; exit 3; fi`, out)
	p := &wake.Pager{BaseURL: "http://" + addr, Key: f.res.Agents["acme/alpha"].Key, Exec: script,
		Wait: 25 * time.Second, MaxBackoff: 300 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: io.Discard, Stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	pagerDone := make(chan error, 1)
	go func() { pagerDone <- p.Run(ctx) }()
	defer func() {
		cancel()
		awaitStop(t, pagerDone, 20*time.Second, "the pager")
	}()
	// queue queues a wake for part a as a replica does: the wake, then the NOTIFY that
	// the queueing replica's notifier sends after the commit. The fixture's wake service
	// runs no notifier, so without it the server under test would learn of a wake queued
	// during a long poll only at the pager's next poll or its own sweep tick (up to 30 s).
	queue := func(f *fixture) {
		f.queue(f.msg("a"))
		f.exec(`SELECT pg_notify('rr_wake', $1)`, f.res.Agents["acme/alpha"].ID.String())
	}
	lines := func() []string {
		b, _ := os.ReadFile(filepath.Join(out, "runs"))
		s := strings.TrimSpace(string(b))
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	testfix.Step(t, "a message runs the command once with the wake in its environment", func(t *testing.T) {
		f := f.in(t)
		queue(f)
		testfix.WaitFor(t, "the first wake's command", 15*time.Second, func() bool { return len(lines()) == 1 })
		first := strings.Fields(lines()[0])
		if len(first) != 5 {
			t.Fatalf("the command's run line: %q", first)
		}
		testfix.Check(t, "RELAYROOM_PART", first[1], "a")
		testfix.Check(t, "RELAYROOM_PROJECT_ID", first[2], f.project.String())
		testfix.Check(t, "RELAYROOM_WAKE_COUNT", first[3], "1")
		testfix.Check(t, "RELAYROOM_WAKE_ATTEMPT", first[4], "1")
	})
	testfix.Step(t, "the command reads the wake as JSON on stdin", func(t *testing.T) {
		first := strings.Fields(lines()[0])
		b, err := os.ReadFile(filepath.Join(out, first[0]+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var w wake.Wake
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("stdin %s: %v", b, err)
		}
		testfix.Check(t, "id", w.ID.String(), first[0])
		testfix.Check(t, "part", w.Part, "a")
		testfix.Check(t, "count", w.Count, 1)
		testfix.Check(t, "project", w.Project, "One")
	})
	testfix.Step(t, "the pager acknowledges the wake after the command succeeds", func(t *testing.T) {
		f := f.in(t)
		testfix.WaitFor(t, "the ack", 10*time.Second, func() bool { return f.status("a") == wake.StatusDelivered })
	})
	testfix.Step(t, "a long poll does not hold up the server's graceful shutdown", func(t *testing.T) {
		// The pager's 25 s long poll is open.
		began := time.Now()
		stop()
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("shutdown took %v with a long poll open", d)
		}
	})
	testfix.Step(t, "work can be queued while the server is down", func(t *testing.T) {
		f := f.in(t)
		f.queue(f.msg("a"))
		time.Sleep(700 * time.Millisecond) // the pager is now retrying against a closed port
	})
	runServer(t, f.url, addr) // for the rest of the story
	testfix.Step(t, "work queued while the server was down is delivered once it is back", func(t *testing.T) {
		f := f.in(t)
		testfix.WaitFor(t, "the wake queued during the restart", 20*time.Second, func() bool { return len(lines()) == 2 })
		testfix.WaitFor(t, "its ack", 10*time.Second, func() bool { return f.status("a") == wake.StatusDelivered })
	})
	testfix.Step(t, "a failing command leaves its wake claimed, not acknowledged", func(t *testing.T) {
		f := f.in(t)
		if err := os.WriteFile(filepath.Join(out, "fail-next"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		queue(f)
		testfix.WaitFor(t, "the failing run", 15*time.Second, func() bool { return len(lines()) == 3 })
		time.Sleep(300 * time.Millisecond)
		testfix.Check(t, "the failed command's wake", f.status("a"), wake.StatusClaimed)
	})
	testfix.Step(t, "the failed wake is replayed after its lease as the second attempt", func(t *testing.T) {
		f := f.in(t)
		// Expire the lease instead of waiting five minutes.
		f.exec(`UPDATE wake SET lease_until = now() - interval '1 second' WHERE status = 'claimed'`)
		f.exec(`SELECT pg_notify('rr_wake', '*')`) // what the next sweep tick would send
		testfix.WaitFor(t, "the replay", 15*time.Second, func() bool { return len(lines()) == 4 })
		third, replay := strings.Fields(lines()[2]), strings.Fields(lines()[3])
		testfix.Check(t, "the replayed wake's id", replay[0], third[0])
		testfix.Check(t, "RELAYROOM_WAKE_ATTEMPT of the replay", replay[4], "2")
		testfix.WaitFor(t, "the replay's ack", 10*time.Second, func() bool { return f.status("a") == wake.StatusDelivered })
	})
	testfix.Step(t, "no wake runs more than it should", func(t *testing.T) {
		time.Sleep(500 * time.Millisecond)
		testfix.Check(t, "runs for 3 wakes and one replay", len(lines()), 4)
	})
}

// TestPagerRefusedKey: a bad key stops the pager with an error instead of looping.
func TestPagerRefusedKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	addr := testfix.FreeLoopback(t)
	runServer(t, f.url, addr)
	key := f.res.Agents["acme/alpha"].Key
	// A well-formed key that is not on file: revoke by rotating.
	f.exec(`UPDATE agent_key SET revoked_at = now()`)
	p := &wake.Pager{BaseURL: "http://" + addr, Key: key, Exec: "true", Wait: time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.Run(ctx); err != wake.ErrUnauthorized {
		t.Fatalf("pager with a revoked key: %v", err)
	}
}
