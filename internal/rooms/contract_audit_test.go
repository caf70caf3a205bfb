package rooms_test

import (
	"testing"
)

// TestRoomsContractAudit holds what an audit of the rooms toolset against its contract
// found, one behaviour per subtest, each through the server as the clients call it.
func TestRoomsContractAudit(t *testing.T) {
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
