package testfix

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test, naming what it waited for, once
// within has passed: for what a service does in the background (a delivery, a vector).
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
