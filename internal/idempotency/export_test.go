package idempotency

// AnswersQueued reports whether a batch of answers is being stored and how many answers
// wait for the next one: the batching test waits on it instead of on the clock.
func (s *Store) AnswersQueued() (writing bool, waiting int) {
	s.answers.mu.Lock()
	defer s.answers.mu.Unlock()
	return s.answers.writing, len(s.answers.waiting)
}
