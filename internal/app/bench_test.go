package app_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkWhoAmIOverHTTP measures one tools/call of whoami through the whole stack: HTTP,
// JSON-RPC, credential verification and the membership UPDATE … RETURNING on real Postgres,
// result shaping. Client and server run in this process, so allocs/op counts both sides.
func BenchmarkWhoAmIOverHTTP(b *testing.B) {
	s := startServer(b)
	url, key := s.threadsURL("escalations", "architect"), s.key("acme/architect")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	call := func() {
		if err := postWhoami(client, url, key); err != nil {
			b.Fatal(err)
		}
	}
	call()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		call()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkWhoAmIOverHTTPParallel is the same call from many clients at once: throughput
// of one process and one Postgres on this machine.
func BenchmarkWhoAmIOverHTTPParallel(b *testing.B) {
	s := startServer(b)
	url, key := s.threadsURL("escalations", "architect"), s.key("acme/architect")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := postWhoami(client, url, key); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// postWhoami makes one whoami tools/call with c and reads the whole answer, as a client
// does; an answer other than 200 is an error.
func postWhoami(c *http.Client, url, key string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agent-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
