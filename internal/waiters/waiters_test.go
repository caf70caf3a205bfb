package waiters_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/relayroom/relayroom/internal/waiters"
)

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
		a1, end1 := s.Subscribe("a")
		defer end1()
		a2, end2 := s.Subscribe("a")
		defer end2()
		b, endB := s.Subscribe("b")
		defer endB()
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
		one, end1 := s.Subscribe(1)
		defer end1()
		two, end2 := s.Subscribe(2)
		defer end2()
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
}

func TestFollow(t *testing.T) {
	t.Parallel()
	t.Run("a lost connection wakes every waiter and listens again; a done context ends it", func(t *testing.T) {
		t.Parallel()
		var s waiters.Set[string]
		ch, end := s.Subscribe("a")
		defer end()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		woken := false
		s.Follow(ctx, slog.New(slog.DiscardHandler), "test listener", func(ctx context.Context) error {
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
}
