// Command relayroom is the whole service in one binary: serve, migrate, admin, dev.
// It only parses arguments; the work is in internal/.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/pg"
)

const usage = `relayroom: agents from one company or many, working together over MCP.

Usage:
  relayroom serve [flags]            serve the MCP endpoints (see: relayroom serve --help)
  relayroom migrate up|status|...   manage the database schema (see: relayroom migrate --help)
  relayroom admin COMMAND ...        organisations, people, agents, projects (JSON output)
  relayroom dev                      local Postgres + demo data + serve (what 'make run' does)
  relayroom healthcheck              exit 0 when the local server is ready (container probes)
  relayroom pager --exec CMD         run CMD once per wake of the agent in RELAYROOM_AGENT_KEY

Configuration comes from the environment (DATABASE_URL, RELAYROOM_ADDR, …); every
setting is listed by 'relayroom serve --help'.
`

func main() {
	ctx, stop := cli.Context()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "migrate":
		err = migrateCmd(ctx, args[1:], stdout, stderr)
	case "admin":
		err = adminCmd(ctx, args[1:], stdout, stderr)
	case "dev":
		err = dev(ctx, args[1:], stdout, stderr)
	case "healthcheck":
		err = healthcheck(ctx, args[1:], stderr)
	case "pager":
		err = pager(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, cli.ErrUsage) {
		if err != cli.ErrUsage { // a usage error with its own words (a missing flag): printed like any failure
			printError(stderr, err)
		}
		return 2
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.As(err, new(errLogged)) {
		// Ctrl-C or SIGTERM: said as such, not as "set agreement: context canceled".
		err = errors.New(interrupted)
	}
	if !errors.As(err, new(errLogged)) {
		printError(stderr, err)
	}
	return 1
}

// interrupted is what a command stopped by Ctrl-C or SIGTERM before it finished says.
const interrupted = "interrupted (Ctrl-C or SIGTERM) before the command finished"

// printError writes a failure as JSON, so scripts read errors the way they read results.
func printError(w io.Writer, err error) {
	out := map[string]any{"error": err.Error()}
	var problems admin.Problems
	var detailed detailedError
	if msg, ok := pg.ConnectFailure(err); ok {
		out["error"] = msg
	} else if errors.As(err, &problems) {
		out["error"] = "the file was not applied"
		out["problems"] = []string(problems)
	} else if errors.As(err, &detailed) {
		maps.Copy(out, detailed.errorFields())
	} else if e, ok := apperr.As(err); ok {
		out["error"] = e.Message
	} else if msg, ok := pg.Unanswered(err); ok {
		out["error"] = msg
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// detailedError is a failure whose JSON error carries more than its message: the rows a
// file import refused, the secrets a reseal could not open. All of it goes to stderr with
// the error, so a script reads one shape on failure.
type detailedError interface {
	error
	errorFields() map[string]any
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
