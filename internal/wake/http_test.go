package wake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

// TestPagerHTTP: the pager endpoints' answers, and that polling does not make the agent
// look online (or it would never be woken).
func TestPagerHTTP(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := f.res.Agents["acme/alpha"].Key
	call := func(method, path, key string) (*httptest.ResponseRecorder, map[string]any) {
		target := path
		if method == http.MethodPost {
			target = "/api/wakes/" + path + "/ack"
		}
		req := httptest.NewRequest(method, target, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		wake.NewHandler(wake.HandlerDeps{Service: f.svc}).ServeHTTP(rec, req)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec, body
	}
	if rec, _ := call(http.MethodGet, "/api/wakes/next?wait=0", ""); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no key: %d", rec.Code)
	}
	if rec, _ := call(http.MethodGet, "/api/wakes/next?wait=0", testfix.Mistype(key)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("mistyped key: %d", rec.Code)
	}
	if rec, _ := call(http.MethodGet, "/api/wakes/next?wait=soon", key); rec.Code != http.StatusBadRequest {
		t.Fatalf("bad wait: %d", rec.Code)
	}
	if rec, _ := call(http.MethodGet, "/api/wakes/next?wait=0", key); rec.Code != http.StatusNoContent {
		t.Fatalf("nothing to claim: %d", rec.Code)
	}
	f.queue(f.msg("a"))
	rec, body := call(http.MethodGet, "/api/wakes/next?wait=0", key)
	if rec.Code != http.StatusOK || body["part"] != "a" {
		t.Fatalf("claim: %d %v", rec.Code, body)
	}
	id, _ := body["id"].(string)
	if rec, _ := call(http.MethodPost, uuid.NewString(), key); rec.Code != http.StatusNotFound {
		t.Fatalf("ack of an unknown wake: %d", rec.Code)
	}
	if rec, _ := call(http.MethodPost, id, f.res.Agents["acme/beta"].Key); rec.Code != http.StatusNotFound {
		t.Fatalf("ack of another agent's wake: %d", rec.Code)
	}
	if rec, body := call(http.MethodPost, id, key); rec.Code != http.StatusOK || body["status"] != wake.StatusDelivered {
		t.Fatalf("ack: %d %v", rec.Code, body)
	}
	// Polling did not move presence: a new message still wakes the part.
	f.queue(f.msg("a"))
	if w := f.open("a"); w.Count != 1 {
		t.Fatalf("the pager's polling made its agent look online: %+v", f.wakes("a"))
	}
}

// TestPagerStopsWithItsKey: a long poll opened before its key was revoked claimed the
// next wake, and held it from the agent's new key for the lease. It answers 401 instead,
// and the wake waits for a valid key.
func TestPagerStopsWithItsKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := f.res.Agents["acme/alpha"].Key
	answer := make(chan int, 1)
	go func() {
		req := httptest.NewRequest(http.MethodGet, "/api/wakes/next?wait=10", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		wake.NewHandler(wake.HandlerDeps{Service: f.svc}).ServeHTTP(rec, req)
		answer <- rec.Code
	}()
	time.Sleep(200 * time.Millisecond) // the poll is waiting (an answer now would be a 204 race, caught below)
	f.exec(`UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1`, f.res.Agents["acme/alpha"].ID)
	f.queue(f.msg("a"))
	if code := <-answer; code != http.StatusUnauthorized {
		t.Fatalf("the poll of a revoked key answered %d", code)
	}
	f.open("a") // still pending: nothing claimed it
}

// TestLongPollsPerAgentAreBounded: long polls are not counted per address (pagers share
// addresses behind a NAT), and one key held every connection the server allows for a
// minute at a time. An agent holds MaxPollsPerAgent at once; the next is told to retry.
func TestLongPollsPerAgentAreBounded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := f.res.Agents["acme/alpha"].Key
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll := func(ctx context.Context, key, wait string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/wakes/next?wait="+wait, nil).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		wake.NewHandler(wake.HandlerDeps{Service: f.svc}).ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	for range wake.MaxPollsPerAgent {
		wg.Add(1)
		go func() { // polls again when one ended early (refused while a probe held a slot)
			defer wg.Done()
			for ctx.Err() == nil {
				poll(ctx, key, "30")
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	// A probe that got in (the others were not all waiting yet) waits out its window and
	// is sent again. One whose authentication outlasted its window (503: a loaded
	// machine) is sent again with a longer one.
	deadline := time.Now().Add(time.Minute)
	for window := 200 * time.Millisecond; ; {
		probe, stop := context.WithTimeout(context.Background(), window)
		rec := poll(probe, key, "30")
		stop()
		if rec.Code == http.StatusTooManyRequests {
			if rec.Header().Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a poll past the bound answered %d", rec.Code)
		}
		if rec.Code == http.StatusServiceUnavailable {
			window = min(2*window, 5*time.Second)
		}
	}
	// A poll that waits its second for a wake answers 204. On a machine the whole suite
	// loads, a poll's authentication or claim can miss its database budget and answer
	// 503, which a pager retries: so does this check, a few times. A 429, the bound's
	// refusal, fails it at once. The poll ends by its own wait, not by a client deadline:
	// on a loaded Citus coordinator 3 s ran out during the authentication (a 503 each
	// time).
	pollUntilIdle := func(key string) int {
		t.Helper()
		code := 0
		for range 5 {
			pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
			code = poll(pctx, key, "1").Code
			pcancel()
			if code != http.StatusServiceUnavailable {
				return code
			}
		}
		return code
	}
	// Another agent is not held back by alpha's polls.
	if code := pollUntilIdle(f.res.Agents["acme/beta"].Key); code != http.StatusNoContent {
		t.Fatalf("another agent's poll: %d", code)
	}
	cancel()
	wg.Wait()
	if code := pollUntilIdle(key); code != http.StatusNoContent {
		t.Fatalf("once the polls ended: %d (the bound outlived them)", code)
	}
}

func TestParseWait(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"":                     wake.DefaultWait,
		"0":                    0,
		"5":                    5 * time.Second,
		"9300000000":           wake.MaxWait, // overflowed to a negative wait: the poll answered at once
		"9223372036854775807":  wake.MaxWait,
		"99999999999999999999": wake.MaxWait,
	} {
		if got, err := wake.ParseWait(in); err != nil || got != want {
			t.Errorf("ParseWait(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "soon", "1.5", " 3"} {
		if _, err := wake.ParseWait(bad); err == nil {
			t.Errorf("ParseWait(%q) accepted", bad)
		}
	}
}

// TestPagerRefusalsNameTheScheme: a refused key is a 401 with WWW-Authenticate, as RFC
// 9110 requires of every 401 and as the rooms' and the desk's routes answer. The pager's
// routes sent none.
func TestPagerRefusalsNameTheScheme(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := testfix.Mistype(f.res.Agents["acme/alpha"].Key)
	for name, req := range map[string]*http.Request{
		"the long poll": httptest.NewRequest(http.MethodGet, "/api/wakes/next?wait=0", nil),
		"an ack":        httptest.NewRequest(http.MethodPost, "/api/wakes/"+uuid.NewString()+"/ack", nil),
	} {
		t.Run(name, func(t *testing.T) {
			req.Header.Set("Authorization", "Bearer "+key)
			rec := httptest.NewRecorder()
			wake.NewHandler(wake.HandlerDeps{Service: f.svc}).ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%d, WWW-Authenticate %q; want 401 with a Bearer challenge", rec.Code, rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}
