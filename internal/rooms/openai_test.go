package rooms_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/rooms"
)

// TestOpenAICompatibleEmbedder: memory through an OpenAI-compatible /v1/embeddings
// server (a local fake): vectors are stored under "openai:<model>", reads report
// relevance, and while the server fails writes still succeed and are embedded later.
func TestOpenAICompatibleEmbedder(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	hash := &hashEmbedder{name: "x"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		vs, _ := hash.Embed(r.Context(), req.Input)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Data []item `json:"data"`
		}{}
		for i, v := range vs {
			out.Data = append(out.Data, item{Index: i, Embedding: v})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)

	e := newEnv(t)
	emb, err := embed.New(embed.Config{Kind: "openai", BaseURL: srv.URL, Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Embedder = emb
	ctx := context.Background()
	sc := e.scope("architect", e.one)
	if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: "deploy the release on friday"}); err != nil {
		t.Fatal(err)
	}
	if n := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'openai:test-model' AND embedding IS NOT NULL"); n != 1 {
		t.Fatalf("openai vectors: %d", n)
	}
	res, err := e.svc.ReadMemory(ctx, sc, rooms.ReadMemoryInput{Query: "release deploy friday"})
	if err != nil || len(res.Entries) != 1 || res.Entries[0].Relevance == nil {
		t.Fatalf("semantic read through openai: %+v %v", res, err)
	}

	down.Store(true)
	if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: "rollback plan for the release"}); err != nil {
		t.Fatalf("write failed while the embedding server is down: %v", err)
	}
	if n, err := e.svc.EmbedPending(ctx, 10); err == nil || n != 0 {
		t.Fatalf("EmbedPending with the server down: %d %v", n, err)
	}
	down.Store(false)
	if n, err := e.svc.EmbedPending(ctx, 10); err != nil || n != 1 {
		t.Fatalf("EmbedPending after recovery: %d %v", n, err)
	}
	if n := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'openai:test-model'"); n != 2 {
		t.Fatalf("openai vectors after catching up: %d", n)
	}
}
