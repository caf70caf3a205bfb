package main

import (
	"context"

	"github.com/relayroom/relayroom/internal/oauth"
)

func oauthAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"oauth clients list": list("List OAuth clients (registered, or client ID metadata documents), most recently used first.", func(ctx context.Context, env adminEnv) (any, error) {
			return oauth.ListClients(ctx, env.svc.DB)
		}),
		"oauth clients revoke": oneFlag("Revoke an OAuth client, its grants and their tokens: they stop working at their next call.", "client", "the client_id", func(ctx context.Context, env adminEnv, id string) (any, error) {
			revoked, err := oauth.RevokeClient(ctx, env.svc.DB, id)
			return map[string]any{"client": id, "revoked": revoked}, err
		}),
		"oauth grants list": list("List what people consented to (client, person, endpoint, agent or part), newest first.", func(ctx context.Context, env adminEnv) (any, error) {
			return oauth.ListGrants(ctx, env.svc.DB)
		}),
		"oauth grants revoke": oneFlag("Revoke one consent and every token issued under it.", "grant", "the grant id (from oauth grants list)", func(ctx context.Context, env adminEnv, id string) (any, error) {
			g, err := idFlag("grant", id)
			if err != nil {
				return nil, err
			}
			revoked, err := oauth.RevokeGrant(ctx, env.svc.DB, g)
			return map[string]any{"grant": id, "revoked": revoked}, err
		}),
	}
}
