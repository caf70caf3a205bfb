package main

import (
	"context"
	"fmt"
	"io"
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
	log := app.NewLogger(os.Stderr, cfg.LogLevel)
	return app.Run(ctx, cfg, log, nil)
}
