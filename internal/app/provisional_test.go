package app_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

// TestCachedCallerVerifiedWithItsRead: a caller resolved a moment ago is served from the
// scope cache, its verification travelling with its read tool's first statements
// (mcp.Provisional). A key revoked in between is refused by that very next call exactly as
// on the uncached path (HTTP 401, its challenge and JSON-RPC error), on every agents'
// endpoint, whether the call is a read tool (run, then refused) or anything else (refused
// before it runs); and a changed membership is answered with what it is now.
func TestCachedCallerVerifiedWithItsRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startServer(t)
	d := openSeeded(t, s)
	operator := func(t *testing.T, sql string, args ...any) {
		t.Helper()
		if err := d.Operator(ctx, func(tx *pg.Tx) error { _, err := tx.Exec(ctx, sql, args...); return err }); err != nil {
			t.Fatal(err)
		}
	}
	room := s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String()
	// refusal is what the server answers a call, with its JSON-RPC id made neutral.
	id := regexp.MustCompile(`"id":[^,}]*`)
	refusal := func(t *testing.T, url, key, body string) string {
		t.Helper()
		status, h, b := post(t, url, key, body)
		if status != http.StatusUnauthorized {
			t.Fatalf("want 401, got %d %s", status, b)
		}
		return fmt.Sprintf("%d %q %s", status, h.Get("WWW-Authenticate"), id.ReplaceAllString(b, `"id":0`))
	}
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`
	}
	const toolsList = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`

	t.Run("a membership changed since it was cached is answered as it is now", func(t *testing.T) {
		key, url := s.key("acme/backend"), s.threadsURL("escalations", "backend")
		for range 2 {
			served(t, url, key, "whoami", nil)
		}
		operator(t, "UPDATE membership SET nickname = 'the new name' WHERE part = 'backend'")
		if got := served(t, url, key, "whoami", nil); !strings.Contains(got, "the new name") {
			t.Fatalf("whoami answered the cached membership: %s", got)
		}
	})

	for _, c := range []struct{ name, agent, url, tool, next string }{
		{"threads, a read tool", "acme/architect", s.threadsURL("escalations", "architect"), "inbox", call("inbox")},
		{"one room, a read tool", "acme/backend", room, "get_messages", call("get_messages")},
		{"all rooms, another method", "globex/qa-lead", s.base + "/api/mcp", "list_rooms", toolsList},
	} {
		t.Run("a revoked key is refused by the next call: "+c.name, func(t *testing.T) {
			key := s.key(c.agent)
			for range 2 { // the second is served from the cache
				served(t, c.url, key, c.tool, nil)
			}
			operator(t, "UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1", s.res.Agents[c.agent].ID)
			cached := refusal(t, c.url, key, c.next)
			if uncached := refusal(t, c.url, key, c.next); cached != uncached {
				t.Fatalf("the cached caller's refusal\n%s\ndiffers from the uncached one\n%s", cached, uncached)
			}
			// The read that ran before the refusal was dropped unseen, not logged as failing.
			if logs := s.logs.String(); strings.Contains(logs, "tool failed") {
				t.Fatalf("a dropped read was logged as failing:\n%s", logs)
			}
		})
	}

}
