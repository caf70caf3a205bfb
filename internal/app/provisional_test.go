package app_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
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

// TestCachedCallerVerifiedBeforeAnyAnswer: what the core answers without running a method
// (a notification, a body that does not parse, a GET's description) waits for the cached
// caller's verification too: a key revoked since it was cached gets the 401 it gets
// uncached, not a 202, a parse error or a description.
func TestCachedCallerVerifiedBeforeAnyAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startServer(t)
	d := openSeeded(t, s)
	room := s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String()
	for _, c := range []struct{ name, agent, url, tool, method, body string }{
		{"a notification", "acme/architect", s.threadsURL("escalations", "architect"), "whoami", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"a body that does not parse", "acme/backend", room, "get_messages", http.MethodPost, `{"jsonrpc":`},
		{"a GET of the description", "globex/qa-lead", s.base + "/api/mcp", "list_rooms", http.MethodGet, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := s.key(c.agent)
			for range 2 { // the second is served from the cache
				served(t, c.url, key, c.tool, nil)
			}
			if err := d.Operator(ctx, func(tx *pg.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1", s.res.Agents[c.agent].ID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Agent-Key", key)
			if c.method == http.MethodPost {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			status, h, body := testfix.Do(t, http.DefaultClient, req)
			if status != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
				t.Fatalf("a revoked key, cached: %d %q %s; want 401 with its challenge", status, h.Get("WWW-Authenticate"), body)
			}
		})
	}
}

// TestCachedCallerWriteVerifiedWithIt: a write tool also runs before its caller is
// settled, its verification travelling with its transaction's first statements. The
// verification fails before anything after it runs, so a caller changed or revoked since
// it was cached gets exactly what it gets uncached, and its first run stored nothing.
func TestCachedCallerWriteVerifiedWithIt(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	d := openSeeded(t, s)
	operator := func(t *testing.T, sql string, args ...any) {
		t.Helper()
		testfix.Exec(t, d, sql, args...)
	}
	// stored counts what the writes below store: threads' messages, rooms' chat and
	// memory.
	stored := func(t *testing.T) int {
		t.Helper()
		return testfix.Scalar[int](t, d, `SELECT (SELECT count(*) FROM message WHERE body = 'after the change')
			+ (SELECT count(*) FROM room_message WHERE content = 'after the change')
			+ (SELECT count(*) FROM memory_entry WHERE content = 'after the change')`)
	}
	room := s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String()
	threads := s.threadsURL("escalations", "architect")
	sendArgs := map[string]any{"to": []string{"backend"}, "subject": "probe", "body": "after the change"}
	postArgs := map[string]any{"content": "after the change"}

	t.Run("a write of a caller served from the cache is stored once", func(t *testing.T) {
		key := s.key("acme/architect")
		for range 2 {
			served(t, threads, key, "inbox", nil)
		}
		served(t, threads, key, "send", sendArgs)
		if n := stored(t); n != 1 {
			t.Fatalf("%d messages stored, want 1", n)
		}
		operator(t, "DELETE FROM message WHERE body = 'after the change'")
	})

	t.Run("a guest's write no longer granted since it was cached is refused as now, and stores nothing", func(t *testing.T) {
		key, globex := s.key("globex/qa-lead"), s.res.Organisations["globex"].ID
		for range 2 {
			served(t, room, key, "get_messages", nil)
		}
		operator(t, "UPDATE agreement SET grants = '{read_memory,assign_tasks}' WHERE guest_org_id = $1", globex)
		t.Cleanup(func() {
			operator(t, "UPDATE agreement SET grants = '{read_memory,write_memory,assign_tasks}' WHERE guest_org_id = $1", globex)
		})
		memory := map[string]any{"content": "after the change"}
		cached := callTool(t, room, key, "write_memory", memory)
		uncached := callTool(t, room, key, "write_memory", memory)
		if !cached.isErr || cached.text != uncached.text {
			t.Fatalf("the cached caller's write answered %d\n%s\nwhere the uncached one answers %d\n%s", cached.status, cached.body, uncached.status, uncached.body)
		}
		if n := stored(t); n != 0 {
			t.Fatalf("%d entries stored by a guest without the grant", n)
		}
	})

	for _, c := range []struct {
		name, agent, url, read, write string
		args                          map[string]any
	}{
		{"threads", "acme/architect", threads, "inbox", "send", sendArgs},
		{"one room", "acme/backend", room, "get_messages", "post_message", postArgs},
	} {
		t.Run("a revoked key's write is refused as uncached, and stores nothing: "+c.name, func(t *testing.T) {
			key := s.key(c.agent)
			for range 2 { // the second is served from the cache
				served(t, c.url, key, c.read, nil)
			}
			operator(t, "UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1", s.res.Agents[c.agent].ID)
			cached := callTool(t, c.url, key, c.write, c.args)
			uncached := callTool(t, c.url, key, c.write, c.args)
			if cached.status != http.StatusUnauthorized || cached.body != uncached.body {
				t.Fatalf("the cached caller's write answered %d\n%s\nwhere the uncached one answers %d\n%s",
					cached.status, cached.body, uncached.status, uncached.body)
			}
			if n := stored(t); n != 0 {
				t.Fatalf("%d messages stored by a revoked key", n)
			}
			if logs := s.logs.String(); strings.Contains(logs, "tool failed") {
				t.Fatalf("a dropped write was logged as failing:\n%s", logs)
			}
		})
	}
}
