package loadtest

import (
	"context"
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
	t.Run("a JSON-RPC error is an error with its code", func(t *testing.T) {
		t.Parallel()
		_, err := do(t, "rpcerr")
		var ce *CallError
		if !errors.As(err, &ce) || ce.Code != -32602 || ce.Msg != "bad arguments" {
			t.Fatalf("%v", err)
		}
	})
}

// BenchmarkClientDo is the load generator's own cost of one call whose answer it
// discards, as in a measured row: a threads answer listing 20 messages.
func BenchmarkClientDo(b *testing.B) {
	item := `{"id":"0190f0a2-7c1e-7d3a-9b1e-3f6c2a8d4e51","from":"backend","subject":"deploy window","preview":"the deploy window moves to 14:00 UTC because the database upgrade runs first","sentAt":"2026-12-02T03:00:00.000Z","urgent":false}`
	items := item
	for range 19 {
		items += "," + item
	}
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + strconv.Quote(`{"messages":[`+items+`]}`) + `}],"structuredContent":{"messages":[` + items + `]}}}`
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
