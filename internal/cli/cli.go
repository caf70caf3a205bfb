// Package cli holds what the repository's commands (cmd/...) share: the context a command
// runs under, how its outcome becomes the process's exit, and its flag sets. The commands
// themselves only parse arguments and call into internal/.
package cli

import (
	"context"
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
// and clusters it started before the process ends; stop releases the signals.
func Context() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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

// Flags is a command's flag set: a parse error is returned (the caller decides the exit)
// and the usage and errors go to stderr, not to the process's own.
func Flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
