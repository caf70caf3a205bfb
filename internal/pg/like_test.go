package pg_test

import (
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

func TestLikeSubstring(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":             "%%",
		"ZX-4471":      "%ZX-4471%",
		`100% safe_ok`: `%100\% safe\_ok%`,
		`C:\temp`:      `%C:\\temp%`,
	} {
		if got := pg.LikeSubstring(in); got != want {
			t.Errorf("LikeSubstring(%q) = %q, want %q", in, got, want)
		}
	}
}
