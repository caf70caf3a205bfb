package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/threads"
)

// threadsAdminCommands are people's commands of the threads toolset: cancel a thread,
// review knowledge candidates, issue a project CI token. Each prints JSON.
func threadsAdminCommands() map[string]adminCommand {
	// know builds the knowledge service and resolves the project (host/slug) a command names.
	know := func(ctx context.Context, env adminEnv, project string) (*knowledge.Service, uuid.UUID, error) {
		k, err := knowledge.New(knowledge.Deps{DB: env.svc.DB, Q: env.svc.Q})
		if err != nil {
			return nil, uuid.Nil, err
		}
		pid, err := k.ProjectID(ctx, project)
		return k, pid, err
	}
	reviewer := func() string {
		if u := os.Getenv("USER"); u != "" {
			return u
		}
		return "admin"
	}
	decide := func(help string, approve bool) adminCommand {
		return adminCommand{help: help, flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			project, id := fs.String("project", "", "the project, as host/slug"), fs.String("id", "", "the knowledge entry id")
			by := fs.String("by", "", "who decides (default: $USER)")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "project", "id"); err != nil {
					return err
				}
				kid, err := uuid.Parse(*id)
				if err != nil {
					return fmt.Errorf("--id: %q is not an id", *id)
				}
				k, pid, err := know(ctx, env, *project)
				if err != nil {
					return err
				}
				who := *by
				if who == "" {
					who = reviewer()
				}
				var d knowledge.Decision
				if approve {
					d, err = k.Approve(ctx, pid, kid, who)
				} else {
					d, err = k.Reject(ctx, pid, kid, who)
				}
				if err != nil {
					return err
				}
				return printJSON(env.stdout, d)
			}
		}}
	}
	return map[string]adminCommand{
		"thread cancel": {help: "Cancel a thread on a person's behalf: it leaves every inbox, its wakes are canceled, further replies\nare refused, and an agent's close reports status canceled.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			project, thread := fs.String("project", "", "the project, as host/slug"), fs.String("thread", "", "the thread id")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "project", "thread"); err != nil {
					return err
				}
				tid, err := uuid.Parse(*thread)
				if err != nil {
					return fmt.Errorf("--thread: %q is not an id", *thread)
				}
				svc := threads.New(threads.Deps{DB: env.svc.DB, Q: env.svc.Q})
				out, err := svc.Cancel(ctx, *project, tid)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, out)
			}
		}},
		"knowledge list": {help: "List a project's knowledge entries, newest first (the review queue with --status candidate).\nNear-duplicates carry duplicateOf, the entry they repeat.", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			project := fs.String("project", "", "the project, as host/slug")
			status := fs.String("status", "", "candidate, trusted, demoted, rejected or expired (default: all)")
			limit := fs.Int("limit", 100, "at most this many entries (1-1000)")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "project"); err != nil {
					return err
				}
				k, pid, err := know(ctx, env, *project)
				if err != nil {
					return err
				}
				out, err := k.List(ctx, pid, *status, *limit)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, out)
			}
		}},
		"knowledge approve": decide("Approve a candidate (or re-approve a demoted entry): it becomes trusted and recall returns it.", true),
		"knowledge reject":  decide("Reject a candidate (or retire a trusted or demoted entry): recall never returns it.", false),
		"project ci-token": {help: "Issue a CI token (qyt_ci_…) for a project, printed once and stored hashed. CI confirms a candidate with\n  curl -X POST -H \"Authorization: Bearer $TOKEN\" $URL/api/projects/PROJECT_ID/knowledge/ID/confirm", flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
			project := fs.String("project", "", "the project, as host/slug")
			return func(ctx context.Context, env adminEnv) error {
				if err := required(fs, "project"); err != nil {
					return err
				}
				k, pid, err := know(ctx, env, *project)
				if err != nil {
					return err
				}
				tok, err := k.IssueCIToken(ctx, pid)
				if err != nil {
					return err
				}
				return printJSON(env.stdout, map[string]any{"project": *project, "project_id": pid, "ci_token": tok,
					"confirm_url": env.svc.PublicURL + "/api/projects/" + pid.String() + "/knowledge/{id}/confirm"})
			}
		}},
	}
}
