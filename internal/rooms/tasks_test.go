package rooms_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/text"
)

func TestSendTaskAndInbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mem := str(e.call("architect", e.one, "write_memory", map[string]any{"content": "Regression suite lives in ci/regress."}).obj(t), "memory_id")
	sent := e.call("architect", e.one, "send_task", map[string]any{
		"to_agent_slug": "peter", "goal": "Run the regression suite against the new escalation flow and report failures.",
		"priority": "high", "deadline": "2026-09-15T17:00:00+02:00", "memory_refs": []string{mem},
		"acceptance_criteria": "Every failure has a follow-up.", "verification_method": "QA Lead re-runs the suite.",
	}).obj(t)
	if sent["success"] != true || sent["status"] != "pending" || sent["state"] != "SUBMITTED" || sent["assigned_to"] != "Peter (Initech)" ||
		!strings.HasPrefix(str(sent, "message"), "Task queued in Peter's inbox.") {
		t.Fatalf("send_task: %v", sent)
	}
	plain := e.call("peter", e.one, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "Review my plan"}).obj(t)

	inbox := e.call("peter", e.one, "get_inbox", nil).obj(t)
	tasks := inbox["tasks"].([]any)
	if inbox["pending_tasks"].(float64) != 1 || len(tasks) != 1 {
		t.Fatalf("inbox: %s", fmtJSON(inbox))
	}
	task := tasks[0].(map[string]any)
	want := map[string]any{"task_id": sent["task_id"], "from": "Architect (Acme Corp)", "priority": "high", "status": "pending",
		"state": "SUBMITTED", "deadline": "2026-09-15T15:00:00Z", "acceptance_criteria": "Every failure has a follow-up.",
		"verification_method": "QA Lead re-runs the suite."}
	for k, v := range want {
		if task[k] != v {
			t.Errorf("inbox task %s = %v, want %v", k, task[k], v)
		}
	}
	if refs := task["memory_refs"].([]any); len(refs) != 1 || refs[0] != mem {
		t.Errorf("memory_refs: %v", refs)
	}
	// Read again: the task is now in progress, and nothing is pending.
	inbox = e.call("peter", e.one, "get_inbox", nil).obj(t)
	task = inbox["tasks"].([]any)[0].(map[string]any)
	if inbox["pending_tasks"].(float64) != 0 || task["status"] != "in_progress" || task["state"] != "WORKING" {
		t.Fatalf("second read: %s", fmtJSON(inbox))
	}
	// The architect's inbox: no deadline, no optional fields.
	inbox = e.call("architect", e.one, "get_inbox", nil).obj(t)
	task = inbox["tasks"].([]any)[0].(map[string]any)
	if task["deadline"] != rooms.MsgNoDeadline || task["priority"] != "normal" || task["from"] != "Peter (Initech)" {
		t.Fatalf("plain task: %v", task)
	}
	if _, has := task["acceptance_criteria"]; has {
		t.Fatalf("acceptance_criteria present though unset: %v", task)
	}
	_ = plain
	// An empty inbox.
	empty := e.call("qa-lead", e.one, "get_inbox", nil).obj(t)
	if empty["message"] != rooms.MsgEmptyInbox || len(empty["tasks"].([]any)) != 0 {
		t.Fatalf("empty inbox: %v", empty)
	}
	// The task card is in the room.
	msgs := fmtJSON(e.call("hank", e.one, "get_messages", nil))
	_ = msgs
	conv := e.call("qa-lead", e.one, "get_messages", nil).obj(t)
	if !strings.Contains(fmtJSON(conv), "[task] Assigned to Peter (Initech) (priority high)") {
		t.Fatalf("no task card: %s", fmtJSON(conv))
	}
}

func TestSendTaskRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	send := func(from, to string) callResult {
		return e.call(from, e.one, "send_task", map[string]any{"to_agent_slug": to, "goal": "x"})
	}
	// The error names the room's parts: no rooms tool lists them. Not those of a guest
	// whose agreement is pending (hank) or revoked (albert): they are not in the room.
	wantError(t, send("architect", "nobody"), `Agent "nobody" not found in this project. Its parts: architect, gavin, peter, qa-lead.`)
	wantError(t, send("gavin", "nobody"), `Agent "nobody" not found in this project. Its parts: architect, gavin, peter, qa-lead.`)
	wantError(t, send("architect", "outsider"), `Agent "outsider" exists but is not a member of this project`)
	// A guest whose agreement does not grant assign_tasks cannot assign across companies…
	wantError(t, send("gavin", "architect"), rooms.MsgNoAssignTasks)
	// …but can within its own company.
	if r := send("gavin", "gavin"); r.IsError {
		t.Fatal(r.Text)
	}
	// The host cannot assign to a company whose agreement does not grant it.
	wantError(t, send("architect", "gavin"), "No active agreement between your organisation and Hooli grants task assignment")
	wantError(t, send("architect", "hank"), "No active agreement between your organisation and Globex grants task assignment")
	// Guest to guest needs both sides.
	wantError(t, send("peter", "gavin"), "No active agreement between your organisation and Hooli grants task assignment")
	// Another room's agent is not in this room.
	wantErrorPrefix(t, e.call("peter", e.two, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "x"}), `Agent "qa-lead" not found in this project.`)
	// memory_refs must be entries of this room the caller can read.
	other := str(e.call("peter", e.two, "write_memory", map[string]any{"content": "room two fact"}).obj(t), "memory_id")
	wantError(t, e.call("peter", e.one, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "x", "memory_refs": []string{other}}), "Memory entry not found: "+other)
	priv := str(e.call("architect", e.one, "write_memory", map[string]any{"content": "acme only", "is_private": true}).obj(t), "memory_id")
	wantError(t, e.call("peter", e.one, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "x", "memory_refs": []string{priv}}), "Memory entry not found: "+priv)
	// Nor may a task hand another company the id of the sender's private entry, which
	// that company may not read (it was accepted); the sender's own company may have it.
	wantError(t, e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "x", "memory_refs": []string{priv}}), "Memory entry not found: "+priv)
	if r := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "architect", "goal": "x", "memory_refs": []string{priv}}); r.IsError {
		t.Fatalf("a private entry's id to its own company: %s", r.Text)
	}
	wantErrorPrefix(t, e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "x", "deadline": "next friday"}), "deadline must be an ISO 8601 date")
	// "0000-01-01" parsed and was stored as a deadline 2,026 years ago.
	wantErrorPrefix(t, e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "x", "deadline": "0000-01-01"}), "deadline must be between the years")
	if n := e.count("SELECT count(*) FROM room_task"); n != 2 {
		t.Fatalf("refused tasks stored: %d", n)
	}
}

// TestDeadlineForms: the ISO 8601 forms agents write are read, as the same instant.
func TestDeadlineForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for in, want := range map[string]string{
		"2026-09-15T15:00:00Z":       "2026-09-15T15:00:00Z",
		"2026-09-15t15:00:00z":       "2026-09-15T15:00:00Z",
		"2026-09-15T15:00Z":          "2026-09-15T15:00:00Z",
		"2026-09-15T17:00+02:00":     "2026-09-15T15:00:00Z",
		"2026-09-15T17:00:00+0200":   "2026-09-15T15:00:00Z",
		"2026-09-15T17:00:00.5+0200": "2026-09-15T15:00:00Z",
		"2026-09-15":                 "2026-09-15T00:00:00Z",
	} {
		r := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "Deadline " + in, "deadline": in})
		if r.IsError {
			t.Fatalf("%q refused: %s", in, r.Text)
		}
		id := str(r.obj(t), "task_id")
		if got := testfix.Scalar[time.Time](t, e.db, "SELECT deadline FROM room_task WHERE id = $1", id).UTC().Truncate(time.Second).Format(time.RFC3339); got != want {
			t.Fatalf("%q stored as %s, want %s", in, got, want)
		}
	}
}

func TestRespondAndReview(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.sendTask(t, "Summarise escalations")
	respond := func(agent, status string) callResult {
		return e.call(agent, e.one, "respond_to_task", map[string]any{"task_id": id, "result": "3 failures, all in the expiry path.", "status": status})
	}
	wantError(t, respond("architect", "done"), "Task "+id+" is assigned to a different agent: only its recipient can respond to it")
	wantError(t, e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": "0190c7e0-0000-7000-8000-000000000000", "result": "x", "status": "done"}),
		"Task not found: 0190c7e0-0000-7000-8000-000000000000")
	// Room two cannot reach room one's task.
	wantError(t, e.call("peter", e.two, "respond_to_task", map[string]any{"task_id": id, "result": "x", "status": "done"}), "Task not found: "+id)

	r := respond("peter", "input_required").obj(t)
	if r["state"] != "INPUT_REQUIRED" {
		t.Fatalf("input_required: %v", r)
	}
	r = respond("peter", "done").obj(t)
	if r["success"] != true || r["status"] != "done" || r["state"] != "COMPLETED" || r["result_recorded"] != true ||
		r["message"] != "Task marked as done. The sender has been notified." {
		t.Fatalf("respond: %v", r)
	}
	wantError(t, respond("peter", "failed"), "Task "+id+" is already done and cannot change")
	if inbox := e.call("peter", e.one, "get_inbox", nil).obj(t); inbox["message"] != rooms.MsgEmptyInbox {
		t.Fatalf("a done task is still in the inbox: %v", inbox)
	}

	review := func(agent, verdict string) (int, map[string]any) {
		return e.postRoute("/api/rooms/"+e.one.String()+"/tasks/"+id+"/"+verdict, e.keys[agent], "", []byte(`{"comment":"thanks"}`))
	}
	if code, m := review("peter", "accept"); code != http.StatusForbidden {
		t.Fatalf("recipient accepted its own result: %d %v", code, m)
	}
	if code, _ := review("hank", "accept"); code != http.StatusForbidden {
		t.Fatalf("pending guest reviewed: %d", code)
	}
	if code, m := review("architect", "accept"); code != http.StatusOK || m["review"] != "accepted" || m["state"] != "COMPLETED" {
		t.Fatalf("accept: %d %v", code, m)
	}
	if code, m := review("architect", "reject"); code != http.StatusConflict {
		t.Fatalf("a reviewed result changed: %d %v", code, m)
	}
	wantError(t, respond("peter", "done"), "Task "+id+" is already done and cannot change")
	if n := e.count("SELECT count(*) FROM room_task WHERE review = 'accepted' AND status = 'done'"); n != 1 {
		t.Fatal("review not stored")
	}
	// Review of a task that is not done yet is refused.
	open := e.sendTask(t, "later")
	id = open
	if code, _ := review("architect", "reject"); code != http.StatusConflict {
		t.Fatalf("reviewed an open task: %d", code)
	}
	// The response card is in the conversation.
	if !strings.Contains(e.call("architect", e.one, "get_messages", nil).Text, `[task] Responded to \"Summarise escalations\": done.`) {
		t.Fatal("no response card")
	}
}

// TestInboxConcurrent: many get_inbox calls at once never hand the same task out twice
// as pending, and together hand out every task.
func TestInboxConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const tasks = 40
	for range tasks {
		e.insertTask("architect", "peter", "concurrent work")
	}
	sc := e.scope("peter", e.one)
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		wg    sync.WaitGroup
		fails []error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				res, err := e.svc.Inbox(context.Background(), sc, 100)
				mu.Lock()
				if err != nil {
					fails = append(fails, err)
				}
				for _, t := range res.Tasks {
					if t.Status == "pending" {
						seen[t.TaskID]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(fails) > 0 {
		t.Fatal(fails[0])
	}
	if len(seen) != tasks {
		t.Fatalf("%d of %d tasks handed out as pending", len(seen), tasks)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("task %s handed out as pending %d times", id, n)
		}
	}
}

// TestInboxLimitHandsOutOnlyWhatItLists: tasks beyond the limit stay pending for the next
// call instead of silently moving to in progress.
func TestInboxLimitHandsOutOnlyWhatItLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 5 {
		e.insertTask("architect", "peter", "limited")
	}
	seen := map[string]bool{}
	for _, want := range []float64{2, 2, 1} {
		in := e.call("peter", e.one, "get_inbox", map[string]any{"limit": 2}).obj(t)
		if in["pending_tasks"].(float64) != want {
			t.Fatalf("pending_tasks = %v, want %v: %s", in["pending_tasks"], want, fmtJSON(in))
		}
		for _, x := range in["tasks"].([]any) {
			task := x.(map[string]any)
			if task["status"] != "pending" {
				t.Fatalf("a task beyond the last call's limit was moved without being handed out: %v", task)
			}
			seen[str(task, "task_id")] = true
			// Answer it so the next call lists the next ones.
			e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": task["task_id"], "result": "ok", "status": "done"}).obj(t)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("%d of 5 tasks handed out as pending", len(seen))
	}
}

// TestEveryoneInTheRoomSeesTheWholeResult: the contract lets the sender and everyone else
// in the room see a task's response; the conversation's card carries the whole result,
// not an excerpt.
func TestEveryoneInTheRoomSeesTheWholeResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.sendTask(t, "Audit the escalation paths")
	e.call("peter", e.one, "get_inbox", nil)
	result := "Findings: " + strings.Repeat("the timeout path skips the audit log; ", 30) + "END-OF-RESULT"
	if r := e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": id, "result": result, "status": "done"}); r.IsError {
		t.Fatalf("respond: %s", r.Text)
	}
	for _, viewer := range []string{"architect", "peter"} {
		if msgs := e.call(viewer, e.one, "get_messages", nil).Text; !strings.Contains(msgs, "END-OF-RESULT") {
			t.Fatalf("%s does not see the whole result: %s", viewer, msgs)
		}
	}
	// A result at its limit reaches the card whole: the card's prefix came out of the
	// 20,000 characters a room message held, so the result's end was cut.
	id = str(e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": strings.Repeat("Write it all down. ", 10)}).obj(t), "task_id")
	e.call("peter", e.one, "get_inbox", nil)
	long := strings.Repeat("x", rooms.MaxResult-len("END-OF-LONG-RESULT")) + "END-OF-LONG-RESULT"
	if r := e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": id, "result": long, "status": "input_required"}); r.IsError {
		t.Fatalf("a result at its limit: %s", r.Text)
	}
	if msgs := e.call("architect", e.one, "get_messages", map[string]any{"limit": 1}).Text; !strings.Contains(msgs, long+`"`) {
		t.Fatalf("the sender does not see the whole result at its limit: …%s", msgs[max(0, len(msgs)-300):])
	}
}

// TestAnotherCompanysTaskIsAMissingTask: in a room shared by several companies, a task
// between two of them answers a third company's agent exactly like an id that does not
// exist, not with a refusal that confirms it.
func TestAnotherCompanysTaskIsAMissingTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "between Acme and Initech")
	const missing = "0190c7e0-0000-7000-8000-000000000000"
	for _, id := range []string{task, missing} {
		wantError(t, e.call("gavin", e.one, "respond_to_task", map[string]any{"task_id": id, "result": "x", "status": "done"}), "Task not found: "+id)
	}
	// Reviewing the result over HTTP answers the same as a missing task.
	for _, id := range []string{task, missing} {
		code, m := e.postRoute("/api/rooms/"+e.one.String()+"/tasks/"+id+"/accept", e.keys["gavin"], "", []byte(`{}`))
		if code != http.StatusNotFound || m["error"] != "Task not found: "+id {
			t.Fatalf("review of %s by a third company: %d %v", id, code, m)
		}
	}
	// Attaching a file answers the same as a missing task too.
	for _, id := range []string{task, missing} {
		if code, m := e.upload("gavin", id, "x.txt", "text/plain", []byte("x")); code != http.StatusNotFound || m["error"] != "Task not found: "+id {
			t.Fatalf("attachment to %s by a third company: %d %v", id, code, m)
		}
	}
	// The host's other agent is of a company in the task: it is told whose task it is.
	wantError(t, e.call("qa-lead", e.one, "respond_to_task", map[string]any{"task_id": task, "result": "x", "status": "done"}),
		"Task "+task+" is assigned to a different agent: only its recipient can respond to it")
}

// TestInboxListsNewTasksBeforeOlderOpenOnes: with `limit` older tasks still in progress, a
// new task is still handed out, not hidden behind them until they close.
func TestInboxListsNewTasksBeforeOlderOpenOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 2 {
		e.insertTask("architect", "peter", "older work")
	}
	e.call("peter", e.one, "get_inbox", map[string]any{"limit": 2}).obj(t) // both now in progress
	fresh := e.insertTask("architect", "peter", "new work")
	in := e.call("peter", e.one, "get_inbox", map[string]any{"limit": 2}).obj(t)
	tasks := in["tasks"].([]any)
	first := tasks[0].(map[string]any)
	if in["pending_tasks"].(float64) != 1 || str(first, "task_id") != fresh.String() || first["status"] != "pending" {
		t.Fatalf("the new task was not handed out: %s", fmtJSON(in))
	}
	if second := tasks[1].(map[string]any); second["status"] != "in_progress" {
		t.Fatalf("the older tasks should follow, in progress: %s", fmtJSON(in))
	}
}

// TestInboxReportsWhatATaskBecameWhileItWasListed: a pending task answered between
// get_inbox's list and its lock is reported with the status it now has, not as a task
// in progress.
func TestInboxReportsWhatATaskBecameWhileItWasListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.insertTask("architect", "peter", "answered meanwhile")
	ctx := context.Background()
	tx := e.b.Holder(t)
	if _, err := tx.Exec(ctx, "UPDATE room_task SET status = 'done', result = 'already done' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res rooms.InboxResult
		err error
	}
	got := make(chan answer, 1)
	done := make(chan error, 1)
	go func() {
		res, err := e.svc.Inbox(ctx, e.scope("peter", e.one), 10)
		got <- answer{res, err}
		done <- err
	}()
	e.b.AwaitLockWaiter(t, done) // the list saw it pending; the hand-out waits for the answer
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.res.Tasks) != 1 || a.res.Tasks[0].Status != "done" || a.res.Tasks[0].State != "COMPLETED" || *a.res.PendingTasks != 0 {
		t.Fatalf("want the task reported done and nothing handed out: %s", fmtJSON(a.res))
	}
}

// TestSendTaskNamesOwnAgentBySlugOrPart: an agent of the caller's company that is in the
// room under another part name is found by its slug as well as its part, not refused as
// "not a member".
func TestSendTaskNamesOwnAgentBySlugOrPart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec("UPDATE membership SET part = 'qa' WHERE project_id = $1 AND part = 'qa-lead'", e.one)
	for _, name := range []string{"qa", "qa-lead"} {
		r := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": name, "goal": "check it"}).obj(t)
		if r["assigned_to"] != "QA Lead (Acme Corp)" {
			t.Fatalf("%s: %v", name, r)
		}
	}
	// Another company's agent is named by its part in the room: slugs repeat across companies.
	wantErrorPrefix(t, e.call("peter", e.one, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "x"}), `Agent "qa-lead" not found in this project.`)
}

// TestInboxIsBoundedByBytes: 100 tasks whose goal, acceptance criteria and verification
// method hold 5,000 control characters each (six bytes once written) made a 10.5 MB
// get_inbox answer, stored again as its idempotent replay. An answer holds at most
// rooms.MaxInboxBytes of task text as JSON writes it, says so with truncated, and the
// tasks it leaves out are not handed out: the next call lists them as pending.
func TestInboxIsBoundedByBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	goal := strings.Repeat("\x01", rooms.MaxTaskText)
	n := rooms.MaxInboxBytes/text.JSONSize(goal) + 3
	for range n {
		e.insertTask("architect", "peter", goal)
	}
	first := e.call("peter", e.one, "get_inbox", map[string]any{"limit": rooms.MaxInboxLimit}).obj(t)
	tasks := first["tasks"].([]any)
	t.Run("the answer holds at most MaxInboxBytes", func(t *testing.T) {
		size := 0
		for _, x := range tasks {
			size += text.JSONSize(str(x.(map[string]any), "goal"))
		}
		if len(tasks) == 0 || len(tasks) >= n || size > rooms.MaxInboxBytes {
			t.Fatalf("%d of %d tasks, %d bytes of goals", len(tasks), n, size)
		}
	})
	t.Run("the cut answer says truncated", func(t *testing.T) {
		if first["truncated"] != true {
			t.Fatalf("%d of %d tasks and no truncated: %v", len(tasks), n, first["truncated"])
		}
	})
	t.Run("the tasks left out stay pending", func(t *testing.T) {
		if first["pending_tasks"] != float64(len(tasks)) {
			t.Fatalf("pending_tasks %v for %d tasks listed", first["pending_tasks"], len(tasks))
		}
		if c := e.count(`SELECT count(*) FROM room_task WHERE project_id = $1 AND status = 'pending'`, e.one); c != n-len(tasks) {
			t.Fatalf("%d tasks still pending, want the %d left out", c, n-len(tasks))
		}
	})
	t.Run("the next call lists them, whole", func(t *testing.T) {
		for _, x := range tasks { // answered, so the next call lists the rest
			e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": str(x.(map[string]any), "task_id"), "result": "ok", "status": "done"}).obj(t)
		}
		rest := e.call("peter", e.one, "get_inbox", map[string]any{"limit": rooms.MaxInboxLimit}).obj(t)
		if got := len(rest["tasks"].([]any)); got != n-len(tasks) || rest["pending_tasks"] != float64(got) {
			t.Fatalf("the next call: %d tasks, pending_tasks %v; want %d", got, rest["pending_tasks"], n-len(tasks))
		}
		if _, ok := rest["truncated"]; ok {
			t.Fatalf("the rest, which fits, says truncated: %v", rest["truncated"])
		}
	})
}

// TestInboxLimitIsServedWhole: the schema's bound (MaxInboxLimit) and the query's own
// LIMIT (a constant in SQL, so its cached plan serves every call) are two numbers: a
// bound raised alone would let a client ask for more than the query can return, and be
// answered short without a word. Asking for the most lists that many.
func TestInboxLimitIsServedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range rooms.MaxInboxLimit + 1 {
		e.insertTask("architect", "peter", fmt.Sprintf("Task %d", i))
	}
	got := e.call("peter", e.one, "get_inbox", map[string]any{"limit": rooms.MaxInboxLimit}).obj(t)
	if n := len(got["tasks"].([]any)); n != rooms.MaxInboxLimit || got["pending_tasks"] != float64(rooms.MaxInboxLimit) {
		t.Fatalf("limit %d: %d tasks, pending_tasks %v", rooms.MaxInboxLimit, n, got["pending_tasks"])
	}
}
