package rooms_test

import (
	"strings"
	"testing"
)

// TestSchemaViolations: every tool refuses unknown arguments, wrong types and values out
// of bounds with a tool error naming the argument, before anything runs.
func TestSchemaViolations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		tool string
		args map[string]any
		want string // error prefix after "Error: "
	}{
		{"read_memory", map[string]any{}, `missing required argument "query"`},
		{"read_memory", map[string]any{"query": "x", "project_id": "p"}, `unknown argument "project_id"`},
		{"read_memory", map[string]any{"query": 5}, `argument "query" must be`},
		{"read_memory", map[string]any{"query": "x", "limit": 51}, `argument "limit" must be at most 50`},
		{"read_memory", map[string]any{"query": "x", "limit": 0}, `argument "limit" must be at least 1`},
		{"read_memory", map[string]any{"query": long(1001)}, `argument "query"`},
		{"write_memory", map[string]any{}, `missing required argument "content"`},
		{"write_memory", map[string]any{"content": "x", "privat": true}, `unknown argument "privat"`},
		{"write_memory", map[string]any{"content": "x", "is_private": "yes"}, `argument "is_private" must be`},
		{"write_memory", map[string]any{"content": long(20001)}, `argument "content"`},
		{"write_memory", map[string]any{"content": "x", "tags": "a,b"}, `argument "tags" must be`},
		{"get_inbox", map[string]any{"all": true}, `unknown argument "all"`},
		{"get_inbox", map[string]any{"limit": "5"}, `argument "limit" must be`},
		{"send_task", map[string]any{"goal": "x"}, `missing required argument "to_agent_slug"`},
		{"send_task", map[string]any{"to_agent_slug": "peter", "goal": "x", "priority": "asap"}, `argument "priority"`},
		{"send_task", map[string]any{"to_agent_slug": "peter", "goal": long(5001)}, `argument "goal"`},
		{"send_task", map[string]any{"to_agent_slug": "peter", "goal": "x", "memory_refs": "m1"}, `argument "memory_refs" must be`},
		{"respond_to_task", map[string]any{"task_id": "t", "result": "x"}, `missing required argument "status"`},
		{"respond_to_task", map[string]any{"task_id": "t", "result": "x", "status": "finished"}, `argument "status"`},
		{"respond_to_task", map[string]any{"task_id": 7, "result": "x", "status": "done"}, `argument "task_id" must be`},
		{"post_message", map[string]any{}, `missing required argument "content"`},
		{"post_message", map[string]any{"content": ""}, `argument "content"`},
		{"post_message", map[string]any{"content": long(10001)}, `argument "content"`},
		{"post_message", map[string]any{"content": "x", "to": "peter"}, `unknown argument "to"`},
		{"get_messages", map[string]any{"limit": 101}, `argument "limit" must be at most 100`},
		{"get_messages", map[string]any{"before": 3}, `argument "before" must be`},
		{"get_messages", map[string]any{"since": "x"}, `unknown argument "since"`},
	}
	for _, c := range cases {
		wantErrorPrefix(t, e.call("architect", e.one, c.tool, c.args), c.want)
		withRoom := map[string]any{"room_id": e.one.String()}
		for k, v := range c.args {
			withRoom[k] = v
		}
		wantErrorPrefix(t, e.callAll("architect", c.tool, withRoom), c.want)
	}
	wantErrorPrefix(t, e.callAll("architect", "list_rooms", map[string]any{"room_id": e.one.String()}), `unknown argument "room_id"`)
	// Blank (whitespace) content is refused by the tool itself.
	wantError(t, e.call("architect", e.one, "post_message", map[string]any{"content": "   "}), "content must not be blank")
	wantError(t, e.call("architect", e.one, "write_memory", map[string]any{"content": " \n "}), "content must not be blank")
	wantError(t, e.call("architect", e.one, "read_memory", map[string]any{"query": "  "}), "query must not be blank")
	wantError(t, e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "  "}), "goal must not be blank")
	if n := e.count("SELECT (SELECT count(*) FROM room_message) + (SELECT count(*) FROM memory_entry) + (SELECT count(*) FROM room_task)"); n != 0 {
		t.Fatalf("invalid calls stored %d rows", n)
	}
}

// TestOtherRoomsIDsAreMissingIDs: an id from another room answers exactly like an id that
// does not exist, on every tool that takes one.
func TestOtherRoomsIDsAreMissingIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task2 := str(e.call("peter", e.two, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "room two work"}).obj(t), "task_id")
	mem2 := str(e.call("peter", e.two, "write_memory", map[string]any{"content": "room two decision about pasta"}).obj(t), "memory_id")
	msg2 := str(e.call("peter", e.two, "post_message", map[string]any{"content": "room two"}).obj(t), "message_id")
	const missing = "0190c7e0-0000-7000-8000-000000000000"

	for _, id := range []string{task2, missing} {
		wantError(t, e.call("architect", e.one, "respond_to_task", map[string]any{"task_id": id, "result": "x", "status": "done"}), "Task not found: "+id)
	}
	for _, id := range []string{mem2, missing} {
		wantError(t, e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "x", "memory_refs": []string{id}}), "Memory entry not found: "+id)
	}
	for _, id := range []string{msg2, missing} {
		wantError(t, e.call("architect", e.one, "get_messages", map[string]any{"before": id}), "Message not found: "+id)
	}
	if r := e.call("architect", e.one, "read_memory", map[string]any{"query": "room two decision about pasta"}).obj(t); r["message"] == nil {
		t.Fatalf("room one read room two's memory: %s", fmtJSON(r))
	}
	if r := e.call("architect", e.one, "get_inbox", nil).obj(t); r["message"] == nil {
		t.Fatalf("room one's inbox shows room two's task: %s", fmtJSON(r))
	}
	// The same ids through the all-rooms address, bound to room one.
	wantError(t, e.callAll("architect", "respond_to_task", map[string]any{"room_id": e.one.String(), "task_id": task2, "result": "x", "status": "done"}), "Task not found: "+task2)
	// And through room two they work.
	if r := e.callAll("architect", "respond_to_task", map[string]any{"room_id": e.two.String(), "task_id": task2, "result": "x", "status": "done"}); r.IsError {
		t.Fatal(r.Text)
	}
}
