package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
)

const migrateUsage = `Usage: relayroom migrate COMMAND [flags]

  up             apply every pending migration
  down N|all     revert the last N migrations, or all of them with the job queue's
                 schema (every table and what it holds goes); needs --yes
  force V        record version V as applied and clean, without running anything: after
                 a migration failed half-way and its work was finished or undone by hand
                 (docs/upgrades.md)
  status         print {current, latest, dirty}
  citus          on a Citus coordinator, after up: distribute the schema (docs/scale.md)

Flags may come before or after the command.
`

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.Flags("relayroom migrate", stderr)
	// No default from the environment here: the usage prints defaults, and DATABASE_URL
	// holds a password.
	dbURL := fs.String("database-url", "", "Postgres URL (default: $RELAYROOM_DIRECT_DATABASE_URL, else $DATABASE_URL)")
	shards := fs.Int("shards", 0, "citus: shards per co-location group (0: the cluster's citus.shard_count)")
	yes := fs.Bool("yes", false, "down: revert without asking again")
	fs.Usage = func() {
		fmt.Fprint(stderr, migrateUsage)
		fs.PrintDefaults()
	}
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return cli.ErrUsage
	}
	cmd, rest := pos[0], pos[1:]
	want, known := map[string]int{"up": 0, "status": 0, "citus": 0, "down": 1, "force": 1}[cmd]
	if !known {
		return fmt.Errorf("%w: unknown migrate command %q (up, down, force, status or citus)", cli.ErrUsage, cmd)
	}
	if len(rest) != want {
		return fmt.Errorf("%w: migrate %s takes %d argument(s), got %q", cli.ErrUsage, cmd, want, rest)
	}
	url := *dbURL
	// Migrations hold a session lock: past a transaction pooler, the direct URL.
	for _, name := range []string{"RELAYROOM_DIRECT_DATABASE_URL", "DATABASE_URL"} {
		if url != "" {
			break
		}
		var err error
		if url, err = config.Secret(os.Getenv, name); err != nil {
			return err
		}
	}
	if url == "" {
		return fmt.Errorf("DATABASE_URL is required")
	}
	if _, err := pg.ParseURL(url); err != nil {
		return fmt.Errorf("DATABASE_URL %w", err)
	}
	switch cmd {
	case "up":
		if _, err := pg.MigrateUp(ctx, url); err != nil {
			return err
		}
		// The job queue's tables, in their own schema, after ours.
		if err := jobs.MigrateUp(ctx, url); err != nil {
			return err
		}
	case "down":
		if err := migrateDown(ctx, url, rest[0], *yes, stderr); err != nil {
			return err
		}
	case "force":
		v, err := strconv.ParseUint(rest[0], 10, 32)
		if err != nil {
			return fmt.Errorf("%w: force takes a migration version (a whole number), got %q", cli.ErrUsage, rest[0])
		}
		if _, err := pg.MigrateForce(ctx, url, uint(v)); err != nil {
			return err
		}
	case "citus":
		rep, err := pg.Distribute(ctx, url, pg.CitusOptions{ShardCount: *shards})
		if err != nil {
			return err
		}
		return printJSON(stdout, rep)
	}
	st, err := pg.StatusURL(ctx, url)
	if err != nil {
		return err
	}
	return printJSON(stdout, st)
}

// migrateDown reverts count ("all" or a number) migrations once the operator said --yes,
// naming the database first: a down drops tables and what they hold.
func migrateDown(ctx context.Context, url, count string, yes bool, stderr io.Writer) error {
	n := 0 // all
	if count != "all" {
		v, err := strconv.Atoi(count)
		if err != nil || v < 1 {
			return fmt.Errorf("%w: down takes a positive number of migrations or 'all', got %q", cli.ErrUsage, count)
		}
		n = v
	}
	st, err := pg.StatusURL(ctx, url)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("the last %d migration(s)", n)
	if n == 0 {
		what = "every migration and the job queue's schema"
	}
	if !yes {
		return fmt.Errorf("%w: this reverts %s of %s (now at version %d), dropping what they made; run again with --yes to do it",
			cli.ErrUsage, what, pg.Describe(url), st.Current)
	}
	fmt.Fprintf(stderr, "reverting %s of %s (now at version %d)\n", what, pg.Describe(url), st.Current)
	if n == 0 {
		// Everything goes, the job queue's schema first (its jobs name our tenants).
		if err := jobs.MigrateDown(ctx, url); err != nil {
			return err
		}
	}
	_, err = pg.MigrateDown(ctx, url, n)
	return err
}
