package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Options of one load run.
type Options struct {
	Bin        string // the relayroom binary to serve with
	ClusterURL string // a database URL of the cluster to work in (deploy/local/pg.sh start prints one)
	Database   string // the scratch database created (dropped first) in that cluster
	DemoPath   string // deploy/demo.yaml
	LogDir     string // the server's log goes here
	Window     Window
	Entries    int            // knowledge and memory entries seeded for recall and read_memory
	Only       *regexp.Regexp // rows to run (nil: all); the raw loops always run
	ServerEnv  []string       // extra settings of the server (KEY=value)
	Progress   io.Writer      // what is being done, as it is done
}

// Run prepares a scratch database, starts the server, measures every row and stops the
// server. The rows come back in table order, the two raw loops first and last.
func Run(ctx context.Context, o Options) ([]Row, error) {
	say := func(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }
	t0 := time.Now()
	dbURL, err := ScratchDatabase(ctx, o.ClusterURL, o.Database)
	if err != nil {
		return nil, err
	}
	f, err := Seed(ctx, dbURL, o.DemoPath)
	if err != nil {
		return nil, err
	}
	if o.Entries > 0 {
		if err := SeedKnowledge(ctx, f, o.Entries); err != nil {
			return nil, err
		}
		if err := SeedMemory(ctx, f, HostOrg, f.PartAgents[CallerPart], o.Entries); err != nil {
			return nil, err
		}
	}
	if err := Analyze(ctx, dbURL); err != nil {
		return nil, err
	}
	say("scratch database %s migrated and seeded (%d knowledge and %d memory entries) in %v", o.Database, o.Entries, o.Entries, time.Since(t0).Round(time.Millisecond))
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(o.LogDir, "server.log")
	srv, err := StartServer(ctx, ServerOptions{Bin: o.Bin, DatabaseURL: dbURL, LogPath: logPath, Env: o.ServerEnv})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := srv.Stop(30 * time.Second); err != nil {
			say("stopping the server: %v", err)
		}
	}()
	say("relayroom serve at %s (pid %d, log %s)", srv.Base, srv.PID(), logPath)
	client := NewClient(o.Window.Conns, 60*time.Second, nil)
	defer client.Close()
	env, err := NewEnv(client, srv.Base, f)
	if err != nil {
		return nil, err
	}
	if err := env.Prepare(ctx, o.Window.Conns); err != nil {
		return nil, err
	}
	raw, err := OpenRaw(ctx, dbURL, o.Window.Conns)
	if err != nil {
		return nil, err
	}
	defer raw.Close()

	// The raw loops open and close the run: their mean is the baseline (Judge).
	scenarios := []Scenario{
		{Name: "raw read", Class: ClassRawRead, Note: "pgx: BEGIN; one primary-key read; COMMIT", Call: raw.Read},
		{Name: "raw insert", Class: ClassRawWrite, Note: "pgx: BEGIN; one INSERT; COMMIT", Call: raw.Insert},
	}
	for _, s := range append(env.ReadScenarios(), env.WriteScenarios()...) {
		if o.Only == nil || o.Only.MatchString(s.Name) {
			scenarios = append(scenarios, s)
		}
	}
	scenarios = append(scenarios,
		Scenario{Name: "raw read (end)", Class: ClassRawRead, Note: "the same loop again", Call: raw.Read},
		Scenario{Name: "raw insert (end)", Class: ClassRawWrite, Note: "the same loop again", Call: raw.Insert},
	)
	probe := &cpuProbe{serverPID: srv.PID(), pool: raw.pool}
	rows := make([]Row, 0, len(scenarios))
	for _, s := range scenarios {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		sum, cpu := measure(ctx, o.Window, s.Call, probe)
		say("%-16s %8.0f calls/s  p50 %s  p99 %s  errors %d  CPU/call server %s Postgres %s", s.Name, sum.Rate(), ms(sum.P50), ms(sum.P99), sum.Errors,
			cpuPerCall(cpu.Known, cpu.Server, sum.OK), cpuPerCall(cpu.Known, cpu.Postgres, sum.OK))
		rows = append(rows, Row{Name: s.Name, Class: s.Class, Note: s.Note, Summary: sum, CPU: cpu})
	}
	return rows, nil
}
