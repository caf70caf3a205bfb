package main

import (
	"context"
	"flag"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/wake"
)

// wakeService is the wake service for admin commands; the server key is needed only to
// set a webhook (its secret is stored sealed).
func wakeService(env adminEnv, needKey bool) (*wake.Service, error) {
	box, err := wake.OptionalSecretBox(env.cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	if box == nil && needKey {
		return nil, apperr.New(apperr.Invalid, "RELAYROOM_SECRET_KEY is not set: it must be the server's key (openssl rand -hex 32 makes one)")
	}
	return wake.New(wake.Deps{DB: env.svc.DB, Q: env.svc.Q, Box: box}), nil
}

func wakeAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"wake set-webhook": {help: "Deliver an agent's wakes to an HTTPS webhook (http only for localhost). A new signing secret is\nprinted once; only its ciphertext is stored, under RELAYROOM_SECRET_KEY (which must match the server's).\nSetting it again replaces the URL and the secret. See docs/wakes.md for verifying the signature.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			agent, url := fs.String("agent", "", "the agent, org/slug"), fs.String("url", "", "the webhook URL")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "agent", "url"); err != nil {
					return err
				}
				s, err := wakeService(env, true)
				if err != nil {
					return err
				}
				t, secret, err := s.SetWebhook(ctx, *agent, *url)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"agent": t.Agent, "url": t.URL, "secret": secret,
					"note": "the secret is shown once: store it where the webhook receiver reads it"})
			}
		}},
		"wake clear-webhook": {help: "Stop delivering an agent's wakes by webhook (pagers get them again).", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			agent := fs.String("agent", "", "the agent, org/slug")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "agent"); err != nil {
					return err
				}
				s, err := wakeService(env, false)
				if err != nil {
					return err
				}
				removed, err := s.ClearWebhook(ctx, *agent)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"agent": *agent, "removed": removed})
			}
		}},
		"wake webhooks": {help: "List the agents that have a webhook (never their secrets).", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			return func(ctx context.Context, env adminEnv) error {
				s, err := wakeService(env, false)
				if err != nil {
					return err
				}
				ts, err := s.Webhooks(ctx)
				if err != nil {
					return err
				}
				if ts == nil {
					ts = []wake.Target{}
				}
				return printJSON(env.stdout, ts)
			}
		}},
		"wake list": {help: "List wakes across projects, newest first: --dead shows the dead letters (webhook deliveries\nthat failed every attempt or were refused), with their last error.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			dead := fs.Bool("dead", false, "only dead letters")
			status := fs.String("status", "", "only this status: pending, claimed, sending, delivered, canceled or dead")
			limit := fs.Int("limit", 100, "at most this many")
			return func(ctx context.Context, env adminEnv) error {
				s, err := wakeService(env, false)
				if err != nil {
					return err
				}
				st := *status
				if *dead {
					st = wake.StatusDead
				}
				ws, err := s.List(ctx, st, *limit)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, ws)
			}
		}},
		"wake retry": {help: "Send a dead letter again: it becomes deliverable (refused while its part has another pending wake).", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			id := fs.String("id", "", "the wake id (from wake list --dead)")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "id"); err != nil {
					return err
				}
				wid, err := uuid.Parse(*id)
				if err != nil {
					return apperr.New(apperr.Invalid, "--id must be a wake id")
				}
				s, err := wakeService(env, false)
				if err != nil {
					return err
				}
				if err := s.Retry(ctx, wid); err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"id": wid, "status": wake.StatusPending})
			}
		}},
	}
}
