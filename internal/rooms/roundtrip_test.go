package rooms_test

import (
	"testing"
)

// The write tools that wake always-on agents read the agents' kind with the lookup they
// make anyway (the room's members, the task's recipient or sender), so queueing the wake
// costs no round trip of its own; respond_to_task's writes travel with its next read, and
// write_memory's with its COMMIT, after the look for the same entry stored before.
// Each call through the per-room address by a caller the scope cache holds (a read
// just before warms it): the caller's check rides with the tool's first statements
// (docs/tenancy.md), so the counts are the tool's own round trips. The counts are what
// the code sends; the wakes are checked too, so a count cannot be reached by skipping
// one.
func TestWriteToolRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	trips := func(t *testing.T, agent, tool string, args map[string]any) (map[string]any, int64) {
		t.Helper()
		e.call(agent, e.one, "get_messages", nil).obj(t)
		before := e.db.RoundTrips()
		res := e.call(agent, e.one, tool, args).obj(t)
		return res, e.db.RoundTrips() - before
	}
	// On Citus the resolution goes statement by statement and a transaction's tenant
	// settings are a round trip of their own (docs/scale.md): the counts are plain
	// PostgreSQL's, the effects are checked on both.
	counted := !e.db.Citus()
	wakes := func() int { return e.count("SELECT count(*) FROM wake_event WHERE project_id = $1", e.one) }

	t.Run("post_message is two round trips and wakes the always-on member", func(t *testing.T) {
		before := wakes()
		if _, n := trips(t, "architect", "post_message", map[string]any{"content": "status?"}); counted && n != 2 {
			t.Fatalf("%d round trips, want 2 (the check, the insert and the always-on members; wake with the COMMIT)", n)
		}
		if got := wakes() - before; got != 1 {
			t.Fatalf("%d wake events, want 1 (qa-lead, the one always-on member)", got)
		}
	})
	t.Run("write_memory is two round trips and stores the entry, its vector and its card", func(t *testing.T) {
		res, n := trips(t, "architect", "write_memory", map[string]any{"content": "the release train leaves on Thursdays"})
		if counted && n != 2 {
			t.Fatalf("%d round trips, want 2 (the check and the look for the same entry; entry, vector and card with the COMMIT)", n)
		}
		id := res["memory_id"]
		if e.count("SELECT count(*) FROM memory_entry WHERE id = $1", id) != 1 ||
			e.count("SELECT count(*) FROM memory_vector WHERE memory_id = $1", id) != 1 ||
			e.count("SELECT count(*) FROM room_message WHERE ref_id = $1 AND kind = 'memory'", id) != 1 {
			t.Fatal("the entry, its vector or its card is missing")
		}
	})
	var taskID string
	t.Run("send_task to an always-on agent is two round trips and wakes it", func(t *testing.T) {
		before := wakes()
		res, n := trips(t, "architect", "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "triage the queue"})
		taskID = res["task_id"].(string)
		if counted && n != 2 {
			t.Fatalf("%d round trips, want 2 (the check and the recipient; task, card and wake with the COMMIT)", n)
		}
		if got := wakes() - before; got != 1 {
			t.Fatalf("%d wake events, want 1", got)
		}
	})
	t.Run("respond_to_task is three round trips and does not wake a session sender", func(t *testing.T) {
		before := wakes()
		if _, n := trips(t, "qa-lead", "respond_to_task", map[string]any{"task_id": taskID, "status": "done", "result": "done"}); counted && n != 3 {
			t.Fatalf("%d round trips, want 3 (the check and the task; response, card and sender; COMMIT)", n)
		}
		if got := wakes() - before; got != 0 {
			t.Fatalf("%d wake events, want none (architect is a session agent)", got)
		}
	})
	t.Run("respond_to_task wakes an always-on sender", func(t *testing.T) {
		res := e.call("qa-lead", e.one, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "review the plan"}).obj(t)
		before := wakes()
		if _, n := trips(t, "architect", "respond_to_task", map[string]any{"task_id": res["task_id"], "status": "done", "result": "ok"}); counted && n != 3 {
			t.Fatalf("%d round trips, want 3 (the check and the task; response, card and sender; wake with the COMMIT)", n)
		}
		if got := wakes() - before; got != 1 {
			t.Fatalf("%d wake events, want 1 (qa-lead)", got)
		}
	})
}
