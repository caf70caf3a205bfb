// Package cli holds what the repository's commands (cmd/...) share: the context a command
// runs under, how its outcome becomes the process's exit, and its flag sets. The commands
// themselves only parse arguments and call into internal/.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is a command's body: its arguments (without the program's name) and where it writes.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Context is cancelled by an interrupt or SIGTERM, so that a command stops the servers
// and clusters it started before the process ends; stop releases the signals. Only the
// first signal is caught: a second one ends the process at once, as an operator who
// presses Ctrl-C again during a long drain expects (it was ignored).
func Context() (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-caught:
		case <-ctx.Done():
		}
		// The signals' default action again, before anyone sees ctx done: a second
		// signal during the stop ends the process.
		signal.Stop(caught)
		cancel()
	}()
	return ctx, cancel
}

// Main runs run with the process's arguments and standard streams under Context and
// exits 1 after printing an error, prefixed by the command's name.
func Main(name string, run Run) {
	ctx, stop := Context()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// ErrUsage marks a usage error: a command line that does not say what to do. The
// process exits 2 for it (1 for a failure), as the admin commands document.
var ErrUsage = errors.New("usage")

// Flags is a command's flag set: a parse error is returned (the caller decides the exit)
// and the usage and errors go to stderr, not to the process's own.
func Flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseInterspersed parses args into fs, flags anywhere, and returns the other arguments
// in order. The flag package stops at the first of them, so in "migrate down 1
// --database-url X" the flag was dropped without a word and the command went to another
// database. After "--" everything is an argument.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUsage, err)
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// Parse parses args into fs for a command that takes flags only: a flag that does not
// parse, or an argument left over (ignored, it let "serve extra" start as if it were
// not there), is a usage error (exit 2).
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument(s) %q (this command takes flags only)", ErrUsage, fs.Args())
	}
	return nil
}
