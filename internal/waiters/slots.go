package waiters

import "sync"

// Slots bounds how many of one key are in progress at once in this process: an agent's
// long polls, a person's live streams, an organisation's webhook posts. Routes that
// outlive the per-address request limits by design are bounded per key instead. The zero
// value is ready.
type Slots[K comparable] struct {
	mu   sync.Mutex
	held map[K]int
}

// Take takes one of key's slots when fewer than max are held; false takes nothing.
func (s *Slots[K]) Take(key K, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] >= max {
		return false
	}
	if s.held == nil {
		s.held = map[K]int{}
	}
	s.held[key]++
	return true
}

// Give gives back a slot Take took.
func (s *Slots[K]) Give(key K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key]--; s.held[key] <= 0 {
		delete(s.held, key) // a key no longer held takes no memory
	}
}
