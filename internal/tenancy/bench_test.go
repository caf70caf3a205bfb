package tenancy_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/testfix"
)

// BenchmarkCachedCheck is the check every call of a cached caller pays (verification):
// one transaction of BEGIN, the settings, the credentials' check, the membership's check
// and COMMIT, as a read tool's call sends it ahead of its own query. pg-cpu-ns/op is the
// Postgres backends' CPU per check and cpu-ns/op this process's, which move far less with
// the machine's load than ns/op.
func BenchmarkCachedCheck(b *testing.B) {
	ctx := context.Background()
	bd := testfix.Seed(b, twoProjects)
	res := bd.Result
	code, room := res.Projects["one"].ConnectCode, res.Projects["one"].ID
	key := res.Agents["acme/architect"].Key
	r := bd.Resolver.WithScopeCache(time.Hour)
	for _, c := range []struct {
		name    string
		resolve func() error
	}{
		{"part", func() error { _, err := r.Part(ctx, code, "architect", key); return err }},
		{"room", func() error { _, err := r.RoomByKey(ctx, key, room); return err }},
		{"agent", func() error { _, err := r.Agent(ctx, key); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.resolve(); err != nil { // fills the cache
				b.Fatal(err)
			}
			pg0, pgOK := testfix.PostgresCPU(b, bd.DB)
			cpu0 := selfCPU(b)
			for b.Loop() {
				if err := c.resolve(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(selfCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			if pg1, ok := testfix.PostgresCPU(b, bd.DB); ok && pgOK {
				b.ReportMetric(float64(pg1-pg0)/float64(b.N), "pg-cpu-ns/op")
			}
		})
	}
}

// selfCPU is the CPU time this process has used (user and system, every thread).
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
