// Package waiters holds the in-process side of LISTEN/NOTIFY: the goroutines of this
// replica waiting for news of a key (a project's live pages, an agent's long polls), each
// woken with a token that carries nothing. The dashboard's hub and the pager's long polls
// both keep their waiters here, so subscribing, waking and the coalescing of bursts are
// written once.
package waiters

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Set is the waiters of one process, by key. The zero value is ready to use.
type Set[K comparable] struct {
	mu   sync.Mutex
	subs map[K]map[chan struct{}]struct{}
	// listening is whether Follow's LISTEN is in place, and listened whether it ever was,
	// for readiness and the metrics (State).
	listening, listened atomic.Bool
}

// The states of a Set's LISTEN connection (State).
const (
	// StateConnecting: Follow has not listened yet (or is not running).
	StateConnecting = "connecting"
	// StateListening: notifications reach the waiters as they are sent.
	StateListening = "listening"
	// StateReconnecting: the connection was lost; a notification is seen only by the
	// waiters' own periodic checks until it is back.
	StateReconnecting = "reconnecting"
)

// State says whether Follow's connection is listening now.
func (s *Set[K]) State() string {
	switch {
	case s.listening.Load():
		return StateListening
	case s.listened.Load():
		return StateReconnecting
	}
	return StateConnecting
}

// Subscribe returns a channel that receives a token after each Wake of key (a burst
// coalesces into one pending token) and the function that ends the subscription.
func (s *Set[K]) Subscribe(key K) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[K]map[chan struct{}]struct{}{}
	}
	if s.subs[key] == nil {
		s.subs[key] = map[chan struct{}]struct{}{}
	}
	s.subs[key][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs[key], ch)
		if len(s.subs[key]) == 0 {
			delete(s.subs, key)
		}
		s.mu.Unlock()
	}
}

// Wake hands every waiter of key a token, unless one is already pending: the waiter will
// fetch everything new when it runs, so one token is as good as many.
func (s *Set[K]) Wake(key K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs[key] {
		signal(ch)
	}
}

// WakeAll wakes every waiter of every key: after a reconnect a notification may have been
// lost, so every waiter checks again.
func (s *Set[K]) WakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, chans := range s.subs {
		for ch := range chans {
			signal(ch)
		}
	}
}

// Reconnect delays of Follow: the first, doubled after each failure up to the last. The
// last is short: a wake or a page's news notified between Postgres coming back and the
// listener's next attempt is seen only by the waiters' own checks, and an attempt against
// a server that is down costs one refused connection. With 30 s, a wake queued a second
// after an outage reached a waiting long poll 11 s later.
const (
	firstDelay = 500 * time.Millisecond
	maxDelay   = 5 * time.Second
)

// Follow runs listen (one connection's LISTEN, handing its notifications to Wake) until
// ctx is done. listen calls connected once its LISTEN is in place: every waiter is woken
// to check again, since a notification sent while it was not listening is lost. Each
// time listen returns while ctx is not done, it runs again after a delay (nextDelay).
//
// The log says when the connection was lost, at most every stillDownEvery while it stays
// lost, and when it is back, with how long it was down: a line every attempt (every 5 s
// per listener) drowned an outage's useful lines and never said when it ended. what names
// the listener.
func (s *Set[K]) Follow(ctx context.Context, log *slog.Logger, what string, listen func(ctx context.Context, connected func()) error) {
	var (
		delay            time.Duration
		lostAt, loggedAt time.Time
		failures         int
	)
	connected := func() {
		s.listening.Store(true)
		s.listened.Store(true)
		s.WakeAll()
		if !lostAt.IsZero() {
			log.InfoContext(ctx, what+": reconnected", "down_for", time.Since(lostAt).Round(time.Millisecond).String(), "failed_attempts", failures)
			lostAt, failures = time.Time{}, 0
		}
	}
	for ctx.Err() == nil {
		began := time.Now()
		err := listen(ctx, connected)
		s.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		delay = nextDelay(delay, time.Since(began))
		switch now := time.Now(); {
		case lostAt.IsZero():
			lostAt, loggedAt = now, now
			log.WarnContext(ctx, what+": connection lost, reconnecting", "error", fmt.Sprint(err), "in", delay.String())
		default:
			failures++
			if now.Sub(loggedAt) >= stillDownEvery {
				loggedAt = now
				log.WarnContext(ctx, what+": still reconnecting", "error", fmt.Sprint(err), "down_for", now.Sub(lostAt).Round(time.Second).String(), "failed_attempts", failures)
			}
		}
		s.WakeAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// stillDownEvery is how often Follow says a connection is still lost.
const stillDownEvery = time.Minute

// nextDelay is the wait before listening again after a connection that held for held,
// the last wait having been prev (0 at first): half a second, doubled after each failure
// up to 5 s, and half a second again after a connection that held longer than the
// longest wait. Without that reset, a server that lost its connection now and then over
// days waited 30 s, notifications lost, after every later loss.
func nextDelay(prev, held time.Duration) time.Duration {
	if prev == 0 || held > maxDelay {
		return firstDelay
	}
	return min(prev*2, maxDelay)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a token is already pending
	}
}
