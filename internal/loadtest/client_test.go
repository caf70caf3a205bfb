package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// TestClientAnswers checks what the load generator reads of an answer: the fields the
// scenarios take ids from, from either toolset's shape, and a tool error as an error.
func TestClientAnswers(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"threads": `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"threadId\":\"t1\"}"}],"structuredContent":{"threadId":"t1","n":2}}}`,
		"rooms":   `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"task_id\":\"k9\",\"state\":\"submitted\"}"}]}}`,
		"plain":   `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"No memory entries found"}]}}`,
		"toolerr": `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Room not found"}],"isError":true}}`,
		"rpcerr":  `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad arguments"}}`,
		// relayroom's own layout, which the client reads without decoding: isError last.
		"ours":    `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"isError\":true}"}],"structuredContent":{"threadId":"t2","inner":{"isError":true}},"isError":false}}`,
		"ourserr": `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Thread not found"}],"structuredContent":{"isError":false},"isError":true}}`,
		"typed":   `{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false,"resultType":"complete"}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answers[r.URL.Path[1:]]))
	}))
	t.Cleanup(srv.Close)
	c := NewClient(1, 10*time.Second, nil)
	t.Cleanup(c.Close)
	do := func(t *testing.T, name string) (Answer, error) {
		t.Helper()
		return c.Do(context.Background(), Call{URL: srv.URL + "/" + name, Tool: "x"})
	}
	t.Run("a threads field comes from structuredContent", func(t *testing.T) {
		t.Parallel()
		a, err := do(t, "threads")
		if err != nil || a.Field("threadId") != "t1" || a.Field("n") != "" || a.Field("absent") != "" {
			t.Fatalf("%v %q %q", err, a.Field("threadId"), a.Field("n"))
		}
	})
	t.Run("a rooms field comes from the text's JSON", func(t *testing.T) {
		t.Parallel()
		a, err := do(t, "rooms")
		if err != nil || a.Field("task_id") != "k9" || a.Text() != `{"task_id":"k9","state":"submitted"}` {
			t.Fatalf("%v %q %q", err, a.Field("task_id"), a.Text())
		}
	})
	t.Run("a text that is not JSON has no fields", func(t *testing.T) {
		t.Parallel()
		a, err := do(t, "plain")
		if err != nil || a.Field("task_id") != "" || a.Text() != "No memory entries found" {
			t.Fatalf("%v %q", err, a.Text())
		}
	})
	t.Run("a tool error is an error with its text", func(t *testing.T) {
		t.Parallel()
		_, err := do(t, "toolerr")
		var ce *CallError
		if !errors.As(err, &ce) || ce.Msg != "Room not found" || ce.Code != 0 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("an answer in relayroom's layout is read without decoding, its fields still there", func(t *testing.T) {
		t.Parallel()
		a, err := do(t, "ours")
		if err != nil || a.Field("threadId") != "t2" {
			t.Fatalf("%v %q", err, a.Field("threadId"))
		}
		if _, err := do(t, "typed"); err != nil {
			t.Fatalf("resultType after isError: %v", err)
		}
	})
	t.Run("an isError of true in relayroom's layout is an error, whatever its content holds", func(t *testing.T) {
		t.Parallel()
		_, err := do(t, "ourserr")
		var ce *CallError
		if !errors.As(err, &ce) || ce.Msg != "Thread not found" {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a JSON-RPC error is an error with its code", func(t *testing.T) {
		t.Parallel()
		_, err := do(t, "rpcerr")
		var ce *CallError
		if !errors.As(err, &ce) || ce.Code != -32602 || ce.Msg != "bad arguments" {
			t.Fatalf("%v", err)
		}
	})
}

// TestClientReferenceCalls checks the two calls of the reference rows: a JSON-RPC method
// other than tools/call is sent as itself, without a tool's params, and a GET fails on
// any status but 200.
func TestClientReferenceCalls(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mcp":
			var msg map[string]any
			if json.NewDecoder(r.Body).Decode(&msg) != nil || msg["method"] != "ping" || msg["params"] != nil || r.Header.Get("X-Agent-Key") != "k" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		case "/healthz":
			_, _ = w.Write([]byte("ok"))
		default:
			http.Error(w, "gone", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	c := NewClient(1, 10*time.Second, nil)
	t.Cleanup(c.Close)
	ctx := context.Background()
	t.Run("ping is sent as its own method and its empty result is a success", func(t *testing.T) {
		t.Parallel()
		if _, err := c.Do(ctx, Call{URL: srv.URL + "/mcp", Key: "k", Method: "ping"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a GET answered 200 succeeds", func(t *testing.T) {
		t.Parallel()
		if err := c.Get(ctx, srv.URL+"/healthz"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a GET answered otherwise fails with its status", func(t *testing.T) {
		t.Parallel()
		var ce *CallError
		if err := c.Get(ctx, srv.URL+"/readyz"); !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable || ce.Msg != "gone" {
			t.Fatalf("%v", err)
		}
	})
}

// TestPlainSuccess pins which answers skip decoding: only a success in relayroom's layout.
func TestPlainSuccess(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"isError":true},"isError":false}}`: true,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false,"resultType":"complete"}}` + "\n":       true,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"isError":false},"isError":true}}`: false,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false,"other":1}}`:                            false,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`:                                                      false,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x","data":{"isError":false}}}`:               false,
		`{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":false}}`:                                      false,
	} {
		if _, got := plainSuccess([]byte(body)); got != want {
			t.Errorf("plainSuccess(%s) = %v, want %v", body, got, want)
		}
	}
}

// BenchmarkClientDo is the load generator's own cost of one call whose answer it
// discards, as in a measured row: a threads answer listing 20 messages.
func BenchmarkClientDo(b *testing.B) {
	item := `{"id":"0190f0a2-7c1e-7d3a-9b1e-3f6c2a8d4e51","from":"backend","subject":"deploy window","preview":"the deploy window moves to 14:00 UTC because the database upgrade runs first","sentAt":"2026-12-02T03:00:00.000Z","urgent":false}`
	items := item
	for range 19 {
		items += "," + item
	}
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + strconv.Quote(`{"messages":[`+items+`]}`) + `}],"structuredContent":{"messages":[` + items + `]},"isError":false}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	b.Cleanup(srv.Close)
	c := NewClient(1, 10*time.Second, nil)
	b.Cleanup(c.Close)
	call := Call{URL: srv.URL, Tool: "inbox", Args: map[string]any{"limit": 20}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Do(context.Background(), call); err != nil {
			b.Fatal(err)
		}
	}
}
