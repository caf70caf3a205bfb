package waiters

import (
	"slices"
	"testing"
	"time"
)

// The reconnect wait grows while connections keep failing at once, and starts again from
// half a second after a connection that held.
func TestNextDelay(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	d := time.Duration(0)
	for range 9 {
		d = nextDelay(d, time.Millisecond)
		got = append(got, d)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("waits after failing connections: %v, want %v", got, want)
	}
	if d := nextDelay(5*time.Second, time.Hour); d != 500*time.Millisecond {
		t.Errorf("after a connection that held an hour: %v, want 500ms", d)
	}
}
