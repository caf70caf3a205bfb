package main

import (
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
	"github.com/relayroom/relayroom/internal/cli"
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

// workspaceCommand is a desk command on one workspace: --workspace plus the flags that
// flags declares (need names the required ones); what run returns is printed as JSON.
func workspaceCommand(help string, flags func(fs *flag.FlagSet) (need []string, run deskRun)) adminCommand {
	return command(help, func(fs *flag.FlagSet) ([]string, runFunc) {
		ws := fs.String("workspace", "", "the workspace (organisation slug)")
		need, run := flags(fs)
		return append(need, "workspace"), func(ctx context.Context, env adminEnv) (any, error) {
			s, org, err := deskWorkspace(ctx, env, *ws)
			if err != nil {
				return nil, err
			}
			return run(ctx, s, org)
		}
	})
}

// deskRun is the run function of a workspaceCommand.
type deskRun = func(ctx context.Context, s *desk.Service, org uuid.UUID) (any, error)

func deskAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"desk token create": workspaceCommand("Issue a personal access token to a member of a workspace, for /desk/mcp (sent as\nAuthorization: Bearer). It is printed once, stored hashed, and expires (--expires). With the\ningest:write scope (owners and admins) it also writes through the ingest API (POST /api/desk/…).", func(fs *flag.FlagSet) ([]string, deskRun) {
			user := fs.String("user", "", "the member's email")
			scopes := fs.String("scopes", strings.Join(desk.Scopes, ","), "comma-separated scopes: "+strings.Join(desk.TokenScopes, ", "))
			expires := fs.Duration("expires", desk.DefaultTokenTTL, "lifetime of the token")
			return []string{"user"}, func(ctx context.Context, s *desk.Service, org uuid.UUID) (any, error) {
				return s.CreateToken(ctx, org, *user, strings.Split(*scopes, ","), *expires)
			}
		}),
		"desk import": {args: true, help: "Import conversations into an inbox from a CSV file (UTF-8; columns customer_email, subject, body,\ncreated_at, status; at most 10 MB and 5,000 rows): every bad row is reported with its line and nothing\nis imported; importing the same rows again creates nothing; imported history sends and triggers nothing.\nUsage: relayroom admin desk import --workspace SLUG --inbox SLUG FILE", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			ws, inbox := fs.String("workspace", "", "the workspace (organisation slug)"), fs.String("inbox", "", "the inbox's slug")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "workspace", "inbox"); err != nil {
					return err
				}
				if len(env.args) != 1 {
					return fmt.Errorf("%w: name one CSV file, got %d", cli.ErrUsage, len(env.args))
				}
				_, org, err := deskWorkspace(ctx, env, *ws)
				if err != nil {
					return err
				}
				f, err := os.Open(env.args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				sum, err := desk.ImportCSV(ctx, env.svc.DB, org, *inbox, f, time.Now(), func(done, total int) {
					fmt.Fprintf(os.Stderr, "imported %d of %d rows\n", done, total)
				})
				var ie *desk.ImportError
				if errors.As(err, &ie) {
					return importRefused{ie}
				} else if err != nil {
					return err
				}
				return printJSON(env.stdout, sum)
			}
		}},
		"desk token list": workspaceCommand("List a workspace's personal access tokens (never their secrets).", func(fs *flag.FlagSet) ([]string, deskRun) {
			return nil, func(ctx context.Context, s *desk.Service, org uuid.UUID) (any, error) { return s.ListTokens(ctx, org) }
		}),
		"desk token revoke": workspaceCommand("Revoke a personal access token: refused from its next call on.", func(fs *flag.FlagSet) ([]string, deskRun) {
			id := fs.String("id", "", "the token's id (from desk token list)")
			return []string{"id"}, func(ctx context.Context, s *desk.Service, org uuid.UUID) (any, error) {
				tid, err := idFlag("id", *id)
				if err != nil {
					return nil, err
				}
				revoked, err := s.RevokeToken(ctx, org, tid)
				return map[string]any{"id": tid, "revoked": revoked}, err
			}
		}),
		"desk inbox set-secret":   workspaceCommand("Store an inbox's mail-connection secret, read from stdin (all of it, less a final line break), sealed\nunder RELAYROOM_SECRET_KEY (only the ciphertext is stored; nothing ever shows it). Setting it again replaces it.", deskInboxSecret(true)),
		"desk inbox clear-secret": workspaceCommand("Forget an inbox's mail-connection secret.", deskInboxSecret(false)),
		"desk secrets reseal": list("Seal every inbox secret of every workspace under RELAYROOM_SECRET_KEY, opening it with that key or\nRELAYROOM_SECRET_KEY_PREVIOUS: the second step of a key rotation (docs/desk.md).", func(ctx context.Context, env adminEnv) (any, error) {
			s, err := deskService(env)
			if err != nil {
				return nil, err
			}
			res, err := s.ResealInboxSecrets(ctx)
			if err == nil && len(res.Unreadable) > 0 {
				// A rotation script must not take this for success: these secrets are
				// still sealed under a key that is going away.
				err = unreadableSecrets{res}
			}
			return res, err
		}),
		"desk member deactivate": workspaceCommand("Deactivate a member of a workspace: their tokens are answered AUTH_REQUIRED from their next call\non; their role, inboxes, assignments and everything they wrote stay.", deskMemberActivation(true)),
		"desk member reactivate": workspaceCommand("Reactivate a deactivated member: their tokens that have not expired or been revoked work again.", deskMemberActivation(false)),
	}
}

// deskMemberActivation declares the command that deactivates or reactivates a member.
func deskMemberActivation(deactivate bool) func(fs *flag.FlagSet) ([]string, deskRun) {
	return func(fs *flag.FlagSet) ([]string, deskRun) {
		user := fs.String("user", "", "the member's email")
		return []string{"user"}, func(ctx context.Context, s *desk.Service, org uuid.UUID) (any, error) {
			member, changed, err := s.SetDeactivated(ctx, org, *user, deactivate)
			if err != nil {
				return nil, err
			}
			if !member {
				return nil, apperr.New(apperr.NotFound, "%s is not a member of workspace %s", *user, fs.Lookup("workspace").Value)
			}
			// changed false: the member was so already (a script's repeat), nothing written.
			return map[string]any{"user": *user, "deactivated": deactivate, "changed": changed}, nil
		}
	}
}

// deskInboxSecret declares the command that stores (from stdin) or clears an inbox's secret.
func deskInboxSecret(set bool) func(fs *flag.FlagSet) ([]string, deskRun) {
	return func(fs *flag.FlagSet) ([]string, deskRun) {
		inbox := fs.String("inbox", "", "the inbox's slug")
		return []string{"inbox"}, func(ctx context.Context, s *desk.Service, org uuid.UUID) (any, error) {
			secret := ""
			if set {
				// stdin, so that the secret is in no argument list or shell history. All of
				// it, less the line break that ends it: a PEM key or a JSON credential has
				// several lines, and only the first was kept.
				promptOnTerminal(os.Stdin, os.Stderr, "reading the secret from stdin: paste it, then Ctrl-D on a line of its own")
				b, err := io.ReadAll(io.LimitReader(os.Stdin, desk.MaxInboxSecret+3))
				if err != nil {
					return nil, fmt.Errorf("read the secret from stdin: %w", err)
				}
				if secret = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"); secret == "" {
					return nil, apperr.New(apperr.Invalid, "the secret is read from stdin, which is empty")
				}
			}
			had, err := s.SetInboxSecret(ctx, org, *inbox, secret)
			if err != nil {
				return nil, err
			}
			out := map[string]any{"inbox": *inbox, "secret_stored": set}
			if set {
				out["replaced"] = had
			} else {
				out["cleared"] = had // false: there was none, nothing changed
			}
			return out, nil
		}
	}
}

// importRefused is a CSV import refused for its rows: the error names each, on stderr
// with the message (they went to stdout, the message to stderr).
type importRefused struct{ e *desk.ImportError }

func (r importRefused) Error() string {
	return fmt.Sprintf("the file was not imported: %d problem(s)", len(r.e.Problems))
}

func (r importRefused) errorFields() map[string]any { return map[string]any{"problems": r.e.Problems} }

// unreadableSecrets is a reseal that left secrets no key opens: a failure (exit 1), with
// what it did resealed.
type unreadableSecrets struct{ res desk.ResealResult }

func (u unreadableSecrets) Error() string {
	return fmt.Sprintf("%d inbox secret(s) open with neither key and were left as they are: set them again (desk inbox set-secret)", len(u.res.Unreadable))
}

func (u unreadableSecrets) errorFields() map[string]any {
	return map[string]any{"resealed": u.res.Resealed, "unreadable": u.res.Unreadable}
}
