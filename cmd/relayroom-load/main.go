// Command relayroom-load measures relayroom under concurrent clients beside raw pgx loops
// on the same database, in the same run, and prints the table of `make loadtest`.
//
// It creates (dropping it first) one scratch database in the cluster DATABASE_URL names,
// seeds it with the demo file and the search entries, starts `relayroom serve` on a free
// 127.0.0.1 port against it, measures every row for a bounded time and stops the server.
// It starts nothing else, and it only talks to loopback addresses.
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/loadtest"
)

func main() { cli.Main("relayroom-load", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.Flags("relayroom-load", stderr)
	clusterURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "any database URL of the Postgres cluster to use, on a loopback address ($DATABASE_URL)")
	database := fs.String("database", "relayroom_loadtest", "scratch database created in that cluster (dropped first if it exists)")
	bin := fs.String("relayroom", "bin/relayroom", "the relayroom binary to start with `serve`")
	demo := fs.String("demo", "deploy/demo.yaml", "admin file applied to the scratch database")
	logDir := fs.String("log-dir", ".data/loadtest", "where the server's log goes")
	conns := fs.Int("conns", 32, "concurrent connections (clients) of every row, raw loops included")
	duration := fs.Duration("duration", 5*time.Second, "measured time of every row")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before every row")
	entries := fs.Int("entries", 10000, "trusted knowledge entries and memory entries seeded for recall and read_memory")
	replicas := fs.String("replicas", "0", "serve with this many replicas behind HAProxy (deploy/replicas/replicas.sh); 0: one server called directly; a list (1,2,3) measures each count in turn and adds a table of their ratios")
	replicasScript := fs.String("replicas-script", "deploy/replicas/replicas.sh", "the script that starts the replicas and HAProxy")
	only := fs.String("only", "", "regular expression: measure only the rows whose name matches (the raw loops always run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clusterURL == "" {
		return fmt.Errorf("no cluster: set DATABASE_URL or -database-url (make loadtest starts the test cluster)")
	}
	if err := loopbackOnly(*clusterURL); err != nil {
		return err
	}
	if *conns < 1 || *duration <= 0 || *duration > time.Minute || *entries < 0 {
		return fmt.Errorf("-conns must be ≥ 1, -duration in (0, 1m], -entries ≥ 0")
	}
	counts, err := replicaCounts(*replicas)
	if err != nil {
		return err
	}
	opts := loadtest.Options{
		Bin: *bin, ClusterURL: *clusterURL, Database: *database, DemoPath: *demo, LogDir: *logDir,
		Window:  loadtest.Window{Conns: *conns, Duration: *duration, Warmup: *warmup},
		Entries: *entries, Progress: stderr, ReplicasScript: *replicasScript,
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		opts.Only = re
	}
	runs := make([][]loadtest.Row, 0, len(counts))
	for _, n := range counts {
		opts.Replicas = n
		load0 := loadtest.LoadAverage()
		started := time.Now().UTC()
		rows, err := loadtest.Run(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nrelayroom load test, %s: %s, %d connections, %v per row after a %v warm-up, %d knowledge and memory entries; %d cores, load average %s before and %s after\n\n",
			started.Format(time.RFC3339), servedBy(n), *conns, *duration, *warmup, *entries, runtime.NumCPU(), load0, loadtest.LoadAverage())
		if err := loadtest.WriteTable(stdout, rows); err != nil {
			return err
		}
		runs = append(runs, rows)
	}
	if len(counts) < 2 {
		return nil
	}
	return writeComparison(stdout, counts, runs)
}

// loopbackOnly refuses a cluster that is not on this machine: the load is never sent
// anywhere else.
func loopbackOnly(dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	switch h := u.Hostname(); {
	case h == "localhost", strings.HasPrefix(h, "127."), h == "::1":
		return nil
	default:
		return fmt.Errorf("the cluster must be on a loopback address, not %q", h)
	}
}
