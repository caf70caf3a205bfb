package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	// Replicas, when above zero, serves with that many `relayroom serve` processes behind
	// HAProxy, started by ReplicasScript (deploy/replicas/replicas.sh) in LogDir/replicas;
	// zero is one server called directly.
	Replicas       int
	ReplicasScript string
	Progress       io.Writer // what is being done, as it is done
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
	base, pids, stop, err := startServers(ctx, o, dbURL, say)
	if err != nil {
		return nil, err
	}
	defer stop()
	client := NewClient(o.Window.Conns, 60*time.Second, nil)
	defer client.Close()
	env, err := NewEnv(client, base, f)
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
	for _, s := range slices.Concat(env.ReferenceScenarios(), env.ReadScenarios(), env.WriteScenarios()) {
		if o.Only == nil || o.Only.MatchString(s.Name) {
			scenarios = append(scenarios, s)
		}
	}
	scenarios = append(scenarios,
		Scenario{Name: "raw read (end)", Class: ClassRawRead, Note: "the same loop again", Call: raw.Read},
		Scenario{Name: "raw insert (end)", Class: ClassRawWrite, Note: "the same loop again", Call: raw.Insert},
	)
	probe := &cpuProbe{serverPIDs: pids, pool: raw.pool}
	rows := make([]Row, 0, len(scenarios))
	for _, s := range scenarios {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		sum, cpu := measure(ctx, o.Window, s.Call, probe)
		say("%-16s %8.0f calls/s  p50 %s  p99 %s  errors %d  CPU/call server %s Postgres %s", s.Name, sum.Rate(), ms(sum.P50), ms(sum.P99), sum.Errors,
			cpuPerCall(cpu.Known, cpu.Server, sum.OK), cpuPerCall(cpu.Known, cpu.Postgres, sum.OK))
		rows = append(rows, Row{Name: s.Name, Class: s.Class, Note: s.Note, Summary: sum, CPU: cpu})
		if err := settleEmbeddings(ctx, raw.pool, probe, say); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// embeddingSettleLimit bounds the wait for the embedding backlog after a row.
const embeddingSettleLimit = 3 * time.Minute

// settleEmbeddings waits, after a row, until every memory entry has a vector, and says how
// fast the backlog drained. write_memory stores an entry at once and leaves its vector to
// the server's background embedder: that work belongs to its row, and measured with the
// rows after it, it was charged to them (send_task at half its rate alone). A backlog that
// outlasts embeddingSettleLimit is reported and left. The CPU per entry embedded (the
// server's, the database's) says which of the two bounds the drain.
func settleEmbeddings(ctx context.Context, pool *pgxpool.Pool, probe *cpuProbe, say func(string, ...any)) error {
	count := func() (int, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM memory_entry e
			WHERE NOT EXISTS (SELECT 1 FROM memory_vector v WHERE v.project_id = e.project_id AND v.memory_id = e.id)`).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count the embedding backlog: %w", err)
		}
		return n, nil
	}
	first, err := count()
	if err != nil || first == 0 {
		return err
	}
	start, n, before := time.Now(), first, probe.sample(ctx)
	for n > 0 && time.Since(start) < embeddingSettleLimit {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if n, err = count(); err != nil {
			return err
		}
	}
	took, cpu := time.Since(start), between(before, probe.sample(ctx))
	say("  embedding backlog: %d of %d entries embedded in %v (%.0f/s), %d left; CPU/entry server %s Postgres %s", first-n, first, took.Round(100*time.Millisecond),
		float64(first-n)/took.Seconds(), n, cpuPerCall(cpu.Known, cpu.Server, first-n), cpuPerCall(cpu.Known, cpu.Postgres, first-n))
	return nil
}

// startServers starts one server, or o.Replicas behind HAProxy, and returns the base URL
// the calls go to, the servers' process ids and how to stop them.
func startServers(ctx context.Context, o Options, dbURL string, say func(string, ...any)) (string, []int, func(), error) {
	if o.Replicas <= 0 {
		logPath := filepath.Join(o.LogDir, "server.log")
		srv, err := StartServer(ctx, ServerOptions{Bin: o.Bin, DatabaseURL: dbURL, LogPath: logPath, Env: o.ServerEnv})
		if err != nil {
			return "", nil, nil, err
		}
		say("relayroom serve at %s (pid %d, log %s)", srv.Base, srv.PID(), logPath)
		return srv.Base, []int{srv.PID()}, func() {
			if err := srv.Stop(30 * time.Second); err != nil {
				say("stopping the server: %v", err)
			}
		}, nil
	}
	dir := filepath.Join(o.LogDir, "replicas")
	cmd := exec.CommandContext(ctx, "bash", o.ReplicasScript, "start", dir, strconv.Itoa(o.Replicas), dbURL, o.Bin)
	cmd.Env = append(os.Environ(), o.ServerEnv...)
	cmd.Stderr = o.Progress
	out, err := cmd.Output()
	if err != nil {
		return "", nil, nil, fmt.Errorf("start %d replicas: %w", o.Replicas, err)
	}
	stop := func() {
		c := exec.Command("bash", o.ReplicasScript, "stop", dir)
		c.Stderr = o.Progress
		if err := c.Run(); err != nil {
			say("stopping the replicas: %v", err)
		}
	}
	var pids []int
	for i := 1; i <= o.Replicas; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("replica%d.pid", i)))
		if err == nil {
			var pid int
			if _, err = fmt.Sscan(string(b), &pid); err == nil {
				pids = append(pids, pid)
			}
		}
		if err != nil {
			stop()
			return "", nil, nil, fmt.Errorf("replica %d: %w", i, err)
		}
	}
	base := strings.TrimSpace(string(out))
	say("%d replicas behind haproxy at %s (pids %v, logs in %s)", o.Replicas, base, pids, dir)
	return base, pids, stop, nil
}
