package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/loadtest"
)

// storedIn is where each write tool's text lands, to find its marker afterwards.
var storedIn = map[string]struct{ table, column string }{
	"send":         {"message", "body"},
	"send to many": {"message", "body"},
	"reply":        {"message", "body"},
	"post_message": {"room_message", "content"},
	"write_memory": {"memory_entry", "content"},
	"send_task":    {"room_task", "goal"},
	"learn":        {"knowledge", "body"},
	// The response's card carries the whole result (and, before it, an excerpt of the
	// task's goal, with send_task's marker: countMarkers reads every marker of a row). A
	// response applied twice would post two cards; the task row holds one result.
	loadtest.RespondTool: {"room_message", "content"},
}

// retryAttempts bounds the retries of one write whose answer was lost.
const retryAttempts = 3

type writeState int

const (
	unanswered writeState = iota // no HTTP answer: the server died with the call in flight
	acked                        // a success answer
	refused                      // an answer that is an error: nothing to retry
)

// write is one write call with its unique marker.
type write struct {
	tool    string
	marker  string
	call    loadtest.Call // with its Idempotency-Key: a retry sends exactly this again
	state   writeState
	retried bool
	detail  string // the refusal, when refused

	start, end time.Time // of the first attempt
	conns      int       // connections the first attempt went on (two: the client replayed it)
}

// killUnderWrites runs the write tools from WriteConns connections, every write with its
// own Idempotency-Key and a unique marker in its text, kills the server with SIGKILL
// mid-load and starts it again, Kills times; then it retries every write whose answer was
// lost with the same key and body, and counts the markers in the database.
func killUnderWrites(ctx context.Context, b *bench, _ *loadtest.Server) (Finding, error) {
	o := b.o
	srv, err := b.startServer(ctx, "e-kill-9")
	if err != nil {
		return Finding{}, err
	}
	env, err := b.env(srv, o.WriteConns, 30*time.Second)
	if err != nil {
		return Finding{}, errors.Join(err, srv.Kill())
	}
	if err := env.Prepare(ctx, o.WriteConns); err != nil {
		return Finding{}, errors.Join(err, srv.Kill())
	}
	run := time.Now().UnixMilli() % 1_000_000_000
	prefix := fmt.Sprintf("zqmark-%d-", run)

	// Each round: writes for KillAfter, SIGKILL, restart on the same address. The retries
	// come after the last round, all against the last server.
	var writes []*write
	var restarts []string
	for round := range o.Kills {
		env.Client = loadtest.NewClient(o.WriteConns, 30*time.Second, nil)
		ws, err := writeUntilKilled(ctx, env, srv, o.WriteConns, o.KillAfter, fmt.Sprintf("%s%d-", prefix, round))
		env.Client.Close()
		if err != nil {
			return Finding{}, err
		}
		writes = append(writes, ws...)
		t0 := time.Now()
		if srv, err = loadtest.StartServer(ctx, srv.Opts()); err != nil {
			return Finding{}, fmt.Errorf("restart after kill -9: %w", err)
		}
		restarts = append(restarts, time.Since(t0).Round(100*time.Millisecond).String())
	}
	defer b.stopServer(srv)
	restartTook := strings.Join(restarts, ", ")

	rs := retryLost(ctx, writes)
	found, err := countMarkers(ctx, b.dbURL, prefix)
	if err != nil {
		return Finding{}, err
	}
	au := audit(found, writes)
	measured := fmt.Sprintf("%d writes sent (%s) in %d rounds each ended by kill -9 after %v: %d acknowledged, %d refused, %d answers lost; restarts took %s; the %d retried with the same key: %d acknowledged, %d refused, %d failed. In the database: acknowledged writes lost %d, duplicates %d (%d of them from retries), writes neither acknowledged nor stored %d",
		len(writes), toolCounts(writes), o.Kills, o.KillAfter, rs.ackedBefore, rs.refusedBefore, rs.lost, restartTook,
		rs.lost, rs.acked, rs.refused, rs.failed, au.ackedLost, au.dups, au.dupsOfRetries, au.lostUnacked)
	if len(rs.refusals) > 0 {
		measured += "; refusals: " + counts(rs.refusals)
	}
	return Finding{
		Did: fmt.Sprintf("%d connections calling the write tools (%s), each write with an Idempotency-Key and a unique marker; %d times: SIGKILL after %v of writes, restart; then retry every unanswered write",
			o.WriteConns, toolNames(writeTools(env)), o.Kills, o.KillAfter),
		Measured: measured,
		// A retry refused with "in progress" or "answer lost" is the truthful answer for a
		// write that committed while its answer died with the process: it was applied
		// once, and no retry can replay an answer that was never stored. What must never
		// happen is a write lost, a write stored twice, or a retry that fails outright.
		Target: "acknowledged writes lost 0, duplicates 0, no retry failed (a retry may be told the write was applied but its answer lost)",
		Held:   au.holds() && rs.failed == 0,
	}, nil
}

// retryStats are the outcomes of the writes before and after their retries.
type retryStats struct {
	ackedBefore, refusedBefore int            // answered the first time
	lost                       int            // answers lost, hence retried
	acked, refused, failed     int            // what the retries got
	refusals                   map[string]int // every refusal, first attempt or retry
}

// retryLost sends every write whose answer was lost again, with the same key and body
// (up to retryAttempts times), and counts the outcomes.
func retryLost(ctx context.Context, writes []*write) retryStats {
	retryClient := loadtest.NewClient(4, 30*time.Second, nil)
	defer retryClient.Close()
	rs := retryStats{refusals: map[string]int{}}
	for _, wr := range writes {
		switch wr.state {
		case acked:
			rs.ackedBefore++
			continue
		case refused:
			rs.refusedBefore++
			rs.refusals[wr.detail]++
			continue
		}
		rs.lost++
		wr.retried = true
		for attempt := range retryAttempts {
			_, err := retryClient.Do(ctx, wr.call)
			wr.state, wr.detail = classify(err)
			if wr.state != unanswered || attempt == retryAttempts-1 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		switch wr.state {
		case acked:
			rs.acked++
		case refused:
			rs.refused++
			rs.refusals["retry: "+wr.detail]++
		default:
			rs.failed++
		}
	}
	return rs
}

// auditResult is what the database says of the writes.
type auditResult struct {
	ackedLost     int // acknowledged, and no row
	dups          int // markers with more than one row
	dupsOfRetries int // of those, writes that were retried
	lostUnacked   int // retried, never acknowledged, and no row
}

func (a auditResult) holds() bool { return a.ackedLost == 0 && a.dups == 0 && a.lostUnacked == 0 }

// audit compares the writes with the rows found holding their markers.
func audit(found map[string]map[string]int, writes []*write) auditResult {
	var a auditResult
	for _, wr := range writes {
		n := found[storedIn[wr.tool].table][wr.marker]
		switch {
		case wr.state == acked && n == 0:
			a.ackedLost++
		case wr.state != acked && n == 0 && wr.retried:
			a.lostUnacked++
		}
		if n > 1 {
			a.dups++
			if wr.retried {
				a.dupsOfRetries++
			}
		}
	}
	return a
}

// classify sorts a call's outcome: acknowledged, refused by an answer, or unanswered. A
// balancer's gateway error (HTTP 502, 503 or 504 with no JSON-RPC message: the server
// never answered, HAProxy did) is an answer lost, not a refusal: the write may have
// committed on the replica that died, and only a retry with its key can tell.
func classify(err error) (writeState, string) {
	if err == nil {
		return acked, ""
	}
	var ce *loadtest.CallError
	if errors.As(err, &ce) {
		if ce.Code == 0 && ce.Status >= http.StatusBadGateway && ce.Status <= http.StatusGatewayTimeout && !strings.HasPrefix(ce.Msg, "{") {
			return unanswered, fmt.Sprintf("HTTP %d from the balancer", ce.Status)
		}
		return refused, describe(err)
	}
	return unanswered, err.Error()
}

// countMarkers counts, per table, the rows holding each marker that starts with prefix.
func countMarkers(ctx context.Context, dbURL, prefix string) (map[string]map[string]int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	out := map[string]map[string]int{}
	seen := map[string]bool{}
	for _, st := range storedIn {
		if seen[st.table] {
			continue
		}
		seen[st.table] = true
		col := pgx.Identifier{st.column}.Sanitize()
		rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT m[1], count(*) FROM %s, regexp_matches(%s, $1, 'g') m WHERE %s LIKE $2 GROUP BY 1`,
			pgx.Identifier{st.table}.Sanitize(), col, col), "("+prefix+`[0-9]+-[0-9]+-[0-9]+)`, "%"+prefix+"%")
		if err != nil {
			return nil, fmt.Errorf("count markers in %s: %w", st.table, err)
		}
		m := map[string]int{}
		for rows.Next() {
			var marker string
			var n int
			if err := rows.Scan(&marker, &n); err != nil {
				rows.Close()
				return nil, err
			}
			m[marker] = n
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out[st.table] = m
	}
	return out, nil
}

func toolCounts(ws []*write) string {
	m := map[string]int{}
	for _, w := range ws {
		m[w.tool]++
	}
	return counts(m)
}

func toolNames(ts []killWriteTool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// writeUntilKilled runs the write tools from conns workers, kills the server with SIGKILL
// after d, and returns every write it attempted with what became of it.
func writeUntilKilled(ctx context.Context, env *loadtest.Env, srv *loadtest.Server, conns int, d time.Duration, prefix string) ([]*write, error) {
	ws := startWriters(ctx, env, conns, prefix)
	time.Sleep(d)
	ws.halt()
	err := srv.Kill()
	return ws.wait(), err
}

// writers are workers calling the write tools in turn until halted, every write with its
// own Idempotency-Key and a unique marker (prefix, worker, sequence) in its text.
type writers struct {
	halted    atomic.Bool
	perWorker [][]*write
	wg        sync.WaitGroup
}

func startWriters(ctx context.Context, env *loadtest.Env, conns int, prefix string) *writers {
	tools := writeTools(env)
	ws := &writers{perWorker: make([][]*write, conns)}
	for w := range conns {
		ws.wg.Go(func() {
			for seq := 0; !ws.halted.Load() && ctx.Err() == nil; seq++ {
				t := tools[(w+seq)%len(tools)]
				marker := fmt.Sprintf("%s%d-%d", prefix, w, seq)
				c, ok := t.Build(w, seq, marker+" was written by the kill -9 test")
				if !ok {
					continue // respond_to_task with no task waiting: the next tool
				}
				c.IdempotencyKey = uuid.NewString()
				wr := &write{tool: t.Name, marker: marker, call: c, start: time.Now()}
				// Go's HTTP client sends a request that carries an Idempotency-Key again
				// by itself when the reused connection it went on closes with no answer:
				// a second connection for one call is that replay.
				traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { wr.conns++ }})
				a, err := env.Client.Do(traced, c)
				wr.end = time.Now()
				wr.state, wr.detail = classify(err)
				if id := a.Field("task_id"); wr.state == acked && t.Name == "send_task" && id != "" {
					env.QueueTask(id) // a later respond_to_task answers it
				}
				ws.perWorker[w] = append(ws.perWorker[w], wr)
			}
		})
	}
	return ws
}

// killWriteTool is one tool of the writers' rotation. Build reports false when the tool
// has nothing to write to (respond_to_task before any task was acknowledged).
type killWriteTool struct {
	Name  string
	Build func(worker, seq int, text string) (loadtest.Call, bool)
}

// writeTools are the load test's write tools and respond_to_task, which answers (as the
// tasks' recipient) a task an acknowledged send_task of this attack created, each once.
func writeTools(env *loadtest.Env) []killWriteTool {
	var out []killWriteTool
	for _, t := range env.WriteTools() {
		out = append(out, killWriteTool{t.Name, func(w, seq int, text string) (loadtest.Call, bool) { return t.Build(w, seq, text), true }})
	}
	return append(out, killWriteTool{loadtest.RespondTool, func(_, _ int, text string) (loadtest.Call, bool) {
		id, ok := env.NextTask()
		if !ok {
			return loadtest.Call{}, false
		}
		return env.Respond(id, text), true
	}})
}

// halt tells the workers to start no more writes.
func (ws *writers) halt() { ws.halted.Store(true) }

// wait halts the workers, waits for their last calls and returns every write.
func (ws *writers) wait() []*write {
	ws.halt()
	ws.wg.Wait()
	var out []*write
	for _, w := range ws.perWorker {
		out = append(out, w...)
	}
	return out
}
