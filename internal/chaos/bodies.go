package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/relayroom/relayroom/internal/loadtest"
)

// bigBodyLimitGrowth is how much the server's resident memory may grow, at its peak, while
// BigBodies unauthenticated bodies arrive at once, for the attack to count as held: with
// the credential checked before the body is read, or in-flight bytes bounded, the bodies
// never sit in memory together (200 × 4 MB would be 800 MB).
const bigBodyLimitGrowth = 128 << 20

// bigBodyFDSlack is how many descriptors above its idle count a server that has let go
// of the attack's connections may still hold (pool connections come and go).
const bigBodyFDSlack = 4

// bigBodyAnswerTimeout bounds the wait for each post's answer (and so the attack's time).
const bigBodyAnswerTimeout = 30 * time.Second

// bigBodies posts BigBodies unauthenticated JSON bodies of BodyBytes at once and samples
// the server's memory (VmRSS, VmHWM) before, during and after.
func bigBodies(ctx context.Context, b *bench, srv *loadtest.Server) (Finding, error) {
	o := b.o
	// A real JSON-RPC call that parses: the review's bodies were read and parsed before
	// the credential was looked at. One buffer serves every request.
	prefix := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_rooms","arguments":{"pad":"`
	suffix := `"}}}`
	body := []byte(prefix + strings.Repeat("a", max(o.BodyBytes-len(prefix)-len(suffix), 0)) + suffix)

	rss0, _, err := srv.Memory()
	if err != nil {
		return Finding{}, err
	}
	fds0, err := srv.OpenFiles()
	if err != nil {
		return Finding{}, err
	}
	client := &http.Client{Timeout: bigBodyAnswerTimeout, Transport: &http.Transport{MaxConnsPerHost: o.BigBodies, MaxIdleConnsPerHost: o.BigBodies}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	statuses := map[string]int{}
	stop := make(chan struct{})
	var rssPeak int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			if rss, _, err := srv.Memory(); err == nil {
				rssPeak = max(rssPeak, rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	healthDuring := "not asked"
	var wg sync.WaitGroup
	t0 := time.Now()
	for range o.BigBodies {
		wg.Go(func() {
			key := "connection error"
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.Base+"/api/mcp", bytes.NewReader(body))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
				var resp *http.Response
				resp, err = client.Do(req)
				if os.IsTimeout(err) {
					key = fmt.Sprintf("no answer within %v", bigBodyAnswerTimeout)
				}
				if err == nil {
					key = fmt.Sprint(resp.StatusCode)
					if _, err := io.Copy(io.Discard, resp.Body); err != nil {
						key += " (answer cut)"
					}
					resp.Body.Close()
				}
			}
			mu.Lock()
			statuses[key]++
			mu.Unlock()
		})
	}
	time.Sleep(200 * time.Millisecond)
	if code, took, err := srv.Health(ctx, 2*time.Second); err != nil {
		healthDuring = "no answer within 2 s"
		if !os.IsTimeout(err) {
			healthDuring = fmt.Sprintf("failed (%v)", err)
		}
	} else {
		healthDuring = fmt.Sprintf("%d in %v", code, took.Round(time.Millisecond))
	}
	wg.Wait()
	took := time.Since(t0)
	// A client that gave up does not stop the server reading what it already accepted:
	// wait (bounded) until the server has let go of the connections, then 3 s more for
	// what stays resident.
	released := "the server let go of the connections at once"
	for deadline := time.Now().Add(bigBodyAnswerTimeout); ; {
		n, err := srv.OpenFiles()
		if err != nil {
			return Finding{}, err
		}
		if n <= fds0+bigBodyFDSlack {
			if d := time.Since(t0) - took; d > time.Second {
				released = fmt.Sprintf("the server let go of the connections %v after the last answer", d.Round(time.Second))
			}
			break
		}
		if time.Now().After(deadline) {
			released = fmt.Sprintf("the server still held %d descriptors %v after the last answer", n-fds0, bigBodyAnswerTimeout)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	sampler.Wait()
	rss1, hwm, err := srv.Memory()
	if err != nil {
		return Finding{}, err
	}
	peak := max(rssPeak, hwm)
	return Finding{
		Did: fmt.Sprintf("%d concurrent unauthenticated POSTs of a %s JSON-RPC body to /api/mcp", o.BigBodies, mb(int64(len(body)))),
		Measured: fmt.Sprintf("RSS %s before, peak %s (VmHWM), %s 3 s after; answers %s in %v; %s; /healthz during: %s",
			mb(rss0), mb(peak), mb(rss1), counts(statuses), took.Round(time.Millisecond), released, healthDuring),
		Target: fmt.Sprintf("peak RSS grows by less than %s (the bodies are refused before they are read), /healthz answers", mb(bigBodyLimitGrowth)),
		Held:   peak-rss0 < bigBodyLimitGrowth && strings.HasPrefix(healthDuring, "200"),
	}, nil
}
