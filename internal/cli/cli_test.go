package cli_test

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/relayroom/relayroom/internal/cli"
)

// TestParseInterspersed: flags after a command's arguments count ("migrate down 1
// --database-url X" went to another database when they were dropped).
func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (string, []string, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		db := fs.String("database-url", "", "")
		rest, err := cli.ParseInterspersed(fs, args)
		return *db, rest, err
	}
	t.Run("flags before, between and after arguments", func(t *testing.T) {
		db, rest, err := parse("down", "1", "--database-url", "X")
		if err != nil || db != "X" || !slices.Equal(rest, []string{"down", "1"}) {
			t.Fatalf("%q %q %v", db, rest, err)
		}
	})
	t.Run("after -- everything is an argument", func(t *testing.T) {
		db, rest, err := parse("a", "--", "--database-url", "X")
		if err != nil || db != "" || !slices.Equal(rest, []string{"a", "--database-url", "X"}) {
			t.Fatalf("%q %q %v", db, rest, err)
		}
	})
	t.Run("an unknown flag is a usage error", func(t *testing.T) {
		if _, _, err := parse("up", "--bogus"); !errors.Is(err, cli.ErrUsage) {
			t.Fatalf("%v", err)
		}
	})
}
