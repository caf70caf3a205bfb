package app_test

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/auth"
)

// BenchmarkRequestLogLine is the access log line every request writes, through the
// service's logger (request id, credential redaction, JSON), to a writer that keeps
// nothing: its CPU and allocations per request. The threads path always holds a
// connect code, which the line masks.
func BenchmarkRequestLogLine(b *testing.B) {
	code, _, err := auth.Generate(auth.ConnectCodePrefix)
	if err != nil {
		b.Fatal(err)
	}
	log := app.NewLogger(io.Discard, "info")
	ctx := app.WithRequestID(context.Background(), "0123456789abcdef01234567")
	for _, path := range []string{"/mcp/" + code + "?part=architect", "/api/mcp"} {
		b.Run(path[:4], func(b *testing.B) {
			b.ReportAllocs()
			var before, after syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", "POST"),
					slog.String("path", app.RedactCredentials(path)), slog.Int("status", 200),
					slog.Float64("duration_ms", 1.234), slog.Int64("bytes", 428))
			}
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
				b.Fatal(err)
			}
			// The process's CPU time (every thread): far steadier than ns/op on a busy machine.
			used := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
			b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
		})
	}
}
