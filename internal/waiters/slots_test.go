package waiters

import "testing"

// TestSlots: a key holds at most max slots; one given back can be taken again; keys are
// counted apart, and a key no longer held takes no memory.
func TestSlots(t *testing.T) {
	t.Parallel()
	var s Slots[string]
	if !s.Take("a", 2) || !s.Take("a", 2) {
		t.Fatal("two slots of two refused")
	}
	if s.Take("a", 2) {
		t.Fatal("a third slot of two taken")
	}
	if !s.Take("b", 2) {
		t.Fatal("another key held back")
	}
	s.Give("a")
	if !s.Take("a", 2) {
		t.Fatal("a slot given back cannot be taken again")
	}
	s.Give("a")
	s.Give("a")
	s.Give("b")
	if len(s.held) != 0 {
		t.Fatalf("keys no longer held remain: %v", s.held)
	}
}
