package pg_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// freezer is a TCP proxy to Postgres that can stop passing bytes without closing either
// side: what a NAT or a load balancer that dropped an idle connection looks like to the
// client, which sees neither a reset nor an answer.
type freezer struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// cut closes every connection through the proxy: pgx's goodbye to a connection it
// gave up on (a cancel request and a Terminate, through the proxy too) then fails at
// once instead of waiting out its 15 s.
func (f *freezer) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close() // some are closed already
	}
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		if err := ln.Close(); err != nil {
			t.Error(err)
		}
		f.cut()
		f.wg.Wait()
	})
	return f
}

func (f *freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // the listener closed at cleanup
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			_ = c.Close() // nothing to reach: the client sees the refusal
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, s)
		f.mu.Unlock()
		f.wg.Add(2)
		go f.pipe(c, s)
		go f.pipe(s, c)
	}
}

// pipe copies src to dst until either side ends, dropping what it reads while frozen.
func (f *freezer) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }() // the other pipe's side may be closed already
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !f.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a side closed: either ends the pair
		}
	}
}

// TestAwaitNotificationNoticesADeadConnection: a listener whose connection went silent
// (no reset, no answer) returns an error after its quiet-time question goes unanswered,
// so its caller listens again on a new connection. It used to wait on it until TCP
// keepalive gave up, tens of minutes, its replica deaf to every NOTIFY meanwhile.
func TestAwaitNotificationNoticesADeadConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.New(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	f := newFreezer(t, parsed.Host)
	parsed.Host = f.ln.Addr().String()
	conn, err := pgx.Connect(ctx, parsed.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.cut()
		_ = conn.Close(ctx) // a connection the test declared dead fails to say goodbye
	})
	if _, err := conn.Exec(ctx, "LISTEN rr_listen_test"); err != nil {
		t.Fatal(err)
	}
	notifier, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := notifier.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	const ping, pingTimeout = 100 * time.Millisecond, 500 * time.Millisecond
	t.Run("quiet pings keep the connection and its notifications", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			n, err := pg.AwaitNotification(ctx, conn, ping, pingTimeout)
			if err == nil && n.Payload != "after quiet" {
				err = errors.New("payload " + n.Payload)
			}
			done <- err
		}()
		time.Sleep(5 * ping) // several pings answered before the notification comes
		if _, err := notifier.Exec(ctx, "SELECT pg_notify('rr_listen_test', 'after quiet')"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a connection that went silent is an error", func(t *testing.T) {
		f.frozen.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := pg.AwaitNotification(ctx, conn, ping, pingTimeout)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "did not answer") {
				t.Fatalf("got %v, want the unanswered question", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("still waiting on a connection that answers nothing")
		}
	})
	t.Run("the caller's own end is not a dead connection", func(t *testing.T) {
		fresh, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := fresh.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := pg.AwaitNotification(cctx, fresh, ping, pingTimeout); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}
