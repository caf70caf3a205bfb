package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchThread is the shape of one entry of threads' answer (id, subject, status, time).
type benchThread struct {
	ID        string    `json:"id"`
	Subject   string    `json:"subject"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
}

// benchIdentity is the shape of whoami's answer: a handful of names and ids.
type benchIdentity struct {
	Agent        string   `json:"agent"`
	Part         string   `json:"part"`
	Project      string   `json:"project"`
	Organisation string   `json:"organisation"`
	Capabilities []string `json:"capabilities"`
	Parked       bool     `json:"parked"`
}

// benchTools are a toolset whose handlers answer at once with values shaped as the read
// tools' answers, so that a benchmark of them measures the core alone: no database.
func benchTools() []Tool[testScope] {
	created := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	threads := make([]benchThread, 50)
	for i := range threads {
		threads[i] = benchThread{
			ID:        fmt.Sprintf("th_%022d", i),
			Subject:   fmt.Sprintf("Deploy \"blue\" build %d: rollback plan & <checks>", i),
			Status:    "open",
			CreatedAt: created.Add(-time.Duration(i) * time.Minute),
		}
	}
	type threadsIn struct {
		Query  *string `json:"query,omitempty"`
		Status *string `json:"status,omitempty"`
		Limit  int     `json:"limit,omitempty"`
	}
	return []Tool[testScope]{
		NewTool(Tool[testScope]{Name: "whoami", Description: "Who the caller is.", Annotations: Annotations{ReadOnly: true, Idempotent: true}},
			func(_ context.Context, s testScope, _ struct{}) (benchIdentity, error) {
				return benchIdentity{Agent: s.Agent, Part: "architect", Project: "acme/escalations", Organisation: "acme", Capabilities: []string{"send", "reply", "close"}}, nil
			}),
		NewTool(Tool[testScope]{Name: "threads", Description: "The caller's threads.", Annotations: Annotations{ReadOnly: true, Idempotent: true}},
			func(_ context.Context, _ testScope, in threadsIn) (any, error) {
				return map[string]any{"threads": threads[:in.Limit]}, nil
			},
			Prop("status", Enum("open", "closed", "canceled")),
			Prop("limit", Minimum(1), Maximum(50), Default(50))),
	}
}

// discardWriter is the least a ResponseWriter can do: the benchmark counts the handler's
// work, not a recorder's.
type discardWriter struct {
	header http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// BenchmarkToolsCall is one tools/call through the MCP handler, from the parsed HTTP
// request to the answer's bytes: JSON-RPC parsing, the arguments' preparation, the
// handler's value shaped in the threads format and the JSON-RPC answer written. The
// handlers answer at once, so ns/op and allocs/op are the core's own cost per call.
func BenchmarkToolsCall(b *testing.B) {
	ep := testEndpoint("threads", ThreadsFormat)
	ep.Tools = benchTools()
	h, err := NewHandler(ep, Options{RequestID: func(context.Context) string { return testRequestID }})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, body string }{
		{"whoami", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`},
		{"threads 20", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"threads","arguments":{"limit":20}}}`},
		{"threads 50", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"threads","arguments":{}}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := strings.NewReader(c.body)
			r, err := http.NewRequest(http.MethodPost, "/threads", body)
			if err != nil {
				b.Fatal(err)
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("X-Test-Key", "good")
			w := &discardWriter{header: http.Header{}}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				body.Reset(c.body)
				r.Body = io.NopCloser(body)
				clear(w.header)
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(w.n)/float64(b.N), "B/answer")
		})
	}
}

// processCPU is the CPU time the process has used (user and system, every thread, the
// garbage collector's included): per call, it moves far less with the machine's load
// than ns/op, which counts the time spent waiting for a core too.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchToolsAnswer keeps the benchmark honest: its calls succeed with the answer a
// client expects (not an error result, which would be cheaper).
func TestBenchToolsAnswer(t *testing.T) {
	t.Parallel()
	ep := testEndpoint("threads", ThreadsFormat)
	ep.Tools = benchTools()
	h, err := NewHandler(ep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.NewRequest(http.MethodPost, "/threads", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"threads","arguments":{"limit":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Test-Key", "good")
	w := &discardWriter{header: http.Header{}}
	var buf bytes.Buffer
	h.ServeHTTP(&teeWriter{w, &buf}, r)
	var res struct {
		Result struct {
			StructuredContent struct{ Threads []benchThread }
			IsError           bool
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &res); err != nil || res.Result.IsError || len(res.Result.StructuredContent.Threads) != 2 {
		t.Fatalf("answer %s (%v)", buf.Bytes(), err)
	}
}

type teeWriter struct {
	*discardWriter
	buf *bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.discardWriter.Write(b)
}
