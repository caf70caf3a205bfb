package testfix

import (
	"context"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/procstat"
)

// PostgresCPU is the processor time (user and system) the server processes of d's
// database have used so far: every backend connected to it but the one asking, read from
// /proc. A benchmark reads it before and after its loop for the Postgres CPU per call,
// which moves far less with the machine's load than the time a call takes. ok is false
// where /proc cannot be read (not Linux, a cluster of another user or machine): the
// benchmark then reports no such number.
func PostgresCPU(tb testing.TB, d *pg.DB) (cpu time.Duration, ok bool) {
	tb.Helper()
	ctx := context.Background()
	rows, err := d.Ops.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		tb.Fatalf("testfix: list the database's backends: %v", err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatalf("testfix: list the database's backends: %v", err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("testfix: list the database's backends: %v", err)
	}
	for _, pid := range pids {
		t, err := procstat.CPU(pid)
		if err != nil {
			return 0, false
		}
		cpu += t
	}
	return cpu, len(pids) > 0
}
