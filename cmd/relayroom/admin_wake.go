package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/wake"
)

// wakeService is the wake service for admin commands; the server key is needed only to
// set a webhook (its secret is stored sealed).
func wakeService(env adminEnv, needKey bool) (*wake.Service, error) {
	box, err := wake.OptionalSecretBox(env.cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("RELAYROOM_SECRET_KEY: %w", err)
	}
	if box == nil && needKey {
		return nil, apperr.New(apperr.Invalid, "RELAYROOM_SECRET_KEY is not set: it must be the server's key (openssl rand -hex 32 makes one)")
	}
	return wake.New(wake.Deps{DB: env.svc.DB, Q: env.svc.Q, Box: box, PrivateTargets: env.cfg.WebhookPrivateTargets}), nil
}

// wakeRun is what a wake command does with the wake service.
type wakeRun = func(ctx context.Context, s *wake.Service) (any, error)

// wakeCommand is a wake command: the flags that flags declares (need names the required
// ones), the wake service (with the server key when needKey), and run's result printed.
func wakeCommand(help string, needKey bool, flags func(fs *flag.FlagSet) (need []string, run wakeRun)) adminCommand {
	return command(help, func(fs *flag.FlagSet) ([]string, runFunc) {
		need, run := flags(fs)
		return need, func(ctx context.Context, env adminEnv) (any, error) {
			s, err := wakeService(env, needKey)
			if err != nil {
				return nil, err
			}
			return run(ctx, s)
		}
	})
}

func wakeAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"wake set-webhook": wakeCommand("Deliver an agent's wakes to an HTTPS webhook at a public address (loopback, private networks and http\non loopback only with RELAYROOM_WEBHOOK_PRIVATE_TARGETS=true, as the server must have it). A new signing secret is\nprinted once; only its ciphertext is stored, under RELAYROOM_SECRET_KEY (which must match the server's).\nSetting it again replaces the URL and the secret. See docs/wakes.md for verifying the signature.", true, func(fs *flag.FlagSet) ([]string, wakeRun) {
			agent, url := fs.String("agent", "", "the agent, org/slug"), fs.String("url", "", "the webhook URL")
			return []string{"agent", "url"}, func(ctx context.Context, s *wake.Service) (any, error) {
				t, secret, err := s.SetWebhook(ctx, *agent, *url)
				if err != nil {
					return nil, err
				}
				return map[string]any{"agent": t.Agent, "url": t.URL, "secret": secret,
					"note": "the secret is shown once: store it where the webhook receiver reads it"}, nil
			}
		}),
		"wake clear-webhook": wakeCommand("Stop delivering an agent's wakes by webhook (pagers get them again).", false, func(fs *flag.FlagSet) ([]string, wakeRun) {
			agent := fs.String("agent", "", "the agent, org/slug")
			return []string{"agent"}, func(ctx context.Context, s *wake.Service) (any, error) {
				removed, err := s.ClearWebhook(ctx, *agent)
				return map[string]any{"agent": *agent, "removed": removed}, err
			}
		}),
		"wake webhooks": wakeCommand("List the agents that have a webhook (never their secrets).", false, func(fs *flag.FlagSet) ([]string, wakeRun) {
			return nil, func(ctx context.Context, s *wake.Service) (any, error) {
				ts, err := s.Webhooks(ctx)
				if ts == nil {
					ts = []wake.Target{}
				}
				return ts, err
			}
		}),
		"wake list": wakeCommand("List wakes across projects, newest first: --dead shows the dead letters (webhook deliveries\nthat failed every attempt or were refused), with their last error.", false, func(fs *flag.FlagSet) ([]string, wakeRun) {
			dead := fs.Bool("dead", false, "only dead letters")
			status := fs.String("status", "", "only this status: pending, claimed, sending, delivered, canceled or dead")
			limit := fs.Int("limit", 100, "at most this many (1 to 10000)")
			return nil, func(ctx context.Context, s *wake.Service) (any, error) {
				st := *status
				if *dead {
					if st != "" && st != wake.StatusDead {
						// --dead won without a word: "--status pending --dead" listed the dead letters.
						return nil, fmt.Errorf("%w: --dead is --status %s: it does not go with --status %s", cli.ErrUsage, wake.StatusDead, st)
					}
					st = wake.StatusDead
				}
				return s.List(ctx, st, *limit)
			}
		}),
		"wake retry": wakeCommand("Send a dead letter again: it becomes deliverable (refused while its part has another pending wake;\n\"retried\": false for a wake pending already).", false, func(fs *flag.FlagSet) ([]string, wakeRun) {
			id := fs.String("id", "", "the wake id (from wake list --dead)")
			return []string{"id"}, func(ctx context.Context, s *wake.Service) (any, error) {
				wid, err := idFlag("id", *id)
				if err != nil {
					return nil, err
				}
				retried, err := s.Retry(ctx, wid)
				if err != nil {
					return nil, err
				}
				// retried false: pending already, a retry done before; nothing changed.
				return map[string]any{"id": wid, "status": wake.StatusPending, "retried": retried}, nil
			}
		}),
	}
}
