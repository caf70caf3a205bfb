package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-test-0123456789abcdef"

// fakeServer is an OpenAI-compatible embeddings endpoint. Each embedding encodes its input
// so tests can check order: [len(text), 1, index-in-request·0].
type fakeServer struct {
	mu       sync.Mutex
	requests []embeddingsRequest
	paths    []string
	auth     []string
	handler  func(w http.ResponseWriter, r *http.Request, req embeddingsRequest) // optional override
	reverse  bool                                                                // answer in reverse index order
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	h := f.handler
	f.mu.Unlock()
	if h != nil {
		h(w, r, req)
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []item
	for i, text := range req.Input {
		data = append(data, item{"embedding", i, []float64{float64(len(text)), 1, 0}})
	}
	if f.reverse {
		slices.Reverse(data)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func newFake(t *testing.T, f *fakeServer, cfg Config) *OpenAI {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if cfg.BaseURL == "" {
		cfg.BaseURL = srv.URL
	} else {
		cfg.BaseURL = srv.URL + cfg.BaseURL
	}
	if cfg.Model == "" {
		cfg.Model = "nomic-embed-text"
	}
	e, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// wantLen checks that v is the normalised fake embedding of a text of length n.
func wantLen(t *testing.T, v []float32, n int) {
	t.Helper()
	norm := math.Sqrt(float64(n*n + 1))
	if len(v) != 3 || math.Abs(float64(v[0])-float64(n)/norm) > 1e-6 || math.Abs(float64(v[1])-1/norm) > 1e-6 {
		t.Errorf("got %v, want normalised [%d 1 0]", v, n)
	}
}

func TestOpenAIHappyPath(t *testing.T) {
	f := &fakeServer{reverse: true} // out of order: placement must follow index
	e := newFake(t, f, Config{APIKey: testKey, BaseURL: "/v1/"})
	texts := []string{"a", "bbb", "cc"}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		wantLen(t, vs[i], len(text))
	}
	if e.Name() != "openai:nomic-embed-text" || e.Dim() != 3 {
		t.Errorf("Name %q Dim %d", e.Name(), e.Dim())
	}
	if len(f.requests) != 1 || f.paths[0] != "POST /v1/embeddings" || f.auth[0] != "Bearer "+testKey ||
		f.requests[0].Model != "nomic-embed-text" || strings.Join(f.requests[0].Input, ",") != "a,bbb,cc" {
		t.Errorf("request: %v %v %v %+v", len(f.requests), f.paths, f.auth, f.requests)
	}
}

func TestOpenAIBatching(t *testing.T) {
	f := &fakeServer{}
	e := newFake(t, f, Config{BatchSize: 2})
	texts := []string{"one", "", "three", "four!", "  ", "sixsix", "7"}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// 5 non-blank texts in batches of 2: 3 requests; blanks never sent.
	if len(f.requests) != 3 {
		t.Fatalf("%d requests, want 3", len(f.requests))
	}
	var sent []string
	for _, r := range f.requests {
		if len(r.Input) > 2 {
			t.Errorf("batch of %d", len(r.Input))
		}
		sent = append(sent, r.Input...)
	}
	if strings.Join(sent, "|") != "one|three|four!|sixsix|7" {
		t.Errorf("sent %q", sent)
	}
	for i, text := range texts {
		if strings.TrimSpace(text) == "" {
			if len(vs[i]) != 3 || !IsZero(vs[i]) {
				t.Errorf("blank text %d: %v, want a zero vector of length 3", i, vs[i])
			}
			continue
		}
		wantLen(t, vs[i], len(text))
	}
	if f.auth[0] != "" {
		t.Errorf("no key configured but Authorization %q sent", f.auth[0])
	}
}

func TestOpenAIHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{500, `{"error":{"message":"model crashed while loading"}}`},
		{401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at …"}}`},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			f := &fakeServer{handler: func(w http.ResponseWriter, _ *http.Request, _ embeddingsRequest) {
				http.Error(w, c.body, c.status)
			}}
			e := newFake(t, f, Config{APIKey: testKey})
			_, err := e.Embed(context.Background(), []string{"x"})
			var he *HTTPError
			if !errors.As(err, &he) || he.StatusCode != c.status {
				t.Fatalf("err %v: want an HTTPError with status %d", err, c.status)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprint(c.status)) || !strings.Contains(msg, "/v1/embeddings") {
				t.Errorf("error %q lacks status or endpoint", msg)
			}
			if c.status == 500 && !strings.Contains(msg, "model crashed") {
				t.Errorf("error %q lacks the body excerpt", msg)
			}
			if strings.Contains(msg, testKey) || strings.Contains(fmt.Sprintf("%+v %#v", he, he), testKey) {
				t.Errorf("error leaks the API key: %q", msg)
			}
		})
	}
}

func TestOpenAIErrorBodyIsShort(t *testing.T) {
	f := &fakeServer{handler: func(w http.ResponseWriter, _ *http.Request, _ embeddingsRequest) {
		http.Error(w, strings.Repeat("overloaded\n", 1000), http.StatusServiceUnavailable)
	}}
	_, err := newFake(t, f, Config{}).Embed(context.Background(), []string{"x"})
	if err == nil || len(err.Error()) > 500 || strings.Contains(err.Error(), "\n") {
		t.Errorf("error not a short single line: %d bytes", len(fmt.Sprint(err)))
	}
}

func TestOpenAITimeout(t *testing.T) {
	f := &fakeServer{handler: func(w http.ResponseWriter, r *http.Request, _ embeddingsRequest) {
		select { // far past the client's timeout, unless the client gives up first
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}}
	e := newFake(t, f, Config{Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := e.Embed(context.Background(), []string{"x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v: want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v despite a 50ms timeout", d)
	}

	// The caller's context applies too, and cancellation is reported as such.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	e = newFake(t, f, Config{Timeout: time.Minute})
	if _, err := e.Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestOpenAIMalformedResponses(t *testing.T) {
	reply := func(body string) func(http.ResponseWriter, *http.Request, embeddingsRequest) {
		return func(w http.ResponseWriter, _ *http.Request, _ embeddingsRequest) { io.WriteString(w, body) }
	}
	for _, c := range []struct {
		name, body, want string
		texts            int
	}{
		{"not json", `<html>gateway</html>`, "malformed response", 1},
		{"truncated json", `{"data":[{"index":0,"embedding":[0.1,`, "malformed response", 1},
		{"wrong count", `{"data":[{"index":0,"embedding":[1,0]}]}`, "sent 2 texts, got 1 embeddings", 2},
		{"no data", `{"object":"list"}`, "sent 1 texts, got 0 embeddings", 1},
		{"index out of range", `{"data":[{"index":5,"embedding":[1,0]}]}`, "index 5 out of range", 1},
		{"repeated index", `{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[0,1]}]}`, "index 0 repeated", 2},
		{"empty embedding", `{"data":[{"index":0,"embedding":[]}]}`, "is empty", 1},
		{"ragged", `{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[1,0,0]}]}`, "different lengths", 2},
		{"too long to normalise", `{"data":[{"index":0,"embedding":[1e200,1e200]}]}`, "too long to normalise", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFake(t, &fakeServer{handler: reply(c.body)}, Config{})
			_, err := e.Embed(context.Background(), []string{"a", "b"}[:c.texts])
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v: want %q", err, c.want)
			}
		})
	}
}

// TestOpenAIComponentsPastFloat32: a vector with components past float32's range (a broken
// quantisation) is stored normalised and finite, not as the NaN a float32 Inf would make
// (pgvector refuses NaN: every search with it failed).
func TestOpenAIComponentsPastFloat32(t *testing.T) {
	e := newFake(t, &fakeServer{handler: func(w http.ResponseWriter, _ *http.Request, _ embeddingsRequest) {
		io.WriteString(w, `{"data":[{"index":0,"embedding":[1e39,0.5,0.25]}]}`)
	}}, Config{})
	vs, err := e.Embed(context.Background(), []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range vs[0] {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("non-finite vector %v", vs[0])
		}
	}
	if math.Abs(float64(vs[0][0])-1) > 1e-6 {
		t.Fatalf("not normalised: %v", vs[0])
	}
}

func TestOpenAIDimension(t *testing.T) {
	// Configured dim that the model does not produce: refused, naming both.
	e := newFake(t, &fakeServer{}, Config{Dim: 768})
	if e.Dim() != 768 {
		t.Errorf("Dim before any call = %d, want the configured 768", e.Dim())
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "3 dimensions, configured dim is 768") {
		t.Errorf("err %v", err)
	}

	// Learnt dim: 0 before the first response, then fixed; a later change is an error.
	dim := 3
	var mu sync.Mutex
	f := &fakeServer{handler: func(w http.ResponseWriter, _ *http.Request, req embeddingsRequest) {
		mu.Lock()
		defer mu.Unlock()
		emb := make([]float64, dim)
		emb[0] = 1
		json.NewEncoder(w).Encode(map[string]any{"data": []map[string]any{{"index": 0, "embedding": emb}}})
	}}
	e = newFake(t, f, Config{})
	if e.Dim() != 0 {
		t.Errorf("Dim before learning = %d", e.Dim())
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil || e.Dim() != 3 {
		t.Fatalf("err %v, Dim %d", err, e.Dim())
	}
	mu.Lock()
	dim = 4
	mu.Unlock()
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "earlier responses had 3") {
		t.Errorf("dimension change: %v", err)
	}
}

func TestOpenAIConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{BaseURL: "http://localhost:11434"}, "model is required"},
		{Config{Model: "m"}, "base URL is required"},
		{Config{Model: "m", BaseURL: "localhost:11434"}, "not an http(s) URL"},
		{Config{Model: "m", BaseURL: "http://localhost", Dim: -1}, "negative"},
	} {
		if _, err := NewOpenAI(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.cfg, err, c.want)
		}
	}
	// Both base URL conventions reach the same endpoint.
	for _, base := range []string{"http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"} {
		e, err := NewOpenAI(Config{Model: "m", BaseURL: base})
		if err != nil || e.endpoint != "http://h:1/v1/embeddings" {
			t.Errorf("%q: endpoint %q, err %v", base, e.endpoint, err)
		}
	}
	e, _ := NewOpenAI(Config{Model: "m", BaseURL: "https://proxy.example/openai/v1"})
	if e.endpoint != "https://proxy.example/openai/v1/embeddings" {
		t.Errorf("path prefix lost: %q", e.endpoint)
	}
}
