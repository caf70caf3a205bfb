package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/loadtest"
)

// lockedTableName is the table held locked: the one post_message writes.
const lockedTableName = "room_message"

// lockedTable holds an ACCESS EXCLUSIVE lock on room_message for LockHold while
// LockedCalls post_message calls wait behind it, and meanwhile calls threads roster (which
// never touches that table) in a loop and asks /readyz.
func lockedTable(ctx context.Context, b *bench, srv *loadtest.Server) (Finding, error) {
	o := b.o
	timeout := o.LockHold + 30*time.Second
	env, err := b.env(srv, o.LockedCalls+1, timeout)
	if err != nil {
		return Finding{}, err
	}
	defer env.Client.Close()
	// Warm the server's pool first, as a server that has been up a while would be.
	for range 3 {
		if _, err := env.Client.Do(ctx, env.Room(loadtest.CallerPart, "get_messages", nil)); err != nil {
			return Finding{}, fmt.Errorf("warm-up: %w", err)
		}
	}

	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return Finding{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Finding{}, err
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+lockedTableName+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return Finding{}, errors.Join(err, tx.Rollback(ctx))
	}

	type outcome struct {
		took time.Duration
		what string
	}
	blocked := make([]outcome, o.LockedCalls)
	var wg sync.WaitGroup
	for i := range o.LockedCalls {
		wg.Go(func() {
			t0 := time.Now()
			_, err := env.Client.Do(ctx, env.Room(loadtest.CallerPart, "post_message", map[string]any{"content": fmt.Sprintf("written behind a locked table, call %d", i)}))
			blocked[i] = outcome{time.Since(t0), describe(err)}
		})
	}
	// The unrelated calls run on their own: one that hangs must not keep the lock held.
	var unrelated []outcome
	readyz := map[string]int{}
	var released atomic.Bool
	var side sync.WaitGroup
	side.Go(func() {
		for !released.Load() && ctx.Err() == nil {
			t0 := time.Now()
			_, err := env.Client.Do(ctx, env.Threads(loadtest.CallerPart, "roster", nil))
			unrelated = append(unrelated, outcome{time.Since(t0), describe(err)})
			readyz[readyzState(ctx, srv.Base)]++
			time.Sleep(200 * time.Millisecond)
		}
	})
	select {
	case <-ctx.Done():
	case <-time.After(o.LockHold):
	}
	released.Store(true)
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
		return Finding{}, fmt.Errorf("release the lock: %w", err)
	}
	side.Wait()
	wg.Wait()

	slowest, within := time.Duration(0), 0
	kinds := map[string]int{}
	for _, c := range blocked {
		slowest = max(slowest, c.took)
		if c.took <= o.Deadline {
			within++
		}
		kinds[c.what]++
	}
	uSlowest, uFailed := time.Duration(0), 0
	uKinds := map[string]int{}
	for _, c := range unrelated {
		uSlowest = max(uSlowest, c.took)
		if c.what != "ok" {
			uFailed++
		}
		uKinds[c.what]++
	}
	return Finding{
		Did: fmt.Sprintf("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE held %v; %d concurrent post_message calls behind it; threads roster called in a loop meanwhile",
			lockedTableName, o.LockHold, o.LockedCalls),
		Measured: fmt.Sprintf("blocked post_message: %d of %d answered within %v, slowest %v; answers %s. Unrelated roster calls: %d made, %d failed, slowest %v (%s); /readyz during: %s",
			within, o.LockedCalls, o.Deadline, slowest.Round(10*time.Millisecond), counts(kinds), len(unrelated), uFailed, uSlowest.Round(10*time.Millisecond), counts(uKinds), counts(readyz)),
		Target: fmt.Sprintf("every blocked call answers within %v (statement timeout + 1 s; a retryable error with Retry-After), every unrelated call succeeds within it", o.Deadline),
		Held:   within == o.LockedCalls && uFailed == 0 && uSlowest <= o.Deadline && len(unrelated) > 0,
	}, nil
}

// describe names a call's outcome for the report: ok, or the status, JSON-RPC code and
// whether a Retry-After came with it.
func describe(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *loadtest.CallError
	if errors.As(err, &ce) {
		s := fmt.Sprintf("HTTP %d", ce.Status)
		if ce.Code != 0 {
			s += fmt.Sprintf(" %d", ce.Code)
		}
		if msg := firstWords(ce.Msg, 6); msg != "" {
			s += " “" + msg + "”"
		}
		if ce.RetryAfter != "" {
			s += " Retry-After " + ce.RetryAfter
		}
		return s
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
		return "client timeout"
	}
	return "transport error"
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = append(f[:n], "…")
	}
	return strings.Join(f, " ")
}

// counts prints a tally as "n × what", largest first.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d × %s", m[k], k)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// readyzState asks /readyz once: its status and the first words of its answer.
func readyzState(ctx context.Context, base string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return "bad request"
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "no answer within 2 s"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 200))
	if err != nil {
		return fmt.Sprintf("%d (answer cut)", resp.StatusCode)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, firstWords(string(body), 8))
}
