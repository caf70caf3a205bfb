package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/loadtest"
)

// The dashboard's part of `make run`: the banner names the dashboard and the demo people's
// sign-ins, and a fresh demo gets activity to show on every page, made by the demo's
// agents through the real endpoints (as any client would), once: when the room's
// conversation is still empty.

// dashboardBanner prints the dashboard's address and every demo person who can sign in,
// each with the role members (the database's, by "org/email") gives them now.
func dashboardBanner(b io.Writer, public string, file admin.File, members map[string]admin.UserLine) {
	fmt.Fprintf(b, "\nDashboard: %s/app/   (company admin: %s/app/admin)\n", public, public)
	names := map[string]string{}
	for _, o := range file.Organisations {
		names[o.Slug] = o.Name
	}
	for _, u := range file.Users {
		if u.Password == "" {
			continue
		}
		m, ok := members[u.Org+"/"+u.Email]
		switch {
		case !ok:
			fmt.Fprintf(b, "  sign in as %-20s %-20s (no longer in %s)\n", u.Email, u.Password, names[u.Org])
		case m.Deactivated:
			fmt.Fprintf(b, "  sign in as %-20s %-20s (%s, %s, deactivated)\n", u.Email, u.Password, names[u.Org], m.Role)
		default:
			fmt.Fprintf(b, "  sign in as %-20s %-20s (%s, %s)\n", u.Email, u.Password, names[u.Org], m.Role)
		}
	}
}

// demoCallTimeout bounds each call the demo makes to the local server.
const demoCallTimeout = 20 * time.Second

var demoUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// seedDashboardDemo makes the demo project's agents talk: room messages, a memory entry,
// a task done and awaiting the sender's review, a thread flagged for people, a lesson to
// review, usage and progress events, and an OAuth client connected by the host's person
// (seedConnectedApp). It needs a project whose host has two agents with
// keys and a guest agent; other demo files are left as they are. It returns the projects
// it seeded (none on a restart).
func seedDashboardDemo(ctx context.Context, public string, file admin.File, res admin.Result, creds devCredentials) (seeded []uuid.UUID, err error) {
	connected := false
	for _, ps := range file.Projects {
		members, key := bannerMembers(ps), file.ProjectKey(ps)
		if len(members) < 2 || creds.ConnectCodes[key] == "" {
			continue
		}
		room := fmt.Sprintf("%s/api/mcp/p/%s", public, res.Projects[key].ID)
		first, second := members[0], members[1]
		key1, key2 := creds.Agents[first.agent], creds.Agents[second.agent]
		if key1 == "" || key2 == "" {
			continue
		}
		var got struct {
			Messages []json.RawMessage `json:"messages"`
		}
		text, err := demoCall(ctx, room, key1, "get_messages", map[string]any{"limit": 1})
		if err != nil {
			return seeded, err
		}
		if err := json.Unmarshal([]byte(text), &got); err != nil {
			return seeded, fmt.Errorf("dashboard demo: get_messages: %w", err)
		}
		if len(got.Messages) > 0 {
			continue // seeded by an earlier run
		}
		threads1 := admin.ThreadsURL(public, creds.ConnectCodes[key], first.part)
		steps := []struct {
			url, key, tool string
			args           map[string]any
		}{
			{room, key1, "post_message", map[string]any{"content": "Morning all. The checkout timeout from yesterday is back on staging; @" + second.part + " can you reproduce it?"}},
			{room, key2, "post_message", map[string]any{"content": "On it. I will write what I find to memory."}},
			{room, key2, "write_memory", map[string]any{"content": "Checkout times out after 30 s when the payment provider's sandbox is slow; the retry doubles the wait.", "category": "status", "tags": []string{"checkout", "staging"}}},
			{room, key1, "write_memory", map[string]any{"content": "Decision: retries on payment calls use a 5 s budget each, at most 3.", "category": "decision", "tags": []string{"checkout"}, "is_decision": true}},
			{threads1, key1, "send", map[string]any{"to": []string{second.part}, "subject": "Refund for a customer double-charged at checkout", "body": "A person should approve this refund.", "needsHuman": true}},
			{threads1, key1, "learn", map[string]any{"title": "Payment retries need their own budget", "body": "A retry without its own timeout doubles the checkout wait; give each retry 5 s.", "kind": "pitfall"}},
			{threads1, key1, "event", map[string]any{"type": "progress", "usage": map[string]any{"input_tokens": 1800, "output_tokens": 420, "cost_usd": 0.03, "model": "claude-opus-4"}}},
		}
		for _, s := range steps {
			if _, err := demoCall(ctx, s.url, s.key, s.tool, s.args); err != nil {
				return seeded, err
			}
		}
		// A task from the second agent, done by the first: its result waits for the
		// sender's people on the Tasks tab and the home page.
		sent, err := demoCall(ctx, room, key2, "send_task", map[string]any{"to_agent_slug": first.part, "goal": "Add a 5 s budget to each payment retry",
			"acceptance_criteria": "Checkout on staging completes within 20 s with the sandbox slowed down."})
		if err != nil {
			return seeded, err
		}
		task := demoUUID.FindString(sent)
		if task == "" {
			return seeded, fmt.Errorf("dashboard demo: send_task returned no task id: %s", sent)
		}
		if _, err := demoCall(ctx, room, key1, "respond_to_task", map[string]any{"task_id": task, "status": "done",
			"result": "Each retry now has a 5 s budget (3 at most); checkout completed in 11 s on staging with the sandbox slowed."}); err != nil {
			return seeded, err
		}
		// The host's Connected apps page gets an app its person allowed (once per demo).
		if !connected {
			if err := seedConnectedApp(ctx, public, file, ps.Host); err != nil {
				return seeded, err
			}
			connected = true
		}
		seeded = append(seeded, res.Projects[key].ID)
	}
	return seeded, nil
}

// demoCall sends one tools/call to the local server with the load generator's plain MCP
// client and returns its text, failing on a transport error or a tool error.
func demoCall(ctx context.Context, url, key, tool string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, demoCallTimeout)
	defer cancel()
	c := loadtest.Client{HTTP: http.DefaultClient}
	a, err := c.Do(ctx, loadtest.Call{URL: url, Key: key, Tool: tool, Args: args})
	if err != nil {
		return "", fmt.Errorf("dashboard demo: %s: %w", tool, err)
	}
	return a.Text(), nil
}
