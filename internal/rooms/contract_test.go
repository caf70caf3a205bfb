package rooms_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/rooms"
)

// TestAGuestLearnsNothingItCannotSee: what an audit of the rooms toolset against its
// contract found, one behaviour per subtest, each through the server as clients call it:
// no answer tells a company what its grants or the room's agreements keep from it.
func TestAGuestLearnsNothingItCannotSee(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("another company's identical memory entry is not the same write", func(t *testing.T) {
		// A company granted write_memory but not read_memory must not learn from a write
		// whether a text is in the room's memory, and its write is recorded as its own.
		const text = "The Q3 price for Initech is 41,000 EUR."
		host := e.call("architect", e.one, "write_memory", map[string]any{"content": text}).obj(t)
		e.exec(`UPDATE agreement SET grants = ARRAY['write_memory'] WHERE project_id = $1
  AND guest_org_id = (SELECT org_id FROM agent WHERE slug = 'peter')`, e.one)
		t.Cleanup(func() {
			e.exec(`UPDATE agreement SET grants = ARRAY['read_memory', 'write_memory', 'assign_tasks'] WHERE project_id = $1
  AND guest_org_id = (SELECT org_id FROM agent WHERE slug = 'peter')`, e.one)
		})
		wantError(t, e.call("peter", e.one, "read_memory", map[string]any{"query": "Q3 price"}), "Agreement does not permit can read memory")
		guest := e.call("peter", e.one, "write_memory", map[string]any{"content": text}).obj(t)
		if guest["memory_id"] == host["memory_id"] || guest["already_stored"] != nil || guest["written_by"] != "Peter" {
			t.Fatalf("the guest's write answered the host's entry: host %v, guest %v", host, guest)
		}
		if n := e.count(`SELECT count(*) FROM memory_entry WHERE project_id = $1 AND content = $2`, e.one, text); n != 2 {
			t.Fatalf("%d entries, want the host's and the guest's", n)
		}
		// The guest's own write again is still answered by its first.
		again := e.call("peter", e.one, "write_memory", map[string]any{"content": text}).obj(t)
		if again["memory_id"] != guest["memory_id"] || again["already_stored"] != true {
			t.Fatalf("the guest's same write again: %v, first %v", again, guest)
		}
	})

	t.Run("a guest naming a pending or revoked guest's agent finds no such agent", func(t *testing.T) {
		// The unknown agent's list leaves out parts of guests whose agreement is not
		// active (they are not in the room); naming one must not tell another guest that
		// it, or its company, is there. Whatever the caller's own grant.
		for _, from := range []string{"peter", "gavin"} {
			for _, to := range []string{"hank", "albert"} {
				r := e.call(from, e.one, "send_task", map[string]any{"to_agent_slug": to, "goal": "x"})
				wantError(t, r, `Agent "`+to+`" not found in this project. Its parts: architect, gavin, peter, qa-lead.`)
			}
		}
		// The host made those agreements, and is told why.
		wantError(t, e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "albert", "goal": "x"}),
			"No active agreement between your organisation and Umbrella grants task assignment")
		// An admitted guest's agent is found: the refusal is about the grant.
		wantError(t, e.call("peter", e.one, "send_task", map[string]any{"to_agent_slug": "gavin", "goal": "x"}),
			"No active agreement between your organisation and Hooli grants task assignment")
		wantError(t, e.call("gavin", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "x"}), "Agreement does not permit can assign tasks")
	})
}

// keysOf lists a JSON object's keys, sorted.
func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// wantKeys fails unless the answer holds exactly the contract's fields.
func wantKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	slices.Sort(keys)
	if got := keysOf(m); !slices.Equal(got, keys) {
		t.Fatalf("%s: fields %v, want %v: %s", what, got, keys, fmtJSON(m))
	}
}

// TestRoomsAnswersHoldTheContractsFields: every tool's answer, as a host and as a guest
// agent, holds the fields the contract lists and no others, with its fixed texts.
func TestRoomsAnswersHoldTheContractsFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("list_rooms: id, name, host_company and role; no room of a pending or revoked guest", func(t *testing.T) {
		r := e.callAll("architect", "list_rooms", nil).obj(t)
		wantKeys(t, "list_rooms", r, "rooms", "count")
		rs := r["rooms"].([]any)
		if r["count"] != float64(2) || len(rs) != 2 {
			t.Fatalf("list_rooms: %s", fmtJSON(r))
		}
		want := map[string][2]string{e.one.String(): {"Acme Corp", "host"}, e.two.String(): {"Initech", "guest"}}
		for _, x := range rs {
			m := x.(map[string]any)
			wantKeys(t, "a room", m, "id", "name", "host_company", "role")
			if w := want[str(m, "id")]; m["host_company"] != w[0] || m["role"] != w[1] {
				t.Fatalf("room %s", fmtJSON(m))
			}
		}
		for _, agent := range []string{"hank", "albert"} {
			if r := e.callAll(agent, "list_rooms", nil).obj(t); r["count"] != float64(0) || len(r["rooms"].([]any)) != 0 {
				t.Fatalf("%s: %s", agent, fmtJSON(r))
			}
		}
	})

	var memoryID string
	t.Run("write_memory: success, memory_id, written_by, shared_with, category when given, timestamp", func(t *testing.T) {
		w := e.call("architect", e.one, "write_memory", map[string]any{"content": "Escalations time out at 72 hours and expire.", "category": "decision", "tags": []string{"architecture"}}).obj(t)
		wantKeys(t, "write_memory", w, "success", "memory_id", "written_by", "shared_with", "category", "timestamp")
		if w["success"] != true || w["written_by"] != "Architect" || w["shared_with"] != "All orgs in project" || w["category"] != "decision" {
			t.Fatalf("write_memory: %s", fmtJSON(w))
		}
		memoryID = str(w, "memory_id")
		p := e.call("peter", e.one, "write_memory", map[string]any{"content": "Initech keeps its escalation budget to itself.", "is_private": true}).obj(t)
		wantKeys(t, "private write_memory", p, "success", "memory_id", "written_by", "shared_with", "timestamp")
		if p["written_by"] != "Peter" || p["shared_with"] != "Your org only" {
			t.Fatalf("private write_memory: %s", fmtJSON(p))
		}
	})

	t.Run("read_memory: found and entries, each written_by Name (Organisation); message when nothing matches", func(t *testing.T) {
		r := e.call("peter", e.one, "read_memory", map[string]any{"query": "escalations time out"}).obj(t)
		wantKeys(t, "read_memory", r, "found", "entries")
		var mine map[string]any
		for _, x := range r["entries"].([]any) {
			if m := x.(map[string]any); m["id"] == memoryID {
				mine = m
			}
		}
		if mine == nil {
			t.Fatalf("the host's entry is not found by the guest: %s", fmtJSON(r))
		}
		wantKeys(t, "an entry", mine, "id", "written_by", "model", "timestamp", "is_decision", "category", "tags", "content", "relevance")
		if mine["written_by"] != "Architect (Acme Corp)" || mine["model"] != "claude-opus-4" || mine["is_decision"] != true ||
			!strings.HasSuffix(str(mine, "relevance"), "%") {
			t.Fatalf("entry: %s", fmtJSON(mine))
		}
		// The guest's private entry is not the host's to read.
		for _, x := range e.call("architect", e.one, "read_memory", map[string]any{"query": "Initech escalation budget"}).obj(t)["entries"].([]any) {
			if strings.Contains(str(x.(map[string]any), "content"), "budget") {
				t.Fatalf("the host read the guest's private entry: %s", fmtJSON(x))
			}
		}
		none := e.call("peter", e.one, "read_memory", map[string]any{"query": "giraffe migration patterns in Kenya"}).obj(t)
		wantKeys(t, "no match", none, "message", "entries")
		if none["message"] != rooms.MsgNoMemory || len(none["entries"].([]any)) != 0 {
			t.Fatalf("no match: %s", fmtJSON(none))
		}
	})

	var taskID string
	t.Run("send_task: success, task_id, assigned_to, goal, status pending, state SUBMITTED, message", func(t *testing.T) {
		s := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "Summarise the escalations.", "priority": "high"}).obj(t)
		wantKeys(t, "send_task", s, "success", "task_id", "assigned_to", "goal", "status", "state", "message")
		if s["success"] != true || s["assigned_to"] != "Peter (Initech)" || s["goal"] != "Summarise the escalations." || s["status"] != "pending" ||
			s["state"] != "SUBMITTED" || s["message"] != "Task queued in Peter's inbox. An always-on agent is woken to work on it; "+
			"an agent connected from a chat or coding tool sees it the next time its inbox is checked." {
			t.Fatalf("send_task: %s", fmtJSON(s))
		}
		taskID = str(s, "task_id")
	})

	t.Run("get_inbox: pending_tasks and tasks with from Name (Organisation) and No deadline set; message when empty", func(t *testing.T) {
		in := e.call("peter", e.one, "get_inbox", nil).obj(t)
		wantKeys(t, "get_inbox", in, "pending_tasks", "tasks")
		task := in["tasks"].([]any)[0].(map[string]any)
		wantKeys(t, "a task", task, "task_id", "from", "goal", "priority", "status", "state", "deadline", "memory_refs", "created_at")
		if in["pending_tasks"] != float64(1) || task["task_id"] != taskID || task["from"] != "Architect (Acme Corp)" || task["priority"] != "high" ||
			task["status"] != "pending" || task["state"] != "SUBMITTED" || task["deadline"] != "No deadline set" || len(task["memory_refs"].([]any)) != 0 {
			t.Fatalf("get_inbox: %s", fmtJSON(in))
		}
		empty := e.call("qa-lead", e.one, "get_inbox", nil).obj(t)
		wantKeys(t, "empty inbox", empty, "message", "tasks")
		if empty["message"] != "No pending tasks in your inbox." || len(empty["tasks"].([]any)) != 0 {
			t.Fatalf("empty inbox: %s", fmtJSON(empty))
		}
	})

	t.Run("respond_to_task: success, task_id, status, state, result_recorded, message; only the recipient", func(t *testing.T) {
		for _, agent := range []string{"architect", "qa-lead"} { // the sender, and another agent of its company
			wantError(t, e.call(agent, e.one, "respond_to_task", map[string]any{"task_id": taskID, "result": "x", "status": "done"}),
				"Task "+taskID+" is assigned to a different agent: only its recipient can respond to it")
		}
		r := e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": taskID, "result": "3 failures.", "status": "done"}).obj(t)
		wantKeys(t, "respond_to_task", r, "success", "task_id", "status", "state", "result_recorded", "message")
		if r["success"] != true || r["task_id"] != taskID || r["status"] != "done" || r["state"] != "COMPLETED" || r["result_recorded"] != true ||
			r["message"] != "Task marked as done. The sender has been notified." {
			t.Fatalf("respond_to_task: %s", fmtJSON(r))
		}
	})

	t.Run("post_message: success, message_id, posted_at, visible_to; a guest without grants posts", func(t *testing.T) {
		p := e.call("gavin", e.one, "post_message", map[string]any{"content": "@Architect regression run kicked off."}).obj(t)
		wantKeys(t, "post_message", p, "success", "message_id", "posted_at", "visible_to")
		if p["success"] != true || p["visible_to"] != "All agents and humans in all project organisations" {
			t.Fatalf("post_message: %s", fmtJSON(p))
		}
	})

	t.Run("get_messages: messages oldest first and count, each id, from, content, timestamp", func(t *testing.T) {
		m := e.call("peter", e.one, "get_messages", map[string]any{"limit": 2}).obj(t)
		wantKeys(t, "get_messages", m, "messages", "count")
		msgs := m["messages"].([]any)
		if m["count"] != float64(2) || len(msgs) != 2 {
			t.Fatalf("get_messages: %s", fmtJSON(m))
		}
		first, last := msgs[0].(map[string]any), msgs[1].(map[string]any)
		wantKeys(t, "a message", last, "id", "from", "content", "timestamp")
		if first["from"] != "Peter [Initech] (agent · gpt-5)" || !strings.HasPrefix(str(first, "content"), "[task] Responded to") ||
			last["from"] != "Gavin [Hooli] (agent)" || last["content"] != "@Architect regression run kicked off." {
			t.Fatalf("get_messages: %s", fmtJSON(m))
		}
	})
}

// TestRoomsEndpointsProtocol: what the contract says of the JSON-RPC layer, on the
// per-room address and on the all-rooms one.
func TestRoomsEndpointsProtocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type answer struct {
		code   int
		header http.Header
		body   string
		rpc    struct {
			Result json.RawMessage
			Error  *struct {
				Code    int
				Message string
			}
		}
	}
	send := func(method, path, key, body string, header map[string]string) answer {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("X-Agent-Key", key)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, req)
		b, _ := io.ReadAll(w.Result().Body)
		a := answer{code: w.Code, header: w.Header(), body: string(b)}
		_ = json.Unmarshal(b, &a.rpc)
		return a
	}
	for _, addr := range []struct{ name, path string }{{"per-room", "/api/mcp/p/" + e.one.String()}, {"all-rooms", "/api/mcp"}} {
		name, path, key := addr.name, addr.path, e.keys["peter"]
		wantRPCError := func(t *testing.T, a answer, status, code int) {
			t.Helper()
			if a.code != status || a.rpc.Error == nil || a.rpc.Error.Code != code {
				t.Fatalf("want HTTP %d, code %d; got %d %s", status, code, a.code, a.body)
			}
		}
		t.Run(name+": resources/list and prompts/list answer empty lists", func(t *testing.T) {
			for method, field := range map[string]string{"resources/list": "resources", "prompts/list": "prompts"} {
				a := send(http.MethodPost, path, key, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`, nil)
				if a.code != http.StatusOK || a.rpc.Error != nil || string(a.rpc.Result) != `{"`+field+`":[]}` {
					t.Fatalf("%s: %d %s", method, a.code, a.body)
				}
			}
		})
		t.Run(name+": a notification gets 202 with no body", func(t *testing.T) {
			if a := send(http.MethodPost, path, key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); a.code != http.StatusAccepted || a.body != "" {
				t.Fatalf("%d %q", a.code, a.body)
			}
		})
		t.Run(name+": another method -32601, tools/call without a name -32602", func(t *testing.T) {
			wantRPCError(t, send(http.MethodPost, path, key, `{"jsonrpc":"2.0","id":1,"method":"tools/cancel"}`, nil), http.StatusOK, -32601)
			wantRPCError(t, send(http.MethodPost, path, key, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, nil), http.StatusOK, -32602)
		})
		t.Run(name+": malformed JSON -32700 and a batch -32600, both HTTP 400", func(t *testing.T) {
			wantRPCError(t, send(http.MethodPost, path, key, `{"jsonrpc":`, nil), http.StatusBadRequest, -32700)
			a := send(http.MethodPost, path, key, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, nil)
			wantRPCError(t, a, http.StatusBadRequest, -32600)
			if a.rpc.Error.Message != "Batch requests are not supported" {
				t.Fatalf("batch: %s", a.body)
			}
		})
		t.Run(name+": an unknown MCP-Protocol-Version is HTTP 400, none is fine", func(t *testing.T) {
			list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
			if a := send(http.MethodPost, path, key, list, map[string]string{"MCP-Protocol-Version": "1999-01-01"}); a.code != http.StatusBadRequest {
				t.Fatalf("%d %s", a.code, a.body)
			}
			if a := send(http.MethodPost, path, key, list, nil); a.code != http.StatusOK || a.rpc.Error != nil {
				t.Fatalf("%d %s", a.code, a.body)
			}
		})
		t.Run(name+": both 401s are JSON-RPC errors with the rooms challenge", func(t *testing.T) {
			for _, k := range []string{"", "sk-qyt-not-a-key"} {
				a := send(http.MethodPost, path, k, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
				wantRPCError(t, a, http.StatusUnauthorized, -32001)
				c := a.header.Get("WWW-Authenticate")
				if a.rpc.Error.Message != "Unauthorized" || !strings.HasPrefix(c, `Bearer resource_metadata="`) ||
					!strings.Contains(c, "/.well-known/oauth-protected-resource"+path+`"`) || !strings.Contains(c, `scope="rooms"`) {
					t.Fatalf("401: %s %s", c, a.body)
				}
			}
		})
		t.Run(name+": a key in Authorization: Bearer is read as X-Agent-Key is", func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_messages","arguments":{"limit":1}}}`
			if path == "/api/mcp" {
				body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_messages","arguments":{"limit":1,"room_id":"` + e.one.String() + `"}}}`
			}
			if a := send(http.MethodPost, path, "", body, map[string]string{"Authorization": "Bearer " + key}); a.code != http.StatusOK || !bytes.Contains(a.rpc.Result, []byte(`"isError":false`)) {
				t.Fatalf("%d %s", a.code, a.body)
			}
		})
		t.Run(name+": a plain GET describes the endpoint; an event stream and DELETE are 405", func(t *testing.T) {
			a := send(http.MethodGet, path, "", "", nil)
			var d struct {
				Status, Service string
				ProjectID       string `json:"project_id"`
				Tools           []string
			}
			want := slices.Clone(sevenTools)
			if path == "/api/mcp" {
				want = append([]string{"list_rooms"}, want...)
			}
			if json.Unmarshal([]byte(a.body), &d) != nil || a.code != http.StatusOK || d.Status != "ok" || d.Service != "quayutec-mcp" ||
				!slices.Equal(d.Tools, want) || (path != "/api/mcp" && d.ProjectID != e.one.String()) {
				t.Fatalf("GET: %d %s", a.code, a.body)
			}
			if a := send(http.MethodGet, path, "", "", map[string]string{"Accept": "text/event-stream"}); a.code != http.StatusMethodNotAllowed {
				t.Fatalf("GET event stream: %d", a.code)
			}
			if a := send(http.MethodDelete, path, key, "", nil); a.code != http.StatusMethodNotAllowed {
				t.Fatalf("DELETE: %d", a.code)
			}
		})
	}
	t.Run("an agent outside the room: HTTP 403 -32001 on the per-room address, a tool error on the all-rooms one", func(t *testing.T) {
		a := send(http.MethodPost, "/api/mcp/p/"+e.one.String(), e.keys["outsider"], `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
		if a.code != http.StatusForbidden || a.rpc.Error == nil || a.rpc.Error.Code != -32001 || a.rpc.Error.Message != "Agent is not a participant in this room" {
			t.Fatalf("per-room: %d %s", a.code, a.body)
		}
		for _, room := range []string{e.one.String(), "0190c7e0-0000-7000-8000-000000000000", "not-a-room"} {
			wantError(t, e.callAll("outsider", "get_messages", map[string]any{"room_id": room}), "Agent is not a participant in this room")
		}
	})
}

// TestInboxInlinesTextFilesUpTo64KB: the contract's bound is inclusive (64 KB or less).
func TestInboxInlinesTextFilesUpTo64KB(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "Read both")
	for name, size := range map[string]int{"exact.txt": rooms.InlineMax, "over.txt": rooms.InlineMax + 1} {
		if code, m := e.upload("architect", task, name, "text/plain", bytes.Repeat([]byte("a"), size)); code != http.StatusCreated {
			t.Fatalf("upload %s: %d %v", name, code, m)
		}
	}
	in := e.call("peter", e.one, "get_inbox", nil).obj(t)
	for _, x := range in["tasks"].([]any)[0].(map[string]any)["attachments"].([]any) {
		a := x.(map[string]any)
		switch a["filename"] {
		case "exact.txt":
			wantKeys(t, "inlined", a, "id", "uploaded_by_org_id", "filename", "content_type", "size_bytes", "sha256", "text")
		case "over.txt":
			wantKeys(t, "linked", a, "id", "uploaded_by_org_id", "filename", "content_type", "size_bytes", "sha256", "download_url", "expires_in_seconds")
			if a["expires_in_seconds"] != float64(60) {
				t.Fatalf("link: %s", fmtJSON(a))
			}
		default:
			t.Fatalf("attachment %s", fmtJSON(a))
		}
	}
}
