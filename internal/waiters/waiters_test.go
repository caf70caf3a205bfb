package waiters_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/waiters"
)

// subscribe subscribes to key until the test ends.
func subscribe[K comparable](t *testing.T, s *waiters.Set[K], key K) <-chan struct{} {
	ch, end := s.Subscribe(key)
	t.Cleanup(end)
	return ch
}

// pending reports whether a token is waiting on ch, taking it.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	t.Run("a wake reaches the key's waiters only, and a burst leaves one token", func(t *testing.T) {
		t.Parallel()
		var s waiters.Set[string]
		a1, a2, b := subscribe(t, &s, "a"), subscribe(t, &s, "a"), subscribe(t, &s, "b")
		s.Wake("a")
		s.Wake("a")
		if !pending(a1) || !pending(a2) {
			t.Fatal("a waiter of the woken key got no token")
		}
		if pending(a1) || pending(a2) {
			t.Fatal("a burst of two wakes left more than one token")
		}
		if pending(b) {
			t.Fatal("a waiter of another key was woken")
		}
	})
	t.Run("WakeAll reaches every key", func(t *testing.T) {
		t.Parallel()
		var s waiters.Set[int]
		one, two := subscribe(t, &s, 1), subscribe(t, &s, 2)
		s.WakeAll()
		if !pending(one) || !pending(two) {
			t.Fatal("WakeAll missed a key")
		}
	})
	t.Run("an ended subscription is woken no more", func(t *testing.T) {
		t.Parallel()
		var s waiters.Set[string]
		ch, end := s.Subscribe("a")
		end()
		s.Wake("a")
		s.WakeAll()
		if pending(ch) {
			t.Fatal("an ended subscription got a token")
		}
	})
	t.Run("Follow: a lost connection wakes every waiter and listens again; a done context ends it", func(t *testing.T) {
		t.Parallel()
		var s waiters.Set[string]
		ch := subscribe(t, &s, "a")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls, woken := 0, false
		s.Follow(ctx, slog.New(slog.DiscardHandler), "test listener", func(ctx context.Context, connected func()) error {
			calls++
			if calls == 1 {
				return errors.New("connection lost")
			}
			woken = pending(ch)
			cancel()
			return ctx.Err()
		})
		if calls != 2 {
			t.Fatalf("listen ran %d times, want 2", calls)
		}
		if !woken {
			t.Fatal("the waiters were not woken after the lost connection")
		}
	})
	t.Run("Follow says when the connection was lost and when it is back, not every attempt", func(t *testing.T) {
		t.Parallel()
		var s waiters.Set[string]
		var buf bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		s.Follow(ctx, slog.New(slog.NewJSONHandler(&buf, nil)), "test listener", func(ctx context.Context, connected func()) error {
			calls++
			if calls <= 3 {
				if got := s.State(); got != waiters.StateConnecting {
					t.Errorf("state before the first LISTEN: %q, want %q", got, waiters.StateConnecting)
				}
				return errors.New("connection refused")
			}
			connected()
			if got := s.State(); got != waiters.StateListening {
				t.Errorf("state once listening: %q, want %q", got, waiters.StateListening)
			}
			cancel()
			return ctx.Err()
		})
		logged := buf.String()
		if got := s.State(); got != waiters.StateReconnecting {
			t.Errorf("state after the connection ended: %q, want %q", got, waiters.StateReconnecting)
		}
		if n := strings.Count(logged, "\n"); n != 2 ||
			!strings.Contains(logged, `"msg":"test listener: connection lost, reconnecting"`) ||
			!strings.Contains(logged, `"msg":"test listener: reconnected"`) || !strings.Contains(logged, `"failed_attempts":2`) {
			t.Fatalf("%d lines:\n%s", n, logged)
		}
	})
}
