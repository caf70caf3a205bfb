package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// helperServeEnv makes TestHelperServeProcess serve the database it names: the kill -9
// test runs the service in a child process (this test binary) it can kill.
const helperServeEnv = "RELAYROOM_TEST_HELPER_SERVE_DB"

// TestHelperServeProcess is not a test: run by TestKillNineLosesNoAcknowledgedWrite as a
// child process, it serves until it is killed.
func TestHelperServeProcess(t *testing.T) {
	u := os.Getenv(helperServeEnv)
	if u == "" {
		t.Skip("the service process of TestKillNineLosesNoAcknowledgedWrite")
	}
	cfg := config.Config{DatabaseURL: u, Addr: "127.0.0.1:0", LogLevel: "warn", ShutdownTimeout: time.Second,
		StatementTimeout: testfix.StatementTimeout(t), MaxConns: 8, MaxBodyBytes: 4 << 20}
	err := app.Run(context.Background(), cfg, app.NewLogger(os.Stderr, "warn"), func(base string) { fmt.Println("READY " + base) })
	t.Fatalf("serve: %v", err)
}

// startChild runs the service in a child process on the database u and returns its base
// URL and the process.
func startChild(t *testing.T, u string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperServeEnv+"="+u)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if base, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- base
			}
		}
	}()
	select {
	case base := <-ready:
		return base, cmd
	case <-time.After(60 * time.Second):
		t.Fatal("the service process did not start")
	}
	return "", nil
}

// k9Request is one keyed write of the kill -9 test and what its client saw.
type k9Request struct {
	key, content string
	answer       json.RawMessage // the result, when the client got one before the kill
}

// TestKillNineLosesNoAcknowledgedWrite kills the service with SIGKILL while clients write
// with Idempotency-Keys, restarts it on the same database, and retries every request with
// its key: each request is then applied exactly once, every answer a client got before the
// kill is still true, and a retry never writes twice.
func TestKillNineLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	u, res := seedDemo(t, nil)
	base, child := startChild(t, u)
	roomPath := "/api/mcp/p/" + res.Projects["escalations"].ID.String()
	key := res.Agents["acme/backend"].Key
	client := &http.Client{Timeout: 10 * time.Second}

	var (
		mu       sync.Mutex
		requests []*k9Request
		acked    int
	)
	killed := make(chan struct{})
	enoughAcked := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounded: at most 200 requests per worker, and none after the kill.
			for i := 0; i < 200; i++ {
				select {
				case <-killed:
					return
				default:
				}
				r := &k9Request{key: uuid.NewString()}
				r.content = "k9 " + r.key
				mu.Lock()
				requests = append(requests, r)
				mu.Unlock()
				a, err := postKeyed(client, base+roomPath, key, r.key, r.content)
				if errors.Is(err, errRetryLater) {
					// "Retry shortly" acknowledges nothing: the request is retried with its
					// key after the restart like every other unacknowledged one.
					continue
				}
				if err != nil {
					return // the server is gone: this request's answer is lost
				}
				mu.Lock()
				r.answer = a
				acked++
				if acked >= 60 {
					once.Do(func() { close(enoughAcked) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enoughAcked:
	case <-time.After(60 * time.Second):
		t.Fatal("the writers made no progress")
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL: no shutdown, no flush
		t.Fatal(err)
	}
	close(killed)
	wg.Wait()
	_ = child.Wait()

	restarted := time.Now()
	base, _ = startChild(t, u)
	f := &idemFixture{db: openDB(t, u)}
	var replayed, appliedOnRetry, lostAnswer int
	for _, r := range requests {
		for try := 0; ; try++ {
			a, err := postKeyed(client, base+roomPath, key, r.key, r.content)
			for waited := 0; errors.Is(err, errRetryLater) && waited < 30; waited++ {
				// 503 "retry shortly": the restarted server's database was not ready yet
				// on a busy machine. A client retries after a moment, and so does this
				// one, a bounded number of times.
				time.Sleep(time.Second)
				a, err = postKeyed(client, base+roomPath, key, r.key, r.content)
			}
			if err != nil {
				t.Fatalf("retry after restart: %v", err)
			}
			text := resultText(t, a)
			switch {
			case strings.Contains(text, "still in progress") && try == 0:
				// Killed between its COMMIT and storing its answer: after the in-progress
				// window the retry says so. Let the window pass.
				f.exec(t, "UPDATE idempotency_key SET created_at = now() - interval '1 minute' WHERE key = $1", r.key)
				continue
			case strings.Contains(text, "answer was lost"):
				lostAnswer++
			case strings.HasPrefix(text, "Error:"):
				t.Fatalf("retry of %s: %s", r.key, text)
			case r.answer != nil:
				if string(a) != string(r.answer) {
					t.Fatalf("the retry of an acknowledged write answered differently:\n%s\n%s", r.answer, a)
				}
				replayed++
			case f.count(t, "SELECT count(*) FROM idempotency_key WHERE key = $1 AND answered_at < $2", r.key, restarted) > 0:
				replayed++ // committed and answered before the kill; the answer was lost in transit
			default:
				appliedOnRetry++ // it never committed before the kill
			}
			break
		}
		if n := f.count(t, "SELECT count(*) FROM room_message WHERE content = $1", r.content); n != 1 {
			t.Fatalf("request %s is stored %d times after its retry (acknowledged before the kill: %v)", r.key, n, r.answer != nil)
		}
	}
	t.Logf("kill -9 under writes: %d requests, %d acknowledged before the kill, after restart %d replayed, %d applied on retry, %d answered \"applied, answer lost\"; 0 lost, 0 duplicated",
		len(requests), acked, replayed, appliedOnRetry, lostAnswer)
}

// errRetryLater is a 503 answer, or a tool's "database unavailable" error: the service
// asks the client to retry shortly, and applied nothing.
var errRetryLater = errors.New("the service asked to retry shortly")

// postKeyed posts a room message, with an Idempotency-Key when idemKey is set, and
// returns the result.
func postKeyed(c *http.Client, url, agentKey, idemKey, content string) (json.RawMessage, error) {
	return callKeyed(c, url, agentKey, idemKey, "post_message", map[string]any{"content": content})
}

// callKeyed sends one tools/call with a new JSON-RPC id, with an Idempotency-Key when
// idemKey is set, and returns the JSON-RPC result as sent.
func callKeyed(c *http.Client, url, agentKey, idemKey, tool string, args map[string]any) (json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcID.Add(1), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agent-Key", agentKey)
	if idemKey != "" {
		req.Header.Set(mcp.HeaderIdempotencyKey, idemKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return nil, fmt.Errorf("%s: HTTP %d: %s: %w", tool, resp.StatusCode, b, errRetryLater)
	}
	if err := json.Unmarshal(b, &env); err != nil || resp.StatusCode != http.StatusOK || env.Result == nil {
		return nil, fmt.Errorf("%s: HTTP %d: %s", tool, resp.StatusCode, b)
	}
	// A tool that missed its database budget (a loaded machine) answers a tool error
	// that says to retry; it is no answer to the write.
	var res struct {
		IsError bool                    `json:"isError"`
		Content []struct{ Text string } `json:"content"`
	}
	if json.Unmarshal(env.Result, &res) == nil && res.IsError && len(res.Content) == 1 &&
		strings.Contains(res.Content[0].Text, pg.MsgUnavailable) {
		return nil, fmt.Errorf("%s: %s: %w", tool, res.Content[0].Text, errRetryLater)
	}
	return env.Result, nil
}

func resultText(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(result, &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("unexpected result %s", result)
	}
	return res.Content[0].Text
}
