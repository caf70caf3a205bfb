package app

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// fdReserve is how many open files the process keeps for itself besides client
// connections: the database pools, log and data files, outgoing HTTP (embedder,
// webhooks).
const fdReserve = 256

// connCap is the number of client connections the server keeps open at most: the
// configured cap, lowered to fit the process's open-file limit so that accepting a client
// can never take the last descriptor the database pools or the health checks need.
func connCap(configured, dbConns int, log *slog.Logger) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit; the connection cap is used as configured", "error", err.Error())
		return configured
	}
	room := int64(lim.Cur) - int64(dbConns) - fdReserve
	if room < int64(configured) {
		capped := int(max(room, 1))
		log.Warn("the open-file limit lowers the connection cap", "configured", configured, "cap", capped, "open_file_limit", lim.Cur)
		return capped
	}
	return configured
}

// connLimiter caps the server's open client connections. At the cap, a new connection
// takes the place of one that does nothing useful: an idle keep-alive connection first,
// else the oldest connection that has not yet sent a whole request's headers (a slow
// client). When every connection is busy with a request, the new one is closed at once
// rather than queued. So a flood of slow clients costs at most the cap in descriptors,
// and a health check still gets in while the flood holds only unfinished connections.
type connLimiter struct {
	net.Listener
	max int

	mu      sync.Mutex
	conns   map[*limitedConn]struct{}
	evicted int64
	refused int64
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[*limitedConn]struct{}{}}
}

// limitedConn is one accepted connection and the state net/http last reported for it.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	once  sync.Once
	state http.ConnState // guarded by l.mu
	since time.Time      // when state was entered; guarded by l.mu
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.forget(c) })
	return c.Conn.Close()
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &limitedConn{Conn: nc, l: l, state: http.StateNew, since: time.Now()}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.conns) >= l.max {
			victim = l.victimLocked()
			if victim == nil {
				l.refused++
				l.mu.Unlock()
				// Refused: the client sees the connection closed and may retry.
				if err := nc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
					return nil, err
				}
				continue
			}
			delete(l.conns, victim)
			l.evicted++
		}
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			// Its server goroutine sees the read fail and ends the connection.
			_ = victim.Close() // a connection already closing by itself is fine
		}
		return c, nil
	}
}

// victimLocked picks the connection to close for a new one: any idle connection, else
// the one that has waited longest for its request's headers, else none.
func (l *connLimiter) victimLocked() *limitedConn {
	var oldestNew *limitedConn
	for c := range l.conns {
		switch c.state {
		case http.StateIdle:
			return c
		case http.StateNew:
			if oldestNew == nil || c.since.Before(oldestNew.since) {
				oldestNew = c
			}
		}
	}
	return oldestNew
}

// track is the server's ConnState hook.
func (l *connLimiter) track(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	if st == http.StateClosed || st == http.StateHijacked {
		c.once.Do(func() { l.forget(c) })
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.state, c.since = st, time.Now()
}

func (l *connLimiter) forget(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// open is the number of client connections held now.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
