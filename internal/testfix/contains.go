package testfix

import (
	"strings"
	"testing"
)

// CheckContains fails the test for each of wants that text lacks, naming the text by what
// and showing it; the test goes on, so one run reports every line that is missing.
func CheckContains(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
