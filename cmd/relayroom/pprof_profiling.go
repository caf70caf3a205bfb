//go:build pprof

package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiling handlers, on http.DefaultServeMux
	"os"
	"runtime"
)

// A binary built with `go build -tags pprof` serves net/http/pprof on
// RELAYROOM_PPROF_ADDR when it is set (a loopback address only), with mutex and block
// profiling on: how the server was profiled under `make loadtest` (docs/performance.md).
// Release builds do not contain it.
func init() {
	addr := os.Getenv("RELAYROOM_PPROF_ADDR")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(os.Stderr, "RELAYROOM_PPROF_ADDR must be a loopback address and port, not %q\n", addr)
		os.Exit(2)
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(100_000)
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			fmt.Fprintln(os.Stderr, "pprof:", err)
		}
	}()
}
