package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
)

// healthcheck asks the local server's /readyz: container images without a shell or curl
// use it as their health probe.
func healthcheck(ctx context.Context, args []string, stderr io.Writer) error {
	fs := cli.Flags("relayroom healthcheck", stderr)
	addr := fs.String("addr", os.Getenv("RELAYROOM_ADDR"), "the server's listen address ($RELAYROOM_ADDR)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *addr == "" {
		*addr = ":48801"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, config.DerivePublicURL(*addr)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /readyz answered %d", resp.StatusCode)
	}
	return nil
}
