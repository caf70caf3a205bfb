package main

import (
	"context"
	"flag"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/oauth"
)

func oauthAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"oauth clients list": {help: "List OAuth clients (registered, or client ID metadata documents), most recently used first.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			return func(ctx context.Context, env adminEnv) error {
				rows, err := oauth.ListClients(ctx, env.svc.DB)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, rows)
			}
		}},
		"oauth clients revoke": {help: "Revoke an OAuth client: its tokens stop working at their next call.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			id := fs.String("client", "", "the client_id")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "client"); err != nil {
					return err
				}
				revoked, err := oauth.RevokeClient(ctx, env.svc.DB, *id)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"client": *id, "revoked": revoked})
			}
		}},
		"oauth grants list": {help: "List what people consented to (client, person, endpoint, agent or part), newest first.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			return func(ctx context.Context, env adminEnv) error {
				rows, err := oauth.ListGrants(ctx, env.svc.DB)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, rows)
			}
		}},
		"oauth grants revoke": {help: "Revoke one consent and every token issued under it.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			id := fs.String("grant", "", "the grant id (from oauth grants list)")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "grant"); err != nil {
					return err
				}
				g, err := uuid.Parse(*id)
				if err != nil {
					return apperr.New(apperr.Invalid, "--grant must be a grant id")
				}
				revoked, err := oauth.RevokeGrant(ctx, env.svc.DB, g)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"grant": *id, "revoked": revoked})
			}
		}},
	}
}
