package rooms_test

import (
	"context"
	"fmt"
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

// gatedEmbedder is a requestWatcher whose embedding outside a request waits until open
// is closed: it holds RunEmbedder inside its first batch.
type gatedEmbedder struct {
	*requestWatcher
	open    chan struct{}
	started chan struct{} // closed when RunEmbedder's first batch reaches the embedder
	once    atomic.Bool
}

func (g *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if ctx.Value(requestKey{}) == nil {
		if g.once.CompareAndSwap(false, true) {
			close(g.started)
		}
		<-g.open
	}
	return g.requestWatcher.Embed(ctx, texts)
}

// When writes outrun RunEmbedder and its queue is full, write_memory still never embeds on
// the request path: the entry past the bound is committed without its vector and the
// sweep (EmbedPending) stores it later. Nothing is lost.
func TestEmbeddingsPastTheQueueAreLeftToTheSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := &gatedEmbedder{requestWatcher: &requestWatcher{hashEmbedder: &hashEmbedder{name: "hash-v1"}}, open: make(chan struct{}), started: make(chan struct{})}
	e.svc.Embedder = g
	sc := e.scope("architect", e.one)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.RunEmbedder(ctx) }()
	waitFor(t, "RunEmbedder to start", e.svc.EmbedderRunning)
	req := context.WithValue(context.Background(), requestKey{}, true)
	write := func(i int) {
		t.Helper()
		if _, err := e.svc.WriteMemory(req, sc, rooms.WriteMemoryInput{Content: fmt.Sprintf("Entry number %d about key rotation", i)}); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	<-g.started // RunEmbedder holds entry 0 in its batch; the queue is empty again
	const queueBound = 256
	for i := 1; i <= queueBound+1; i++ {
		write(i)
	}
	close(g.open)
	cancel()
	<-done

	t.Run("the embedder never ran in a request", func(t *testing.T) {
		if g.inRequest.Load() {
			t.Fatal("write_memory embedded on the request path past the queue's bound")
		}
	})
	t.Run("one entry past the bound was left to the sweep", func(t *testing.T) {
		if n := e.svc.EmbeddingsSpilled(); n != 1 {
			t.Fatalf("spilled %d entries, want 1", n)
		}
	})
	t.Run("the sweep stores every vector still missing", func(t *testing.T) {
		if _, err := e.svc.EmbedPending(context.Background(), 1000); err != nil {
			t.Fatal(err)
		}
		if n := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NOT NULL"); n != queueBound+2 {
			t.Fatalf("%d vectors stored, want %d", n, queueBound+2)
		}
	})
}
