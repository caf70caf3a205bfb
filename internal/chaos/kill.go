package chaos

import (
	"context"
	"errors"
	"fmt"
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

	retryClient := loadtest.NewClient(4, 30*time.Second, nil)
	defer retryClient.Close()
	var ackedBefore, refusedBefore, lostAnswers, retryAcked, retryRefused, retryFailed int
	refusals := map[string]int{}
	for _, wr := range writes {
		switch wr.state {
		case acked:
			ackedBefore++
			continue
		case refused:
			refusedBefore++
			refusals[wr.detail]++
			continue
		}
		lostAnswers++
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
			retryAcked++
		case refused:
			retryRefused++
			refusals["retry: "+wr.detail]++
		default:
			retryFailed++
		}
	}

	found, err := countMarkers(ctx, b.dbURL, prefix)
	if err != nil {
		return Finding{}, err
	}
	var ackedLost, dups, lostUnacked, dupsOfLostAnswers int
	for _, wr := range writes {
		n := found[storedIn[wr.tool].table][wr.marker]
		switch {
		case wr.state == acked && n == 0:
			ackedLost++
		case wr.state != acked && n == 0 && wr.retried:
			lostUnacked++
		}
		if n > 1 {
			dups++
			if wr.retried {
				dupsOfLostAnswers++
			}
		}
	}
	measured := fmt.Sprintf("%d writes sent (%s) in %d rounds each ended by kill -9 after %v: %d acknowledged, %d refused, %d answers lost; restarts took %s; the %d retried with the same key: %d acknowledged, %d refused, %d failed. In the database: acknowledged writes lost %d, duplicates %d (%d of them from retries), writes neither acknowledged nor stored %d",
		len(writes), toolCounts(writes), o.Kills, o.KillAfter, ackedBefore, refusedBefore, lostAnswers, restartTook,
		lostAnswers, retryAcked, retryRefused, retryFailed, ackedLost, dups, dupsOfLostAnswers, lostUnacked)
	if len(refusals) > 0 {
		measured += "; refusals: " + counts(refusals)
	}
	return Finding{
		Did: fmt.Sprintf("%d connections calling the write tools (%s), each write with an Idempotency-Key and a unique marker; %d times: SIGKILL after %v of writes, restart; then retry every unanswered write",
			o.WriteConns, toolNames(env.WriteTools()), o.Kills, o.KillAfter),
		Measured: measured,
		// A retry refused with "in progress" or "answer lost" is the truthful answer for a
		// write that committed while its answer died with the process: it was applied
		// once, and no retry can replay an answer that was never stored. What must never
		// happen is a write lost, a write stored twice, or a retry that fails outright.
		Target: "acknowledged writes lost 0, duplicates 0, no retry failed (a retry may be told the write was applied but its answer lost)",
		Held:   ackedLost == 0 && dups == 0 && retryFailed == 0 && lostUnacked == 0,
	}, nil
}

// classify sorts a call's outcome: acknowledged, refused by an answer, or unanswered.
func classify(err error) (writeState, string) {
	if err == nil {
		return acked, ""
	}
	var ce *loadtest.CallError
	if errors.As(err, &ce) {
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
		rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT substring(%s from $1), count(*) FROM %s WHERE %s LIKE $2 GROUP BY 1`,
			col, pgx.Identifier{st.table}.Sanitize(), col), prefix+`[0-9]+-[0-9]+-[0-9]+`, "%"+prefix+"%")
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

func toolNames(ts []loadtest.WriteTool) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// writeUntilKilled runs the write tools from conns workers, kills the server with SIGKILL
// after d, and returns every write it attempted with what became of it.
func writeUntilKilled(ctx context.Context, env *loadtest.Env, srv *loadtest.Server, conns int, d time.Duration, prefix string) ([]*write, error) {
	tools := env.WriteTools()
	var killed atomic.Bool
	perWorker := make([][]*write, conns)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for seq := 0; !killed.Load() && ctx.Err() == nil; seq++ {
				t := tools[(w+seq)%len(tools)]
				marker := fmt.Sprintf("%s%d-%d", prefix, w, seq)
				c := t.Build(w, seq, marker+" was written by the kill -9 test")
				c.IdempotencyKey = uuid.NewString()
				wr := &write{tool: t.Name, marker: marker, call: c}
				_, err := env.Client.Do(ctx, c)
				wr.state, wr.detail = classify(err)
				perWorker[w] = append(perWorker[w], wr)
			}
		})
	}
	time.Sleep(d)
	killed.Store(true)
	err := srv.Kill()
	wg.Wait()
	var out []*write
	for _, ws := range perWorker {
		out = append(out, ws...)
	}
	return out, err
}
