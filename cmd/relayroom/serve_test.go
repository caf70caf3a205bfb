package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// serveChildEnv marks the re-executed test binary that runs `relayroom serve` itself.
const serveChildEnv = "RELAYROOM_TEST_SERVE_CHILD"

// TestServeChild is `relayroom serve` in a process of its own, for TestServeLogsOnlyJSON
// (libraries log through process-wide loggers, which only a process of its own shows).
func TestServeChild(t *testing.T) {
	if os.Getenv(serveChildEnv) == "" {
		t.Skip("run by TestServeLogsOnlyJSON")
	}
	ctx, stop := cli.Context()
	defer stop()
	if code := run(ctx, []string{"serve"}, os.Stdout, os.Stderr); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}
}

// serveChild starts `relayroom serve` in a process of its own (TestServeChild) on a
// database of its own, and returns its log lines as they come.
func serveChild(t *testing.T, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$")
	cmd.Env = append(append(os.Environ(), serveChildEnv+"=1", "DATABASE_URL="+pgtest.New(t), "RELAYROOM_ADDR=127.0.0.1:0",
		"RELAYROOM_EMBEDDER=none", "RELAYROOM_LOG_LEVEL=debug"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// TestASecondSignalEndsTheProcess: a second SIGTERM (or Ctrl-C) during a stop ends the
// process at once; it was ignored, and the operator waited for the whole drain.
func TestASecondSignalEndsTheProcess(t *testing.T) {
	if os.Getenv(serveChildEnv) != "" {
		t.Skip("the child")
	}
	cmd, lines := serveChild(t, "RELAYROOM_SHUTDOWN_DELAY=10m")
	// A second signal ignored would hold the test for the ten minutes: killed before, it
	// fails below (SIGKILL is not the SIGTERM wanted).
	defer time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }).Stop()
	for line := range lines {
		switch {
		case strings.Contains(line, `"msg":"serving"`):
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(line, `"msg":"shutting down: not ready, still serving"`):
			// Stopping, and holding for ten minutes: the second signal must end it.
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("want the process ended by the second SIGTERM, got %v", err)
	}
}

// TestServeLogsOnlyJSON: everything the server writes to its log stream, from start to a
// clean stop, is one JSON object a line, so a log shipper reads every line (and each
// passes through the credential redaction).
func TestServeLogsOnlyJSON(t *testing.T) {
	if os.Getenv(serveChildEnv) != "" {
		t.Skip("the child")
	}
	cmd, lines := serveChild(t)
	var all []string
	deadline := time.After(2 * time.Minute)
	signalled := false
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			all = append(all, line)
			if !signalled && strings.Contains(line, `"msg":"serving"`) {
				signalled = true
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("no clean stop within 2 minutes; log so far:\n%s", strings.Join(all, "\n"))
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, strings.Join(all, "\n"))
	}
	if !signalled {
		t.Fatalf("the server never said it was serving:\n%s", strings.Join(all, "\n"))
	}
	said := map[string]bool{}
	for _, line := range all {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("a log line that is not a JSON object: %q", line)
			continue
		}
		msg, _ := v["msg"].(string)
		said[msg] = v["version"] != nil || v["schema_version"] != nil || said[msg]
		// A library's chatter (the OAuth library announces its routes) is not the
		// operator's business at the default level.
		if msg == "registered route" && v["level"] != "DEBUG" {
			t.Errorf("a library's INFO line at %v: %s", v["level"], line)
		}
	}
	// Which build ran against which schema: the first thing read after a failed upgrade.
	for _, msg := range []string{"migrating", "schema up to date", "serving"} {
		if !said[msg] {
			t.Errorf("no %q line with its version in:\n%s", msg, strings.Join(all, "\n"))
		}
	}
}

// TestAFatalErrorIsOneLogLine: serve's fatal error was an indented JSON object of three
// lines without time or level, unlike every other line of its log.
func TestAFatalErrorIsOneLogLine(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/relayroom")
	t.Setenv("RELAYROOM_SHUTDOWN_TIMEOUT", "soon")
	code, _, stderr := runCLI(t, "serve")
	var line struct{ Time, Level, Msg, Error string }
	if code != 1 || strings.Count(stderr, "\n") != 1 || json.Unmarshal([]byte(stderr), &line) != nil ||
		line.Time == "" || line.Level != "ERROR" || !strings.Contains(line.Error, "RELAYROOM_SHUTDOWN_TIMEOUT") {
		t.Fatalf("exit %d: %q", code, stderr)
	}
}
