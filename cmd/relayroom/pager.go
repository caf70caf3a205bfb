package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/wake"
)

const pagerHelp = `Usage: relayroom pager --exec CMD [--url BASE] [--wait SECONDS]

Waits for wakes of the agent whose key is in RELAYROOM_AGENT_KEY and runs CMD (with
/bin/sh -c) once per wake. The wake is CMD's stdin as JSON, and in the environment:
RELAYROOM_WAKE_ID, RELAYROOM_PROJECT_ID, RELAYROOM_PART, RELAYROOM_WAKE_COUNT,
RELAYROOM_WAKE_SOURCES, RELAYROOM_THREAD_IDS, RELAYROOM_WAKE_URGENT, RELAYROOM_WAKE_ATTEMPT,
RELAYROOM_WAKE_JSON (the whole wake).
A wake is acknowledged when CMD exits 0; otherwise the server hands it out again after its
lease (5 minutes). Reconnects with backoff when the server is unreachable; stops on
SIGINT/SIGTERM (a running CMD gets SIGTERM and 10 s to finish). See docs/wakes.md.

Flags:
`

// pager runs `relayroom pager`.
func pager(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.Flags("relayroom pager", stderr)
	execCmd := fs.String("exec", "", "command run once per wake (required)")
	base := fs.String("url", envOr("RELAYROOM_URL", "http://localhost:48801"), "the relayroom server ($RELAYROOM_URL)")
	wait := fs.Int("wait", 25, "seconds each long poll waits for a wake (at most 60)")
	fs.Usage = func() {
		fmt.Fprint(stderr, pagerHelp)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *execCmd == "" {
		fs.Usage()
		return cli.ErrUsage
	}
	key := os.Getenv("RELAYROOM_AGENT_KEY")
	if key == "" {
		return fmt.Errorf("pager: RELAYROOM_AGENT_KEY is not set (the agent key printed by relayroom admin)")
	}
	p := &wake.Pager{BaseURL: *base, Key: key, Exec: *execCmd, Wait: time.Duration(*wait) * time.Second,
		Log: slog.New(slog.NewJSONHandler(stderr, nil)), Stdout: stdout, Stderr: stderr}
	return p.Run(ctx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
