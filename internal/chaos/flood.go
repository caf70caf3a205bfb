package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/loadtest"
)

// floodKeptRatio is the share of legitimate throughput a wrong-key flood may leave.
const floodKeptRatio = 0.8

// floodSource is the second loopback address the flood comes from, so that limits per
// client address can tell it from the legitimate client.
const floodSource = "127.0.0.2"

// wrongKeyFlood measures legitimate whoami calls/s alone, then again while FloodConns
// connections send agent keys with valid checksums and wrong secrets (each one gets past
// the checksum, so the server has to look it up), from a second loopback address.
func wrongKeyFlood(ctx context.Context, b *bench, srv *loadtest.Server) (Finding, error) {
	o := b.o
	env, err := b.env(srv, o.LegitConns, 30*time.Second)
	if err != nil {
		return Finding{}, err
	}
	defer env.Client.Close()
	legit := env.Repeat(env.Threads(loadtest.CallerPart, "whoami", nil))
	window := loadtest.Window{Conns: o.LegitConns, Duration: o.Window, Warmup: time.Second}
	alone := loadtest.Measure(ctx, window, legit)

	source, sourceNote := floodSource, "from "+floodSource
	if l, err := net.Listen("tcp", floodSource+":0"); err != nil {
		source, sourceNote = "", "from 127.0.0.1 ("+floodSource+" is not bindable here)"
	} else if err := l.Close(); err != nil {
		return Finding{}, err
	}
	var local net.Addr
	if source != "" {
		local = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	flooder := loadtest.NewClient(o.FloodConns, 30*time.Second, local)
	defer flooder.Close()
	url := b.fixture.ThreadsURL(srv.Base, loadtest.CallerPart)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	var sent atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	log0, err := srv.LogBytes()
	if err != nil {
		return Finding{}, err
	}
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range o.FloodConns {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				status := "no key (crypto/rand failed)"
				if key, _, err := auth.Generate(auth.AgentKeyPrefix); err == nil {
					status = floodOnce(floodCtx, flooder.HTTP, url, key, body)
				}
				sent.Add(1)
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // the flood is under way before the window opens
	flooded := loadtest.Measure(ctx, loadtest.Window{Conns: o.LegitConns, Duration: o.Window}, legit)
	stopFlood()
	wg.Wait()
	log1, err := srv.LogBytes()
	if err != nil {
		return Finding{}, err
	}
	n := sent.Load()
	ratio := 0.0
	if alone.Rate() > 0 {
		ratio = flooded.Rate() / alone.Rate()
	}
	delete(statuses, "canceled")
	perReq := 0.0
	if n > 0 {
		perReq = float64(log1-log0) / float64(n)
	}
	return Finding{
		Did: fmt.Sprintf("%d connections of whoami calls with wrong keys (valid checksums, random ids and secrets) %s, beside %d legitimate connections; %v windows",
			o.FloodConns, sourceNote, o.LegitConns, o.Window),
		Measured: fmt.Sprintf("legitimate whoami %.0f calls/s alone (p50 %v), %.0f calls/s under the flood (p50 %v): %.2f×; flood answers %s; server log grew %s (%.0f bytes per wrong key)",
			alone.Rate(), alone.P50.Round(10*time.Microsecond), flooded.Rate(), flooded.P50.Round(10*time.Microsecond), ratio, counts(statuses), mb(log1-log0), perReq),
		Target: fmt.Sprintf("legitimate throughput under the flood ≥ %.0f %% of it alone, and no legitimate call fails", floodKeptRatio*100),
		Held:   ratio >= floodKeptRatio && flooded.Errors == 0 && alone.Errors == 0,
	}, nil
}

// floodOnce sends one call with a wrong key and returns its HTTP status (or what failed).
func floodOnce(ctx context.Context, c *http.Client, url, key string, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "bad request"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agent-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "canceled"
		}
		return "transport error"
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Sprintf("%d (answer cut)", resp.StatusCode)
	}
	return fmt.Sprint(resp.StatusCode)
}
