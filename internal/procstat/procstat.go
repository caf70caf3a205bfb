// Package procstat reads what Linux's /proc says a process has used: the load test's
// probe of the server and Postgres, and the benchmarks' Postgres CPU per call
// (testfix.PostgresCPU).
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ: 100 on Linux).
const ClockTick = 10 * time.Millisecond

// CPU is a process's user + system time from /proc/<pid>/stat.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line; the
// command name (field 2) is in parentheses and may hold spaces.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields", len(f)+2)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc stat: utime %q stime %q", f[11], f[12])
	}
	return time.Duration(u+s) * ClockTick, nil
}
