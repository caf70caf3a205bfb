package rooms_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relayroom/relayroom/internal/testfix"
)

func (e *env) sdkSession(t *testing.T, path, agent, version string) *sdk.ClientSession {
	t.Helper()
	// The agent key as Claude Code's --header option sends it.
	cs, err := testfix.ConnectSDK(t, e.srv.URL+path, http.Header{"Authorization": {"Bearer " + e.keys[agent]}}, version)
	if err != nil {
		t.Fatalf("connect %s (%s): %v", path, version, err)
	}
	return cs
}

func sdkCall(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (map[string]any, bool, string) {
	t.Helper()
	res, text := testfix.CallTool(t, cs, tool, args)
	if res.IsError {
		return nil, true, text
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%s: text is not JSON: %s", tool, text)
	}
	return m, false, text
}

// TestGoSDKClient drives every tool through the go-sdk v1.8.0 client over HTTP, on both
// addresses, in the stateless era (the client's default, server/discover) and a
// handshake version.
func TestGoSDKClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, version := range []string{"", "2025-06-18"} {
		for _, all := range []bool{false, true} {
			path := "/api/mcp/p/" + e.one.String()
			if all {
				path = "/api/mcp"
			}
			arch := e.sdkSession(t, path, "architect", version)
			peter := e.sdkSession(t, path, "peter", version)
			with := func(m map[string]any) map[string]any {
				if all {
					m["room_id"] = e.one.String()
				}
				return m
			}
			tools, err := arch.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
				if tl.Annotations == nil || tl.Annotations.OpenWorldHint == nil || *tl.Annotations.OpenWorldHint {
					t.Errorf("%s: openWorldHint must be false", tl.Name)
				}
			}
			want := sevenTools
			if all {
				want = append([]string{"list_rooms"}, sevenTools...)
				r, isErr, text := sdkCall(t, peter, "list_rooms", nil)
				if isErr || r["count"].(float64) != 2 {
					t.Fatalf("list_rooms: %s", text)
				}
			}
			if !slices.Equal(names, want) {
				t.Fatalf("%s tools: %v", path, names)
			}
			tag := path + " " + version
			w, isErr, text := sdkCall(t, arch, "write_memory", with(map[string]any{"content": "SDK decision: " + tag, "category": "decision"}))
			if isErr || w["shared_with"] != "All orgs in project" {
				t.Fatalf("write_memory: %s", text)
			}
			if r, isErr, text := sdkCall(t, peter, "read_memory", with(map[string]any{"query": "SDK decision " + tag})); isErr || r["found"].(float64) < 1 {
				t.Fatalf("read_memory: %s", text)
			}
			s, isErr, text := sdkCall(t, arch, "send_task", with(map[string]any{"to_agent_slug": "peter", "goal": "SDK task " + tag}))
			if isErr || s["state"] != "SUBMITTED" {
				t.Fatalf("send_task: %s", text)
			}
			if in, isErr, text := sdkCall(t, peter, "get_inbox", with(map[string]any{})); isErr || in["pending_tasks"].(float64) != 1 {
				t.Fatalf("get_inbox: %s", text)
			}
			if r, isErr, text := sdkCall(t, peter, "respond_to_task", with(map[string]any{"task_id": s["task_id"], "result": "done via sdk", "status": "done"})); isErr || r["state"] != "COMPLETED" {
				t.Fatalf("respond_to_task: %s", text)
			}
			if r, isErr, text := sdkCall(t, peter, "post_message", with(map[string]any{"content": "hello " + tag})); isErr || r["success"] != true {
				t.Fatalf("post_message: %s", text)
			}
			m, isErr, text := sdkCall(t, arch, "get_messages", with(map[string]any{"limit": 1}))
			if isErr || !strings.Contains(text, "hello "+tag) || m["count"].(float64) != 1 {
				t.Fatalf("get_messages: %s", text)
			}
			// A refusal reaches the client as a tool error with the spec's text.
			_, isErr, text = sdkCall(t, e.sdkSession(t, path, "hank", version), "get_messages", with(map[string]any{}))
			if !isErr || text != "Error: No active agreement between your organisation and the host" {
				t.Fatalf("pending guest: %v %s", isErr, text)
			}
		}
	}
}
