package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.Flags("relayroom migrate", stderr)
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL ($DATABASE_URL)")
	shards := fs.Int("shards", 0, "citus: shards per co-location group (0: the cluster's citus.shard_count)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: relayroom migrate up | down [N] | status | citus\n\n  up      apply every pending migration\n  down N  revert the last N migrations (default 1; 'all' reverts everything)\n  status  print {current, latest, dirty}\n  citus   on a Citus coordinator, after up: distribute the schema (docs/scale.md)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if *dbURL == "" {
		return fmt.Errorf("DATABASE_URL is required")
	}
	switch fs.Arg(0) {
	case "up":
		if err := pg.MigrateUp(*dbURL); err != nil {
			return err
		}
		// The job queue's tables, in their own schema, after ours.
		if err := jobs.MigrateUp(ctx, *dbURL); err != nil {
			return err
		}
	case "down":
		n := 1
		if fs.NArg() > 1 {
			if fs.Arg(1) == "all" {
				n = 0
			} else {
				v, err := strconv.Atoi(fs.Arg(1))
				if err != nil || v < 1 {
					return fmt.Errorf("down takes a positive number of migrations or 'all', got %q", fs.Arg(1))
				}
				n = v
			}
		}
		if n == 0 {
			// Everything goes, the job queue's schema first (its jobs name our tenants).
			if err := jobs.MigrateDown(ctx, *dbURL); err != nil {
				return err
			}
		}
		if err := pg.MigrateDown(*dbURL, n); err != nil {
			return err
		}
	case "status":
	case "citus":
		// Flags may follow the command too (relayroom migrate citus -shards 8).
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
		rep, err := pg.Distribute(ctx, *dbURL, pg.CitusOptions{ShardCount: *shards})
		if err != nil {
			return err
		}
		return printJSON(stdout, rep)
	default:
		fs.Usage()
		return errUsage
	}
	st, err := pg.StatusURL(ctx, *dbURL)
	if err != nil {
		return err
	}
	return printJSON(stdout, st)
}
