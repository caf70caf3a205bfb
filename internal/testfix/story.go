package testfix

import "testing"

// Step runs one behaviour of a story test as its own subtest, so that a failure names
// what broke; the story stops at the first broken step, since the later ones build on it.
func Step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// Check fails the test, naming the fact, when got is not want; the step goes on, so one
// run reports every fact that is wrong.
func Check[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
