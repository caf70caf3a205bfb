package chaos

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/relayroom/relayroom/internal/loadtest"
)

// slowClients opens SlowConns connections that each send a POST's headers (announcing a
// body) and "{", then nothing; it watches when the server closes them, samples the
// server's open descriptors, and asks /healthz while they hang.
func slowClients(ctx context.Context, b *bench, srv *loadtest.Server) (Finding, error) {
	o := b.o
	host := strings.TrimPrefix(srv.Base, "http://")
	head := "POST /api/mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
	fds0, err := srv.OpenFiles()
	if err != nil {
		return Finding{}, err
	}

	var mu sync.Mutex
	var closedAt []time.Duration // when the server closed (or answered) each connection
	var conns []net.Conn
	var dialErrs int
	start := time.Now()
	var wg sync.WaitGroup
	d := net.Dialer{Timeout: 5 * time.Second}
	for range o.SlowConns {
		c, err := d.DialContext(ctx, "tcp", host)
		if err == nil {
			_, err = c.Write([]byte(head))
		}
		if err != nil {
			dialErrs++
			if c != nil {
				c.Close()
			}
			continue
		}
		conns = append(conns, c)
		wg.Go(func() {
			// Anything the server does ends this read: an answer (408, 400), a close, a reset.
			buf := make([]byte, 512)
			_, rerr := c.Read(buf)
			if rerr == nil || !isOurClose(rerr) {
				mu.Lock()
				closedAt = append(closedAt, time.Since(start))
				mu.Unlock()
			}
		})
	}
	opened := len(conns)
	fdsPeak := fds0
	health := []string{}
	healthOK := true
	checkHealth := func() {
		code, took, err := srv.Health(ctx, 2*time.Second)
		if err != nil || code != 200 {
			healthOK = false
			health = append(health, fmt.Sprintf("failed (%v, %d)", err, code))
			return
		}
		health = append(health, took.Round(time.Millisecond).String())
	}
	checkHealth()
	deadline := start.Add(o.SlowWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := srv.OpenFiles(); err == nil && n > fdsPeak {
			fdsPeak = n
		}
		mu.Lock()
		done := len(closedAt)
		mu.Unlock()
		if done == opened {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	checkHealth()
	waited := time.Since(start)
	mu.Lock()
	closed := len(closedAt)
	var last time.Duration
	for _, t := range closedAt {
		last = max(last, t)
	}
	mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()

	stillOpen := opened - closed
	closedNote := "none closed by the server"
	if closed > 0 {
		closedNote = fmt.Sprintf("%d closed by the server, the last %v after opening", closed, last.Round(100*time.Millisecond))
	}
	measured := fmt.Sprintf("%d of %d connections still open after %v (server open files %d → peak %d); %s; /healthz answered in %s",
		stillOpen, opened, waited.Round(time.Second), fds0, fdsPeak, closedNote, strings.Join(health, " (at the start) and "))
	if dialErrs > 0 {
		measured += fmt.Sprintf("; %d connections could not be opened", dialErrs)
	}
	return Finding{
		Did:      fmt.Sprintf("%d connections send a POST's headers (Content-Length 4096) and `{`, then nothing; wait up to %v", o.SlowConns, o.SlowWait),
		Measured: measured,
		Target:   fmt.Sprintf("the server closes every one within %v (its read timeouts) and /healthz answers throughout", o.SlowWait),
		Held:     stillOpen == 0 && healthOK,
	}, nil
}

// isOurClose tells a read that ended because we closed the connection ourselves at the
// end of the wait (not the server's doing).
func isOurClose(err error) bool {
	return strings.Contains(err.Error(), "use of closed network connection")
}
