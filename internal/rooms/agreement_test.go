package rooms_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/rooms"
)

// toolCalls are valid calls of the seven tools for a given caller: each succeeds when the
// agreement allows it. respond_to_task answers a task sent to the caller beforehand.
func toolCalls(e *env, agent string) map[string]map[string]any {
	task := map[string]any{"task_id": e.insertTask("architect", agent, "Check the matrix for "+agent).String()}
	return map[string]map[string]any{
		"read_memory":     {"query": "escalation timeout"},
		"write_memory":    {"content": "Matrix entry written by " + agent},
		"get_inbox":       {},
		"send_task":       {"to_agent_slug": "architect", "goal": "Review the matrix"},
		"respond_to_task": {"task_id": task["task_id"], "result": "checked", "status": "done"},
		"post_message":    {"content": "hello from " + agent},
		"get_messages":    {"limit": 5},
	}
}

var sevenTools = []string{"read_memory", "write_memory", "get_inbox", "send_task", "respond_to_task", "post_message", "get_messages"}

func TestAgreementMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		agent, who string
		refused    map[string]string // tool → error text; absent = succeeds
	}{
		{"architect", "host", nil},
		{"peter", "guest, active agreement with every grant", nil},
		{"hank", "guest, pending agreement", all(rooms.MsgNoAgreement)},
		{"albert", "guest, revoked agreement", all(rooms.MsgNoAgreement)},
		{"gavin", "guest, active agreement without grants", map[string]string{
			"read_memory": rooms.MsgNoReadMemory, "write_memory": rooms.MsgNoWriteMemory, "send_task": rooms.MsgNoAssignTasks,
		}},
	}
	for _, c := range cases {
		calls := toolCalls(e, c.agent)
		for _, addr := range []string{"room", "all"} {
			for _, tool := range sevenTools {
				args := calls[tool]
				var r callResult
				if addr == "room" {
					r = e.call(c.agent, e.one, tool, args)
				} else {
					withRoom := map[string]any{"room_id": e.one.String()}
					for k, v := range args {
						withRoom[k] = v
					}
					if tool == "respond_to_task" { // the first address already answered it
						withRoom["task_id"] = toolCalls(e, c.agent)["respond_to_task"]["task_id"]
					}
					r = e.callAll(c.agent, tool, withRoom)
				}
				if want, refused := c.refused[tool]; refused {
					if !r.IsError || r.Text != "Error: "+want {
						t.Errorf("%s (%s) %s on %s: want %q, got %q", c.agent, c.who, tool, addr, "Error: "+want, r.Text)
					}
				} else if r.IsError {
					t.Errorf("%s (%s) %s on %s: refused: %s", c.agent, c.who, tool, addr, r.Text)
				}
			}
		}
	}
	// Nothing a refused guest tried was stored.
	if n := e.count("SELECT count(*) FROM memory_entry WHERE content LIKE 'Matrix entry written by %' AND content NOT LIKE '%architect' AND content NOT LIKE '%peter'"); n != 0 {
		t.Fatalf("%d memory entries written by refused guests", n)
	}
	if n := e.count("SELECT count(*) FROM room_message WHERE content IN ('hello from hank', 'hello from albert')"); n != 0 {
		t.Fatalf("refused guests posted %d messages", n)
	}
}

func all(msg string) map[string]string {
	m := map[string]string{}
	for _, t := range sevenTools {
		m[t] = msg
	}
	return m
}

func TestRevocationTakesEffectOnTheNextCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.call("peter", e.one, "post_message", map[string]any{"content": "before"}); r.IsError {
		t.Fatal(r.Text)
	}
	if rooms := e.callAll("peter", "list_rooms", nil).obj(t); rooms["count"].(float64) != 2 {
		t.Fatalf("peter should see both rooms: %v", rooms)
	}
	e.exec("UPDATE agreement SET status = 'revoked' WHERE project_id = $1 AND guest_org_id = $2", e.one, e.res.Organisations["initech"].ID)
	for _, tool := range sevenTools {
		wantError(t, e.call("peter", e.one, tool, toolArgsMinimal(tool)), rooms.MsgNoAgreement)
	}
	list := e.callAll("peter", "list_rooms", nil).obj(t)
	if list["count"].(float64) != 1 || strings.Contains(fmtJSON(list), e.one.String()) {
		t.Fatalf("a revoked room is still listed: %v", list)
	}
	// Grants narrowed on an active agreement also apply at once.
	e.exec("UPDATE agreement SET status = 'active', grants = '{write_memory}' WHERE project_id = $1 AND guest_org_id = $2", e.one, e.res.Organisations["initech"].ID)
	wantError(t, e.call("peter", e.one, "read_memory", map[string]any{"query": "x"}), rooms.MsgNoReadMemory)
	if r := e.call("peter", e.one, "write_memory", map[string]any{"content": "still allowed"}); r.IsError {
		t.Fatal(r.Text)
	}
}

// toolArgsMinimal are schema-valid arguments for each tool (whether they succeed is
// decided after the agreement check).
func toolArgsMinimal(tool string) map[string]any {
	switch tool {
	case "read_memory":
		return map[string]any{"query": "x"}
	case "write_memory", "post_message":
		return map[string]any{"content": "x"}
	case "send_task":
		return map[string]any{"to_agent_slug": "architect", "goal": "x"}
	case "respond_to_task":
		return map[string]any{"task_id": "00000000-0000-0000-0000-000000000000", "result": "x", "status": "done"}
	}
	return map[string]any{}
}

func TestToolsListDeclaresTheSpecsAnnotations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type hints struct{ ro, destructive bool }
	want := map[string]hints{
		"read_memory": {true, false}, "get_messages": {true, false}, "list_rooms": {true, false},
		"get_inbox":    {false, false},
		"write_memory": {false, true}, "post_message": {false, true}, "send_task": {false, true}, "respond_to_task": {false, true},
	}
	for _, addr := range []string{"/api/mcp/p/" + e.one.String(), "/api/mcp"} {
		_, m := e.rpc(addr, e.keys["architect"], "tools/list", map[string]any{})
		tools := m["result"].(map[string]any)["tools"].([]any)
		var names []string
		for _, x := range tools {
			tool := x.(map[string]any)
			name := tool["name"].(string)
			names = append(names, name)
			a := tool["annotations"].(map[string]any)
			w := want[name]
			if a["readOnlyHint"] != w.ro || a["destructiveHint"] != w.destructive || a["openWorldHint"] != false {
				t.Errorf("%s %s: annotations %v", addr, name, a)
			}
			if tool["title"] == nil || tool["title"] == "" {
				t.Errorf("%s %s: no title", addr, name)
			}
			schema := tool["inputSchema"].(map[string]any)
			req, _ := schema["required"].([]any)
			hasRoom := slices.Contains(req, any("room_id"))
			if addr == "/api/mcp" && name != "list_rooms" && !hasRoom {
				t.Errorf("%s on the all-rooms address does not require room_id", name)
			}
			if addr != "/api/mcp" && hasRoom {
				t.Errorf("%s on the room address takes room_id", name)
			}
		}
		wantNames := sevenTools
		if addr == "/api/mcp" {
			wantNames = append([]string{"list_rooms"}, sevenTools...)
		}
		if !slices.Equal(names, wantNames) {
			t.Errorf("%s: tools %v, want %v", addr, names, wantNames)
		}
	}
}

func TestNotAParticipant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Per-room address: refused at authentication, HTTP 403, -32001, the spec's text.
	code, m := e.rpc("/api/mcp/p/"+e.one.String(), e.keys["outsider"], "tools/call", map[string]any{"name": "get_inbox", "arguments": map[string]any{}})
	if code != http.StatusForbidden || m["error"].(map[string]any)["message"] != "Agent is not a participant in this room" {
		t.Fatalf("outsider on the room address: %d %v", code, m)
	}
	// All-rooms address: the same check on room_id, before the tool runs.
	for _, tool := range sevenTools {
		args := toolArgsMinimal(tool)
		args["room_id"] = e.one.String()
		wantError(t, e.callAll("outsider", tool, args), "Agent is not a participant in this room")
		args["room_id"] = "not-a-room"
		wantError(t, e.callAll("architect", tool, args), "Agent is not a participant in this room")
	}
	// Peter is in room two; Hank is not.
	wantError(t, e.callAll("hank", "get_messages", map[string]any{"room_id": e.two.String()}), "Agent is not a participant in this room")
	if r := e.callAll("outsider", "list_rooms", nil).obj(t); r["count"].(float64) != 0 {
		t.Fatalf("outsider lists rooms: %v", r)
	}
	// Missing room_id is a schema error.
	wantErrorPrefix(t, e.callAll("architect", "get_inbox", nil), `missing required argument "room_id"`)
}

// TestMemoryCardsFollowTheReadMemoryGrant: a memory write's card in the conversation
// carries the entry's first words, so a company whose agreement does not grant
// read_memory sees only that an entry was written, in get_messages as in read_memory.
func TestMemoryCardsFollowTheReadMemoryGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "Q3 price floor is 41 dollars a seat"
	if r := e.call("architect", e.one, "write_memory", map[string]any{"content": secret, "category": "decision"}); r.IsError {
		t.Fatal(r.Text)
	}
	cards := func(t *testing.T) string {
		t.Helper()
		r := e.call("peter", e.one, "get_messages", map[string]any{})
		if r.IsError {
			t.Fatal(r.Text)
		}
		return fmtJSON(r.obj(t))
	}
	t.Run("without read_memory the card says only that an entry was written", func(t *testing.T) {
		e.exec("UPDATE agreement SET grants = '{write_memory,assign_tasks}' WHERE project_id = $1 AND guest_org_id = $2", e.one, e.res.Organisations["initech"].ID)
		got := cards(t)
		if strings.Contains(got, "price floor") || strings.Contains(got, "decision") || !strings.Contains(got, "Wrote a memory entry") {
			t.Fatalf("the card shows the entry to a company without read_memory: %s", got)
		}
	})
	t.Run("with read_memory the card shows its excerpt", func(t *testing.T) {
		e.exec("UPDATE agreement SET grants = '{read_memory}' WHERE project_id = $1 AND guest_org_id = $2", e.one, e.res.Organisations["initech"].ID)
		if got := cards(t); !strings.Contains(got, secret) {
			t.Fatalf("the card lost its excerpt for a company that reads memory: %s", got)
		}
	})
}

// TestReadOnlyMembersDoNotWriteMemory: a member with read access reads the room's memory
// and talks in it, but write_memory is refused, as learn is for a read-only part.
func TestReadOnlyMembersDoNotWriteMemory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec("UPDATE membership SET access = 'read' WHERE project_id = $1 AND agent_id = $2", e.one, e.res.Agents["initech/peter"].ID)
	wantError(t, e.call("peter", e.one, "write_memory", map[string]any{"content": "a read-only note"}),
		fmt.Sprintf(rooms.MsgNoWriteAccess, "read"))
	for tool, args := range map[string]map[string]any{"read_memory": {"query": "x"}, "post_message": {"content": "still talking"}} {
		if r := e.call("peter", e.one, tool, args); r.IsError {
			t.Fatalf("%s refused to a read-only member: %s", tool, r.Text)
		}
	}
}
