package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/threads"
)

// knowRun is what a knowledge command does with the service and the project it names.
type knowRun = func(ctx context.Context, env adminEnv, k *knowledge.Service, pid uuid.UUID) (any, error)

// projectCommand is a knowledge command on one project: --project (host/slug) plus the
// flags that flags declares (need names the required ones); run's result is printed.
func projectCommand(help string, flags func(fs *flag.FlagSet) (need []string, run knowRun)) adminCommand {
	return command(help, func(fs *flag.FlagSet) ([]string, runFunc) {
		project := fs.String("project", "", "the project, as host/slug")
		need, run := flags(fs)
		return append([]string{"project"}, need...), func(ctx context.Context, env adminEnv) (any, error) {
			k, err := knowledge.New(knowledge.Deps{DB: env.svc.DB, Q: env.svc.Q})
			if err != nil {
				return nil, err
			}
			pid, err := k.ProjectID(ctx, *project)
			if err != nil {
				return nil, err
			}
			return run(ctx, env, k, pid)
		}
	})
}

// idFlag parses a required id flag's value, naming the flag when it is not an id: a
// usage error (exit 2), since the command line itself is wrong.
func idFlag(name, v string) (uuid.UUID, error) {
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: --%s: %q is not an id", cli.ErrUsage, name, v)
	}
	return id, nil
}

// threadsAdminCommands are people's commands of the threads toolset: cancel a thread,
// review knowledge candidates, issue a project CI token. Each prints JSON.
func threadsAdminCommands() map[string]adminCommand {
	decide := func(help string, approve bool) adminCommand {
		return projectCommand(help, func(fs *flag.FlagSet) ([]string, knowRun) {
			id := fs.String("id", "", "the knowledge entry id")
			by := fs.String("by", "", "who decides (default: $USER)")
			return []string{"id"}, func(ctx context.Context, env adminEnv, k *knowledge.Service, pid uuid.UUID) (any, error) {
				kid, err := idFlag("id", *id)
				if err != nil {
					return nil, err
				}
				who := strings.TrimSpace(*by)
				if utf8.RuneCountInString(who) > admin.MaxNameRunes || strings.IndexFunc(who, unicode.IsControl) >= 0 {
					// It is stored as the decider and shown on the dashboard's review queue.
					return nil, fmt.Errorf("%w: --by: a name of at most %d characters, without control characters (a line break, an escape…)", cli.ErrUsage, admin.MaxNameRunes)
				}
				if who == "" {
					if who = os.Getenv("USER"); who == "" {
						who = "admin"
					}
				}
				if approve {
					return k.Approve(ctx, pid, kid, who)
				}
				return k.Reject(ctx, pid, kid, who)
			}
		})
	}
	return map[string]adminCommand{
		"thread cancel": command("Cancel a thread on a person's behalf: it leaves every inbox, its wakes are canceled, further replies\nare refused, and an agent's close reports status canceled.", func(fs *flag.FlagSet) ([]string, runFunc) {
			project, thread := fs.String("project", "", "the project, as host/slug"), fs.String("thread", "", "the thread id")
			return []string{"project", "thread"}, func(ctx context.Context, env adminEnv) (any, error) {
				tid, err := idFlag("thread", *thread)
				if err != nil {
					return nil, err
				}
				return threads.New(threads.Deps{DB: env.svc.DB, Q: env.svc.Q}).Cancel(ctx, *project, tid)
			}
		}),
		"knowledge list": projectCommand("List a project's knowledge entries, newest first (the review queue with --status candidate).\nNear-duplicates carry duplicateOf, the entry they repeat.", func(fs *flag.FlagSet) ([]string, knowRun) {
			status := fs.String("status", "", "candidate, trusted, demoted, rejected or expired (default: all)")
			limit := fs.Int("limit", 100, "at most this many entries (1-1000)")
			return nil, func(ctx context.Context, env adminEnv, k *knowledge.Service, pid uuid.UUID) (any, error) {
				return k.List(ctx, pid, *status, *limit)
			}
		}),
		"knowledge approve": decide("Approve a candidate (or re-approve a demoted entry): it becomes trusted and recall returns it.", true),
		"knowledge reject":  decide("Reject a candidate (or retire a trusted or demoted entry): recall never returns it.", false),
		"project ci-token": projectCommand("Issue a CI token (qyt_ci_…) for a project, printed once and stored hashed. CI confirms a candidate with\n  curl -X POST -H \"Authorization: Bearer $TOKEN\" $URL/api/projects/PROJECT_ID/knowledge/ID/confirm", func(fs *flag.FlagSet) ([]string, knowRun) {
			return nil, func(ctx context.Context, env adminEnv, k *knowledge.Service, pid uuid.UUID) (any, error) {
				tok, err := k.IssueCIToken(ctx, pid)
				if err != nil {
					return nil, err
				}
				return map[string]any{"project": fs.Lookup("project").Value.String(), "project_id": pid, "id": tok.ID, "ci_token": tok.Token,
					"confirm_url": env.svc.PublicURL + "/api/projects/" + pid.String() + "/knowledge/{id}/confirm"}, nil
			}
		}),
		"project ci-token list": projectCommand("List a project's CI tokens, newest first, revoked ones included (never their secrets).", func(fs *flag.FlagSet) ([]string, knowRun) {
			return nil, func(ctx context.Context, env adminEnv, k *knowledge.Service, pid uuid.UUID) (any, error) {
				return k.ListCITokens(ctx, pid)
			}
		}),
		"project ci-token revoke": projectCommand("Revoke a project's CI token: its next confirmation is refused (401).", func(fs *flag.FlagSet) ([]string, knowRun) {
			id := fs.String("id", "", "the token's id (printed when it was issued; project ci-token list)")
			return []string{"id"}, func(ctx context.Context, env adminEnv, k *knowledge.Service, pid uuid.UUID) (any, error) {
				tid, err := idFlag("id", *id)
				if err != nil {
					return nil, err
				}
				revoked, err := k.RevokeCIToken(ctx, pid, tid)
				if err != nil {
					return nil, err
				}
				return map[string]any{"id": tid, "revoked": revoked}, nil
			}
		}),
	}
}
