package rooms_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/rooms"
)

// requestKey marks the context of a write_memory call.
type requestKey struct{}

// requestWatcher is a hashEmbedder that records whether it ever ran in a request's
// context.
type requestWatcher struct {
	*hashEmbedder
	inRequest atomic.Bool
}

func (w *requestWatcher) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if ctx.Value(requestKey{}) != nil {
		w.inRequest.Store(true)
	}
	return w.hashEmbedder.Embed(ctx, texts)
}

// While RunEmbedder runs, write_memory does not embed on the request path: the entry is
// committed without its vector, RunEmbedder embeds and stores it after the commit, and
// the entry is then found by meaning with its relevance.
func TestRunEmbedderStoresVectorsAfterTheCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := &requestWatcher{hashEmbedder: &hashEmbedder{name: "hash-v1"}}
	e.svc.Embedder = w
	sc := e.scope("architect", e.one)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.RunEmbedder(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "RunEmbedder to start", e.svc.EmbedderRunning)

	req := context.WithValue(context.Background(), requestKey{}, true)
	if _, err := e.svc.WriteMemory(req, sc, rooms.WriteMemoryInput{Content: "Rotate the signing keys every quarter"}); err != nil {
		t.Fatal(err)
	}
	t.Run("RunEmbedder stores the vector after the commit", func(t *testing.T) {
		waitFor(t, "the entry's vector", func() bool {
			return e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NOT NULL") == 1
		})
	})
	t.Run("the embedder never ran in the request", func(t *testing.T) {
		if w.inRequest.Load() {
			t.Fatal("write_memory embedded its content on the request path")
		}
	})
	t.Run("the entry is then found by meaning", func(t *testing.T) {
		res, err := e.svc.ReadMemory(context.Background(), sc, rooms.ReadMemoryInput{Query: "Rotate the signing keys every quarter"})
		if err != nil || !res.Semantic || len(res.Entries) != 1 || res.Entries[0].Relevance == nil {
			t.Fatalf("semantic read after RunEmbedder: %+v %v", res, err)
		}
	})
}

// waitFor polls cond for up to 20 seconds (a -race build on a busy machine is slow).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
