// Package localpg runs deploy/local/pg.sh, the script behind the private Postgres
// clusters of `make run`, `make test` and the operator tools (start, stop, restart).
package localpg

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Run runs the script with args and returns its stdout (a URL, for start), its progress
// going to stderr. The output goes through a file, not a pipe: the server the script
// starts outlives it, and any descriptor it inherits would keep a pipe open and this call
// waiting forever.
func Run(ctx context.Context, stderr io.Writer, script string, args ...string) (string, error) {
	out, err := os.CreateTemp("", "relayroom-pg-*.out")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Stdout, cmd.Stderr = out, stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
