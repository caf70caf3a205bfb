package stopwords

import "testing"

func TestStopWords(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"the":           true,
		"The, and":      true,
		"(Is) it?":      true,
		"the billing":   false,
		"ZX-4471":       false,
		"":              false,
		"   ":           false,
		"other there":   true,
		"theory thesis": false,
	} {
		t.Run(q, func(t *testing.T) {
			if got := Only(q); got != want {
				t.Fatalf("Only(%q) = %v, want %v", q, got, want)
			}
		})
	}
}
