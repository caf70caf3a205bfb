// Package chaos replays a security review's attacks against a real `relayroom serve` (a
// child process on a private loopback port, on a private Postgres cluster) and reports
// what held: connections left open by slow clients, memory under big unauthenticated
// bodies, legitimate throughput under a wrong-key flood, calls behind a locked table,
// acknowledged writes lost or duplicated across a kill -9, a Postgres restart under load,
// and a replica behind HAProxy killed under writes. Every attack is bounded in count and time; nothing leaves the loopback interface.
package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/loadtest"
	"github.com/relayroom/relayroom/internal/localpg"
)

// Options size the attacks (the defaults are cmd/relayroom-chaos's flags).
type Options struct {
	Bin      string // the relayroom binary
	PGScript string // deploy/local/pg.sh
	PGDir    string // the private cluster's directory (created when missing)
	Database string // scratch database in it, dropped and created again
	DemoPath string // deploy/demo.yaml
	LogDir   string // the server's log of each attack goes here

	SlowConns int           // (a) connections that send headers and "{" then nothing
	SlowWait  time.Duration // (a) how long to wait for the server to close them

	BigBodies int // (b) concurrent unauthenticated posts
	BodyBytes int // (b) size of each

	FloodConns int           // (c) connections sending wrong keys
	LegitConns int           // (c) connections of legitimate calls
	Window     time.Duration // (c) each measured window (without, then with the flood)

	LockHold    time.Duration // (d) how long the table stays locked
	LockedCalls int           // (d) concurrent calls that need the locked table

	WriteConns int           // (e) concurrent writers
	KillAfter  time.Duration // (e) writes run this long before each kill -9
	Kills      int           // (e) rounds of writes ended by kill -9

	Replicas       int           // (g) replicas behind HAProxy, one of which is killed
	ReplicasScript string        // (g) deploy/replicas/replicas.sh
	ReplicaDown    time.Duration // (g) how long the killed replica stays down while writes go on

	RestartConns int           // (f) concurrent callers
	RestartLoad  time.Duration // (f) load duration; Postgres restarts a third of the way in

	// Deadline is the bound a blocked call is expected to answer within: the server's
	// statement timeout plus a second for HTTP and scheduling.
	Deadline time.Duration

	// Only, when set, runs the attacks whose name ("(e) kill -9 under writes") matches.
	Only *regexp.Regexp

	Progress io.Writer
}

// Finding is one row of the report.
type Finding struct {
	Attack   string // (a) slow clients, …
	Did      string // what was done
	Measured string // what was seen
	Target   string // what holding means
	Held     bool
	Skipped  string // why the attack could not run, when it could not
}

// bench is what every attack gets: the cluster, the fixture and how to start a server.
type bench struct {
	o       Options
	dbURL   string
	fixture loadtest.Fixture
	say     func(format string, args ...any)
}

// serverShutdown is the servers' RELAYROOM_SHUTDOWN_TIMEOUT: how long in-flight calls
// get once an attack is over and its server is told to stop (the default, 20 s, would
// only make the run longer; nothing is measured during shutdown).
const serverShutdown = 5 * time.Second

// startServer starts a fresh server for one attack, logging to LogDir/<name>.log.
func (b *bench) startServer(ctx context.Context, name string) (*loadtest.Server, error) {
	return loadtest.StartServer(ctx, loadtest.ServerOptions{
		Bin: b.o.Bin, DatabaseURL: b.dbURL, LogPath: filepath.Join(b.o.LogDir, name+".log"),
		Env: []string{"RELAYROOM_SHUTDOWN_TIMEOUT=" + serverShutdown.String()},
	})
}

// stopServer stops a server at the end of an attack; a failure is reported, not fatal.
func (b *bench) stopServer(s *loadtest.Server) {
	if err := s.Stop(3 * serverShutdown); err != nil {
		b.say("stopping the server: %v", err)
	}
}

// env is a load environment on server s (clients of conns connections).
func (b *bench) env(s *loadtest.Server, conns int, timeout time.Duration) (*loadtest.Env, error) {
	return loadtest.NewEnv(loadtest.NewClient(conns, timeout, nil), s.Base, b.fixture)
}

// attack is one of the seven. Those with a server name run against a fresh server the
// runner starts before and stops after them (its log is LogDir/<server>.log); the kill -9
// attacks, which replace their servers, have none and start their own.
type attack struct {
	name   string
	server string
	run    func(ctx context.Context, b *bench, srv *loadtest.Server) (Finding, error)
}

// runAttack runs a, with its fresh server when it takes one.
func (b *bench) runAttack(ctx context.Context, a attack) (Finding, error) {
	if a.server == "" {
		return a.run(ctx, b, nil)
	}
	srv, err := b.startServer(ctx, a.server)
	if err != nil {
		return Finding{}, err
	}
	defer b.stopServer(srv)
	return a.run(ctx, b, srv)
}

// Run starts the private cluster, runs every attack in turn and stops the cluster.
func Run(ctx context.Context, o Options) ([]Finding, error) {
	say := func(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, err
	}
	clusterURL, err := localpg.Run(ctx, o.Progress, o.PGScript, "start", o.PGDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, err := localpg.Run(context.WithoutCancel(ctx), o.Progress, o.PGScript, "stop", o.PGDir); err != nil {
			say("stopping the cluster: %v", err)
		}
	}()
	dbURL, err := loadtest.ScratchDatabase(ctx, clusterURL, o.Database)
	if err != nil {
		return nil, err
	}
	f, err := loadtest.Seed(ctx, dbURL, o.DemoPath)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, dbURL: dbURL, fixture: f, say: say}
	attacks := []attack{
		{"(a) slow clients", "a-slow-clients", slowClients},
		{"(b) big unauthenticated bodies", "b-big-bodies", bigBodies},
		{"(c) wrong-key flood", "c-wrong-key-flood", wrongKeyFlood},
		{"(d) locked table", "d-locked-table", lockedTable},
		{"(e) kill -9 under writes", "", killUnderWrites},
		{"(f) Postgres restart under load", "f-postgres-restart", postgresRestart},
		{"(g) a replica killed under writes", "", killReplicaUnderWrites},
	}
	var out []Finding
	for _, a := range attacks {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if o.Only != nil && !o.Only.MatchString(a.name) {
			continue
		}
		say("%s …", a.name)
		t0 := time.Now()
		fd, err := b.runAttack(ctx, a)
		if err != nil {
			return out, fmt.Errorf("%s: %w", a.name, err)
		}
		fd.Attack = a.name
		say("%s: %s (%v)", a.name, fd.Measured, time.Since(t0).Round(time.Millisecond))
		out = append(out, fd)
	}
	return out, nil
}

// WriteTable prints the findings as a markdown table.
func WriteTable(w io.Writer, fs []Finding) error {
	var b strings.Builder
	b.WriteString("| attack | what was done | measured | holds when | held |\n|---|---|---|---|---|\n")
	for _, f := range fs {
		held := "no"
		switch {
		case f.Skipped != "":
			held = "skipped: " + f.Skipped
		case f.Held:
			held = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.Attack, cell(f.Did), cell(f.Measured), cell(f.Target), held)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell keeps a table cell on one line.
func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "\\|") }

// mb prints bytes as MiB.
func mb(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/(1<<20)) }
