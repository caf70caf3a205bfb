package loadtest

import (
	"context"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayroom/relayroom/internal/procstat"
)

// CPU is the processor time a row's counted window took, by who spent it. On a machine
// shared with other work, throughput moves with everyone else's load; the CPU a call costs
// moves much less, so it is what to compare between versions measured at different times.
type CPU struct {
	Server   time.Duration // the relayroom process
	Postgres time.Duration // every backend connected to the scratch database (the raw loops' too)
	// Client is the load generator's own process: its HTTP client for the tool rows, its
	// pgx client for the raw loops. It runs on the same cores as the server and Postgres,
	// so a call's cost to the machine is all three.
	Client time.Duration
	Known  bool // false when /proc could not be read (not Linux, another user's cluster)
}

// PerCall divides d by n calls.
func PerCall(d time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return d / time.Duration(n)
}

// cpuProbe reads the CPU times of the server processes (every replica's, summed) and of
// the database's backends.
type cpuProbe struct {
	serverPIDs []int
	pool       *pgxpool.Pool // any pool on the scratch database, to list its backends
}

type cpuSample struct {
	server  time.Duration
	client  time.Duration
	backend map[int]time.Duration
	ok      bool
}

func (p cpuProbe) sample(ctx context.Context) cpuSample {
	s := cpuSample{backend: map[int]time.Duration{}, ok: true}
	var err error
	if s.client, err = procstat.CPU(os.Getpid()); err != nil {
		s.ok = false
	}
	for _, pid := range p.serverPIDs {
		t, err := procstat.CPU(pid)
		if err != nil {
			s.ok = false
		}
		s.server += t
	}
	rows, err := p.pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		s.ok = false
		return s
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			s.ok = false
			return s
		}
		if t, err := procstat.CPU(pid); err == nil {
			s.backend[pid] = t
		}
	}
	if rows.Err() != nil || len(s.backend) == 0 {
		s.ok = false
	}
	return s
}

// between is the CPU spent from a to b. A backend that appeared meanwhile counts whole (it
// was started for the window); one that ended meanwhile is lost, so Postgres is a floor.
func between(a, b cpuSample) CPU {
	c := CPU{Server: b.server - a.server, Client: b.client - a.client, Known: a.ok && b.ok}
	for pid, t := range b.backend {
		c.Postgres += t - a.backend[pid]
	}
	return c
}
