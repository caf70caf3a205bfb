// Command relayroom-chaos replays a security review's attacks against a real
// `relayroom serve` and prints what held, as the markdown table of `make chaos`.
//
// It starts a private Postgres cluster (deploy/local/pg.sh, under .data/), a scratch
// database in it with the demo data, and for each attack a fresh `relayroom serve` on a
// free 127.0.0.1 port; it stops them all at the end. Every attack is bounded in count and
// time (a few minutes in all) and only talks to loopback addresses.
package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"time"

	"github.com/relayroom/relayroom/internal/chaos"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/loadtest"
)

func main() { cli.Main("relayroom-chaos", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.Flags("relayroom-chaos", stderr)
	var o chaos.Options
	fs.StringVar(&o.Bin, "relayroom", "bin/relayroom", "the relayroom binary to start with `serve`")
	fs.StringVar(&o.PGScript, "pg-script", "deploy/local/pg.sh", "the script that runs the private cluster")
	fs.StringVar(&o.PGDir, "pg-dir", ".data/chaos-pg", "the private cluster's directory (created when missing; stopped at the end)")
	fs.StringVar(&o.Database, "database", "relayroom_chaos", "scratch database in that cluster (dropped first if it exists)")
	fs.StringVar(&o.DemoPath, "demo", "deploy/demo.yaml", "admin file applied to the scratch database")
	fs.StringVar(&o.LogDir, "log-dir", ".data/chaos", "where each attack's server log goes")
	fs.IntVar(&o.SlowConns, "slow-conns", 300, "(a) connections that send headers and `{`, then nothing")
	fs.DurationVar(&o.SlowWait, "slow-wait", 40*time.Second, "(a) how long to wait for the server to close them")
	fs.IntVar(&o.BigBodies, "big-bodies", 200, "(b) concurrent unauthenticated posts")
	fs.IntVar(&o.BodyBytes, "body-bytes", 4<<20-1, "(b) bytes of each (just under the default 4 MiB body limit)")
	fs.IntVar(&o.FloodConns, "flood-conns", 32, "(c) connections sending wrong keys")
	fs.IntVar(&o.LegitConns, "legit-conns", 8, "(c) connections of legitimate calls")
	fs.DurationVar(&o.Window, "window", 5*time.Second, "(c) each measured window")
	fs.DurationVar(&o.LockHold, "lock-hold", 12*time.Second, "(d) how long the table stays locked")
	fs.IntVar(&o.LockedCalls, "locked-calls", 60, "(d) concurrent calls behind the lock (more than the server's pool)")
	fs.IntVar(&o.WriteConns, "write-conns", 16, "(e) concurrent writers")
	fs.DurationVar(&o.KillAfter, "kill-after", 2*time.Second, "(e) writes run this long before each kill -9")
	fs.IntVar(&o.Kills, "kills", 3, "(e) rounds of writes, each ended by kill -9 and a restart")
	fs.IntVar(&o.Replicas, "replicas", 3, "(g) replicas behind HAProxy; replica 2 is killed")
	fs.StringVar(&o.ReplicasScript, "replicas-script", "deploy/replicas/replicas.sh", "(g) the script that starts the replicas and HAProxy")
	fs.DurationVar(&o.ReplicaDown, "replica-down", 4*time.Second, "(g) how long the killed replica stays down while writes go on (HAProxy's health check takes 2 s to see it)")
	fs.IntVar(&o.RestartConns, "restart-conns", 8, "(f) concurrent callers")
	fs.DurationVar(&o.RestartLoad, "restart-load", 12*time.Second, "(f) load duration; Postgres restarts a third of the way in")
	fs.DurationVar(&o.Deadline, "deadline", 6*time.Second, "bound a blocked or failing call must answer within (statement timeout + 1 s)")
	only := fs.String("only", "", "regular expression: run only the attacks whose name matches (e.g. 'kill|restart')")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		o.Only = re
	}
	if o.Kills < 1 || o.Kills > 10 || o.SlowConns < 0 || o.SlowConns > 5000 || o.BigBodies < 0 || o.BigBodies > 1000 || o.BodyBytes > 64<<20 ||
		o.SlowWait > 5*time.Minute || o.Window > time.Minute || o.LockHold > time.Minute || o.RestartLoad > time.Minute || o.KillAfter > time.Minute ||
		o.Replicas < 2 || o.Replicas > 9 || o.ReplicaDown > time.Minute {
		return fmt.Errorf("a bound is out of range: at most 5000 slow connections, 1000 bodies of 64 MB, one minute per window (five for -slow-wait), 1 to 10 kills, 2 to 9 replicas")
	}
	o.Progress = stderr
	started := time.Now().UTC()
	load0 := loadtest.LoadAverage()
	findings, err := chaos.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nrelayroom chaos run, %s, %v in all; %d cores, load average %s before and %s after\n\n",
		started.Format(time.RFC3339), time.Since(started).Round(time.Second), runtime.NumCPU(), load0, loadtest.LoadAverage())
	return chaos.WriteTable(stdout, findings)
}
