package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/status"
)

// The demo parts the calls are made as (deploy/demo.yaml): the host's main agent calls,
// a second host part receives, the guest company's part has an empty task inbox.
const (
	CallerPart    = "architect"
	RecipientPart = "backend"
	GuestPart     = "qa-lead"
	HostOrg       = "acme"
)

// Env is a running server with the demo fixture, ready for calls.
type Env struct {
	Client *Client
	Base   string
	F      Fixture

	inboxThread  string   // a thread in the caller's inbox (show reads it)
	replyThreads []string // one thread per worker, for reply
	tasks        taskQueue
}

// taskQueue hands the tasks send_task created to respond_to_task, each once.
type taskQueue struct {
	mu  sync.Mutex
	ids []string
}

func (q *taskQueue) push(id string) {
	q.mu.Lock()
	q.ids = append(q.ids, id)
	q.mu.Unlock()
}

func (q *taskQueue) pop() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ids) == 0 {
		return "", false
	}
	id := q.ids[len(q.ids)-1]
	q.ids = q.ids[:len(q.ids)-1]
	return id, true
}

// preparedMessages is how many threads and room messages Prepare creates for the reads.
const preparedMessages = 20

// NewEnv checks that the fixture has the parts the calls use.
func NewEnv(client *Client, base string, f Fixture) (*Env, error) {
	for _, p := range []string{CallerPart, RecipientPart, GuestPart} {
		if f.PartKey(p) == "" {
			return nil, fmt.Errorf("the demo file's first project has no part %q with a key: the load calls need %s, %s and %s", p, CallerPart, RecipientPart, GuestPart)
		}
	}
	if _, ok := f.Result.Organisations[HostOrg]; !ok {
		return nil, fmt.Errorf("the demo file has no organisation %q", HostOrg)
	}
	return &Env{Client: client, Base: base, F: f}, nil
}

// Prepare makes what the reads read, through the API: threads in the caller's inbox, room
// messages, and one thread per worker for reply.
func (e *Env) Prepare(ctx context.Context, conns int) error {
	for i := range preparedMessages {
		a, err := e.Client.Do(ctx, e.Threads(RecipientPart, "send", map[string]any{
			"to": []string{CallerPart}, "subject": fmt.Sprintf("Status %d", i), "body": "prepared for the inbox reads: " + sentence(seeded(0, i), 12),
		}))
		if err != nil {
			return fmt.Errorf("prepare inbox: %w", err)
		}
		e.inboxThread = a.Field("threadId")
		if _, err := e.Client.Do(ctx, e.Room(CallerPart, "post_message", map[string]any{"content": "prepared: " + sentence(seeded(1, i), 10)})); err != nil {
			return fmt.Errorf("prepare room messages: %w", err)
		}
	}
	for w := range conns {
		a, err := e.Client.Do(ctx, e.Threads(CallerPart, "send", map[string]any{
			"to": []string{RecipientPart}, "subject": fmt.Sprintf("Worker %d", w), "body": "the thread worker " + fmt.Sprint(w) + " replies in",
		}))
		if err != nil {
			return fmt.Errorf("prepare reply threads: %w", err)
		}
		e.replyThreads = append(e.replyThreads, a.Field("threadId"))
	}
	if e.inboxThread == "" || len(e.replyThreads) != conns || e.replyThreads[0] == "" {
		return fmt.Errorf("send answered without a threadId")
	}
	return nil
}

// seeded is a generator of its own per worker and call: no lock shared between workers,
// and the same texts on every run.
func seeded(w uint64, seq int) *rand.Rand { return rand.New(rand.NewPCG(w, uint64(seq))) }

// Threads is a tools/call on a part's threads endpoint, with that part's key.
func (e *Env) Threads(part, tool string, args any) Call {
	return Call{URL: e.F.ThreadsURL(e.Base, part), Key: e.F.PartKey(part), Tool: tool, Args: args}
}

// Room is a tools/call on the project's room endpoint, with a part's agent's key.
func (e *Env) Room(part, tool string, args any) Call {
	return Call{URL: e.F.RoomURL(e.Base), Key: e.F.PartKey(part), Tool: tool, Args: args}
}

// Scenario is one row of the load table.
type Scenario struct {
	Name  string
	Class Class
	Note  string
	Call  CallFunc
}

// Repeat turns a fixed call into a CallFunc.
func (e *Env) Repeat(c Call) CallFunc {
	return func(ctx context.Context, _, _ int) error {
		_, err := e.Client.Do(ctx, c)
		return err
	}
}

// ReferenceScenarios are the calls that are no tool, measured beside the tools so that
// a tool row's gap to the raw loop can be split: what the server's HTTP stack costs alone
// (its liveness route: the request middleware, no JSON-RPC, no credential, no database),
// and what a JSON-RPC message with the caller's key costs when it runs no tool (ping: the
// MCP handler and the key's check in the database, which every message makes).
func (e *Env) ReferenceScenarios() []Scenario {
	live := e.Base + status.PathLive
	return []Scenario{
		{"http floor", ClassReference, "GET " + status.PathLive, func(ctx context.Context, _, _ int) error { return e.Client.Get(ctx, live) }},
		{"ping", ClassReference, "threads, JSON-RPC ping with the caller's key", e.Repeat(Call{URL: e.F.ThreadsURL(e.Base, CallerPart), Key: e.F.PartKey(CallerPart), Method: "ping"})},
	}
}

// ReadScenarios are the read tools, in table order.
func (e *Env) ReadScenarios() []Scenario {
	recall := func(ctx context.Context, w, seq int) error {
		_, err := e.Client.Do(ctx, e.Threads(CallerPart, "recall", map[string]any{"query": searchQueries[(w+seq)%len(searchQueries)]}))
		return err
	}
	readMemory := func(ctx context.Context, w, seq int) error {
		_, err := e.Client.Do(ctx, e.Room(CallerPart, "read_memory", map[string]any{"query": searchQueries[(w+seq)%len(searchQueries)]}))
		return err
	}
	return []Scenario{
		{"whoami", ClassRead, "threads", e.Repeat(e.Threads(CallerPart, "whoami", nil))},
		{"roster", ClassRead, "threads", e.Repeat(e.Threads(CallerPart, "roster", nil))},
		{"inbox", ClassRead, "threads, 20 threads", e.Repeat(e.Threads(CallerPart, "inbox", nil))},
		{"show", ClassRead, "threads", e.Repeat(e.Threads(CallerPart, "show", map[string]any{"threadId": e.inboxThread}))},
		{"threads", ClassRead, "threads", e.Repeat(e.Threads(CallerPart, "threads", nil))},
		{"get_messages", ClassRead, "room", e.Repeat(e.Room(CallerPart, "get_messages", nil))},
		{"list_rooms", ClassRead, "all rooms", e.Repeat(Call{URL: AllRoomsURL(e.Base), Key: e.F.PartKey(CallerPart), Tool: "list_rooms"})},
		{"get_inbox", ClassRead, "room, empty inbox", e.Repeat(e.Room(GuestPart, "get_inbox", nil))},
		{"recall", ClassSearch, "threads", recall},
		{"read_memory", ClassSearch, "room", readMemory},
	}
}

// WriteTool is one write tool whose stored text the caller chooses (so that chaos can put
// a unique marker in it and find it in the database afterwards).
type WriteTool struct {
	Name  string
	Note  string
	Build func(worker, seq int, text string) Call
}

// WriteTools are the write tools whose every call stands on its own, in table order.
// respond_to_task is not among them: each of its calls consumes a task (WriteScenarios).
func (e *Env) WriteTools() []WriteTool {
	return []WriteTool{
		{"send", "threads, 32 senders to one recipient", func(_, seq int, text string) Call {
			return e.Threads(CallerPart, "send", map[string]any{"to": []string{RecipientPart}, "subject": fmt.Sprintf("Load %d", seq), "body": text})
		}},
		{"send to many", "threads, two recipients", func(_, seq int, text string) Call {
			return e.Threads(CallerPart, "send", map[string]any{"to": []string{RecipientPart, GuestPart}, "subject": fmt.Sprintf("Load %d", seq), "body": text})
		}},
		{"reply", "threads, one thread per worker, same recipient", func(w, _ int, text string) Call {
			return e.Threads(CallerPart, "reply", map[string]any{"threadId": e.replyThreads[w%len(e.replyThreads)], "body": text})
		}},
		{"post_message", "room", func(_, _ int, text string) Call {
			return e.Room(CallerPart, "post_message", map[string]any{"content": text})
		}},
		{"write_memory", "room", func(_, _ int, text string) Call {
			return e.Room(CallerPart, "write_memory", map[string]any{"content": text})
		}},
		{"send_task", "room, to one recipient", func(_, _ int, text string) Call {
			return e.Room(CallerPart, "send_task", map[string]any{"to_agent_slug": RecipientPart, "goal": text})
		}},
		// A varied title: "Lesson <n>" made every title trigram-close to every other, so
		// the near-duplicate check compared each lesson with all earlier ones.
		{"learn", "threads", func(w, seq int, text string) Call {
			return e.Threads(CallerPart, "learn", map[string]any{"title": sentence(seeded(uint64(w)+200, seq), 6), "body": text, "kind": "fact"})
		}},
	}
}

// RespondTool is respond_to_task's name in the tables: the recipient of send_task's tasks
// answering one of them (Respond).
const RespondTool = "respond_to_task"

// Respond is respond_to_task's call: RecipientPart, to whom send_task sends, marks task
// id done with text as its result.
func (e *Env) Respond(taskID, text string) Call {
	return e.Room(RecipientPart, RespondTool, map[string]any{"task_id": taskID, "status": "done", "result": text})
}

// QueueTask keeps a task send_task created for one later Respond.
func (e *Env) QueueTask(id string) { e.tasks.push(id) }

// NextTask takes a queued task, each once; false when none is waiting.
func (e *Env) NextTask() (string, bool) { return e.tasks.pop() }

// writeText is a varied text, so that no de-duplication or cache makes a write cheaper.
func writeText(w, seq int) string {
	return fmt.Sprintf("load %d-%d: %s", w, seq, sentence(seeded(uint64(w)+100, seq), 14))
}

// WriteScenarios are the write tools, every call with its own Idempotency-Key (a server
// that does not know the header ignores it). send_task's tasks feed respond_to_task,
// which therefore comes right after it and stops when every task is answered.
func (e *Env) WriteScenarios() []Scenario {
	var out []Scenario
	for _, t := range e.WriteTools() {
		call := func(ctx context.Context, w, seq int) error {
			c := t.Build(w, seq, writeText(w, seq))
			c.IdempotencyKey = uuid.NewString()
			a, err := e.Client.Do(ctx, c)
			if err == nil && t.Name == "send_task" {
				id := a.Field("task_id")
				if id == "" {
					return fmt.Errorf("send_task answered without a task_id: %s", clip(a.Text()))
				}
				e.QueueTask(id)
			}
			return err
		}
		out = append(out, Scenario{Name: t.Name, Class: ClassWrite, Note: t.Note, Call: call})
		if t.Name == "send_task" {
			out = append(out, Scenario{Name: RespondTool, Class: ClassWrite, Note: "room, each task once", Call: func(ctx context.Context, w, seq int) error {
				id, ok := e.NextTask()
				if !ok {
					return ErrExhausted
				}
				c := e.Respond(id, writeText(w, seq))
				c.IdempotencyKey = uuid.NewString()
				_, err := e.Client.Do(ctx, c)
				return err
			}})
		}
	}
	return out
}
