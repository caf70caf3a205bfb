package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
)

// seedDeskDemo gives every desk workspace of the demo file its demo conversations (once:
// they carry external ids) and a personal access token for its first owner, kept with the
// other demo credentials and issued again only when the kept one no longer works.
func seedDeskDemo(ctx context.Context, database *pg.DB, file admin.File, res admin.Result, creds *devCredentials) error {
	if len(file.Desk) == 0 {
		return nil
	}
	det, err := secrets.NewDetector()
	if err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // only tokens are issued here: no cursor outlives this process
	svc, err := desk.New(desk.Deps{DB: database, CursorKey: key, Secrets: det, Now: time.Now})
	if err != nil {
		return err
	}
	if creds.DeskTokens == nil {
		creds.DeskTokens = map[string]string{}
	}
	for _, w := range file.Desk {
		tz, owner, members := "UTC", "", []uuid.UUID{}
		for _, o := range file.Organisations {
			if o.Slug == w.Workspace && o.Timezone != "" {
				tz = o.Timezone
			}
		}
		for _, u := range file.Users {
			if u.Org == w.Workspace {
				members = append(members, res.Users[u.Email].ID)
				if owner == "" && u.Role == desk.RoleOwner {
					owner = u.Email
				}
			}
		}
		if owner == "" {
			return fmt.Errorf("desk demo: workspace %s has no owner in the demo file", w.Workspace)
		}
		inboxes := make([]string, 0, len(w.Inboxes))
		for _, in := range w.Inboxes {
			inboxes = append(inboxes, res.Desk[w.Workspace].Inboxes[in.Slug].ID)
		}
		org := res.Organisations[w.Workspace].ID
		if err := database.Operator(ctx, func(tx *pg.Tx) error {
			_, err := desk.SeedDemo(ctx, tx, org, tz, time.Now(), inboxes, members)
			return err
		}); err != nil {
			return fmt.Errorf("desk demo %s: %w", w.Workspace, err)
		}
		if t := creds.DeskTokens[w.Workspace]; t != "" {
			if _, err := svc.Authenticate(ctx, t); err == nil {
				continue
			}
		}
		tok, err := svc.CreateToken(ctx, org, owner, desk.Scopes, desk.MaxTokenTTL)
		if err != nil {
			return fmt.Errorf("desk demo %s: %w", w.Workspace, err)
		}
		creds.DeskTokens[w.Workspace] = tok.Token
	}
	return nil
}

// deskBanner is the desk part of `make run`'s banner: the URL, each workspace's token and
// the line that connects Claude Code, and the contract's example to try.
func deskBanner(b *strings.Builder, public string, creds devCredentials, mcpServers map[string]any) {
	url := public + "/desk/mcp"
	fmt.Fprintf(b, "\nDesk (helpdesk tools for a support person's assistant): %s\n", url)
	for _, ws := range slices.Sorted(maps.Keys(creds.DeskTokens)) {
		tok := creds.DeskTokens[ws]
		fmt.Fprintf(b, "  workspace %-10s token %s   (Authorization: Bearer; the owner's, every scope)\n", ws, tok)
		fmt.Fprintf(b, "  claude mcp add --transport http relaydesk-%s %s --header 'Authorization: Bearer %s'\n", ws, url, tok)
		mcpServers["relaydesk-"+ws] = map[string]any{"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + tok}}
	}
	fmt.Fprintln(b, `  Try: "Search conversations for CSV import, read the open one without private notes, find the saved reply"`)
	fmt.Fprintln(b, `  (then, with your approval, add a private note; no tool can send anything to a customer).`)
}
