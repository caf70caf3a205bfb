package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/secrets"
)

// deskService is the desk service for admin commands: tokens need neither the server's
// cursor key nor a detector's findings, so a random key serves.
func deskService(env adminEnv) (*desk.Service, error) {
	det, err := secrets.NewDetector()
	if err != nil {
		return nil, err
	}
	boxes, err := app.DeskBoxes(env.cfg)
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand does not fail on Linux
	return desk.New(desk.Deps{DB: env.svc.DB, CursorKey: key, Secrets: det, Boxes: boxes, Now: time.Now})
}

// deskWorkspace is the desk service and the id of the workspace a command names.
func deskWorkspace(ctx context.Context, env adminEnv, slug string) (*desk.Service, uuid.UUID, error) {
	s, err := deskService(env)
	if err != nil {
		return nil, uuid.Nil, err
	}
	org, err := s.WorkspaceID(ctx, slug)
	return s, org, err
}

func deskAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"desk token create": {help: "Issue a personal access token to a member of a workspace, for /desk/mcp (sent as\nAuthorization: Bearer). It is printed once, stored hashed, and expires (--expires). With the\ningest:write scope (owners and admins) it also writes through the ingest API (POST /api/desk/…).", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			user, ws := fs.String("user", "", "the member's email"), fs.String("workspace", "", "the workspace (organisation slug)")
			scopes := fs.String("scopes", strings.Join(desk.Scopes, ","), "comma-separated scopes: "+strings.Join(desk.TokenScopes, ", "))
			expires := fs.Duration("expires", desk.DefaultTokenTTL, "lifetime of the token")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "user", "workspace"); err != nil {
					return err
				}
				s, org, err := deskWorkspace(ctx, env, *ws)
				if err != nil {
					return err
				}
				tok, err := s.CreateToken(ctx, org, *user, strings.Split(*scopes, ","), *expires)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, tok)
			}
		}},
		"desk import": {help: "Import conversations into an inbox from a CSV file (UTF-8; columns customer_email, subject, body,\ncreated_at, status; at most 10 MB and 5,000 rows): every bad row is reported with its line and nothing\nis imported; importing the same rows again creates nothing; imported history sends and triggers nothing.\nUsage: relayroom admin desk import --workspace SLUG --inbox SLUG FILE", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			ws, inbox := fs.String("workspace", "", "the workspace (organisation slug)"), fs.String("inbox", "", "the inbox's slug")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "workspace", "inbox"); err != nil {
					return err
				}
				if fs.NArg() != 1 {
					return apperr.New(apperr.Invalid, "name one CSV file after the flags")
				}
				_, org, err := deskWorkspace(ctx, env, *ws)
				if err != nil {
					return err
				}
				f, err := os.Open(fs.Arg(0))
				if err != nil {
					return err
				}
				defer f.Close()
				sum, err := desk.ImportCSV(ctx, env.svc.DB, org, *inbox, f, time.Now(), func(done, total int) {
					fmt.Fprintf(os.Stderr, "imported %d of %d rows\n", done, total)
				})
				var ie *desk.ImportError
				if errors.As(err, &ie) {
					if perr := printJSON(env.stdout, ie); perr != nil {
						return perr
					}
					return fmt.Errorf("the file was not imported: %d problem(s)", len(ie.Problems))
				} else if err != nil {
					return err
				}
				return printJSON(env.stdout, sum)
			}
		}},
		"desk token list": {help: "List a workspace's personal access tokens (never their secrets).", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			ws := fs.String("workspace", "", "the workspace (organisation slug)")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "workspace"); err != nil {
					return err
				}
				s, org, err := deskWorkspace(ctx, env, *ws)
				if err != nil {
					return err
				}
				ts, err := s.ListTokens(ctx, org)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, ts)
			}
		}},
		"desk token revoke": {help: "Revoke a personal access token: refused from its next call on.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			ws, id := fs.String("workspace", "", "the workspace (organisation slug)"), fs.String("id", "", "the token's id (from desk token list)")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "workspace", "id"); err != nil {
					return err
				}
				tid, err := uuid.Parse(*id)
				if err != nil {
					return apperr.New(apperr.Invalid, "--id must be a token id")
				}
				s, org, err := deskWorkspace(ctx, env, *ws)
				if err != nil {
					return err
				}
				revoked, err := s.RevokeToken(ctx, org, tid)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"id": tid, "revoked": revoked})
			}
		}},
		"desk inbox set-secret":   {help: "Store an inbox's mail-connection secret, read from the first line of stdin, sealed under\nRELAYROOM_SECRET_KEY (only the ciphertext is stored; nothing ever shows it). Setting it again replaces it.", flags: deskInboxSecret(true)},
		"desk inbox clear-secret": {help: "Forget an inbox's mail-connection secret.", flags: deskInboxSecret(false)},
		"desk secrets reseal": {help: "Seal every inbox secret of every workspace under RELAYROOM_SECRET_KEY, opening it with that key or\nRELAYROOM_SECRET_KEY_PREVIOUS: the second step of a key rotation (docs/desk.md).", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			return func(ctx context.Context, env adminEnv) error {
				s, err := deskService(env)
				if err != nil {
					return err
				}
				res, err := s.ResealInboxSecrets(ctx)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, res)
			}
		}},
		"desk member deactivate": {help: "Deactivate a member of a workspace: their tokens are answered AUTH_REQUIRED from their next call\non; their role, inboxes, assignments and everything they wrote stay.", flags: deskMemberActivation(true)},
		"desk member reactivate": {help: "Reactivate a deactivated member: their tokens that have not expired or been revoked work again.", flags: deskMemberActivation(false)},
	}
}

// deskMemberActivation is the command that deactivates or reactivates a member.
func deskMemberActivation(deactivate bool) func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
	return func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
		user, ws := fs.String("user", "", "the member's email"), fs.String("workspace", "", "the workspace (organisation slug)")
		return func(ctx context.Context, env adminEnv) error {
			if err := required(fs, "user", "workspace"); err != nil {
				return err
			}
			s, org, err := deskWorkspace(ctx, env, *ws)
			if err != nil {
				return err
			}
			ok, err := s.SetDeactivated(ctx, org, *user, deactivate)
			if err != nil {
				return err
			}
			if !ok {
				return apperr.New(apperr.NotFound, "%s is not a member of workspace %s", *user, *ws)
			}
			return printJSON(env.stdout, map[string]any{"user": *user, "deactivated": deactivate})
		}
	}
}

// deskInboxSecret is the command that stores (from stdin) or clears an inbox's secret.
func deskInboxSecret(set bool) func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
	return func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
		ws, inbox := fs.String("workspace", "", "the workspace (organisation slug)"), fs.String("inbox", "", "the inbox's slug")
		return func(ctx context.Context, env adminEnv) error {
			if err := required(fs, "workspace", "inbox"); err != nil {
				return err
			}
			secret := ""
			if set {
				// stdin, so that the secret is in no argument list or shell history.
				line, err := bufio.NewReader(io.LimitReader(os.Stdin, desk.MaxInboxSecret+2)).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("read the secret from stdin: %w", err)
				}
				if secret = strings.TrimRight(line, "\r\n"); secret == "" {
					return apperr.New(apperr.Invalid, "the secret is read from stdin, which is empty")
				}
			}
			s, org, err := deskWorkspace(ctx, env, *ws)
			if err != nil {
				return err
			}
			if err := s.SetInboxSecret(ctx, org, *inbox, secret); err != nil {
				return err
			}
			return printJSON(env.stdout, map[string]any{"inbox": *inbox, "secret_stored": set})
		}
	}
}
