package waiters_test

import (
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
