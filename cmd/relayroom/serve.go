package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := cli.Flags("relayroom serve", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: relayroom serve [flags]\n\nEvery flag can be set by the environment variable named in its help.")
		fs.PrintDefaults()
	}
	cfg, err := config.Load(fs, args, os.Getenv)
	if err != nil {
		return err
	}
	log := app.NewLogger(stderr, cfg.LogLevel)
	// Libraries that log through the process's default logger (the OAuth server library
	// does, and the standard log package) then write the same redacted JSON lines.
	slog.SetDefault(log)
	warnUnknownNames(log)
	return app.Run(ctx, cfg, log, nil)
}

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
