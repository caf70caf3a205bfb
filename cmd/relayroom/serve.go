package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := cli.Flags("relayroom serve", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: relayroom serve [flags]\n\nEvery flag can be set by the environment variable named in its help.")
		fs.PrintDefaults()
	}
	cfg, err := config.Load(fs, args, os.Getenv)
	if errors.Is(err, cli.ErrUsage) || errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err != nil {
		// A fatal error is a log line like the others (one JSON object with its time and
		// level), so that the last line of a crash-looping replica reaches the log shipper
		// whole.
		app.NewLogger(stderr, "info").Error("cannot start", "error", err)
		return errLogged{err}
	}
	log := app.NewLogger(stderr, cfg.LogLevel)
	// Libraries that log through the process's default logger (the OAuth server library
	// does, and the standard log package) then write the same redacted JSON lines.
	slog.SetDefault(app.LibraryLogger(log))
	warnUnknownNames(log)
	if err := app.Run(ctx, cfg, log, nil); err != nil {
		said := err.Error()
		if msg, ok := pg.ConnectFailure(err); ok {
			said = msg // the database and the cause, not the driver's framing
		}
		log.Error("stopped on an error", "error", said)
		return errLogged{err}
	}
	return nil
}

// errLogged is an error the command has logged already: the process exits 1 without
// printing it again.
type errLogged struct{ error }

func (e errLogged) Unwrap() error { return e.error }

// warnUnknownNames reports RELAYROOM_ variables that nothing reads: a misspelt setting
// otherwise leaves its default in force without a word.
func warnUnknownNames(log *slog.Logger) {
	for _, u := range config.UnknownNames(os.Environ()) {
		if u.Like != "" {
			log.Warn("unknown setting ignored", "name", u.Name, "did_you_mean", u.Like)
			continue
		}
		log.Warn("unknown setting ignored", "name", u.Name)
	}
}
