package rooms_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/testfix"
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
	runEmbedder(t, e, w)
	sc := e.scope("architect", e.one)

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

// runEmbedder makes emb the service's embedder and runs RunEmbedder until the test ends,
// returning once it has started (so a write after it finds the queue there).
func runEmbedder(t *testing.T, e *env, emb embed.Embedder) {
	t.Helper()
	e.svc.Embedder = emb
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.RunEmbedder(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "RunEmbedder to start", e.svc.EmbedderRunning)
}

// waitFor polls cond for up to 20 seconds (a -race build on a busy machine is slow).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testfix.WaitFor(t, what, 20*time.Second, cond)
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
// the request path: the entries past the bound are committed without their vectors, and
// RunEmbedder takes them from the database once it has room, without the periodic sweep
// (EmbedPending, never called here). Nothing is lost.
func TestRunEmbedderTakesTheEntriesPastItsQueueFromTheDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := &gatedEmbedder{requestWatcher: &requestWatcher{hashEmbedder: &hashEmbedder{name: "hash-v1"}}, open: make(chan struct{}), started: make(chan struct{})}
	runEmbedder(t, e, g)
	sc := e.scope("architect", e.one)
	req := context.WithValue(context.Background(), requestKey{}, true)
	write := func(i int) {
		t.Helper()
		if _, err := e.svc.WriteMemory(req, sc, rooms.WriteMemoryInput{Content: fmt.Sprintf("Entry number %d about key rotation", i)}); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	<-g.started // RunEmbedder's workers are held inside the embedder
	// Past the queue's 256, and past what the held workers and RunEmbedder's hand can
	// have taken from it (a chunk of 16 each, at most 4 workers).
	const writes = 256 + 6*16
	for i := 1; i <= writes; i++ {
		write(i)
	}
	close(g.open)

	t.Run("the embedder never ran in a request", func(t *testing.T) {
		if g.inRequest.Load() {
			t.Fatal("write_memory embedded on the request path past the queue's bound")
		}
	})
	t.Run("entries past the bound were not queued", func(t *testing.T) {
		if n := e.svc.EmbeddingsSpilled(); n == 0 {
			t.Fatal("no entry was left out of the queue")
		}
	})
	t.Run("RunEmbedder stores every vector, the spilled ones too", func(t *testing.T) {
		waitFor(t, "every entry's vector", func() bool {
			return e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NOT NULL") == writes+1
		})
	})
}

// countingEmbedder wraps a real embedder and counts how many times each text was embedded.
type countingEmbedder struct {
	embed.Embedder
	mu    sync.Mutex
	texts map[string]int
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	for _, t := range texts {
		c.texts[t]++
	}
	c.mu.Unlock()
	return c.Embedder.Embed(ctx, texts)
}

// Two replicas (two Services on one database) running RunEmbedder share a backlog:
// each entry is claimed by one of them, so none is embedded twice, and every entry gets
// its vector. The backlog is what an embedder change leaves: entries of two rooms written
// without a vector, taken from the database when RunEmbedder starts.
func TestTwoRunEmbeddersNeverEmbedTheSameEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.Embedder = embed.None{}
	const entries = 300
	for i := range entries {
		room := e.one
		if i%2 == 1 {
			room = e.two
		}
		if _, err := e.svc.WriteMemory(context.Background(), e.scope("architect", room),
			rooms.WriteMemoryInput{Content: fmt.Sprintf("Entry number %d about key rotation", i)}); err != nil {
			t.Fatal(err)
		}
	}
	glove, err := embed.New(embed.Config{Kind: embed.KindGlove})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingEmbedder{Embedder: glove, texts: map[string]int{}}
	replicas := []*rooms.Service{e.svc, rooms.New(e.svc.Deps)}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	for _, r := range replicas {
		r.Embedder = c
		running.Go(func() { r.RunEmbedder(ctx) })
	}
	t.Cleanup(func() { cancel(); running.Wait() })
	missing := "SELECT count(*) FROM memory_entry e WHERE NOT EXISTS (SELECT 1 FROM memory_vector v WHERE v.project_id = e.project_id AND v.memory_id = e.id AND v.embedder = $1)"

	t.Run("every entry gets its vector", func(t *testing.T) {
		waitFor(t, "every entry's vector", func() bool { return e.count(missing, glove.Name()) == 0 })
	})
	t.Run("no entry was embedded twice", func(t *testing.T) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.texts) != entries {
			t.Fatalf("%d texts embedded, want %d", len(c.texts), entries)
		}
		for text, n := range c.texts {
			if n != 1 {
				t.Errorf("%q embedded %d times", text, n)
			}
		}
	})
}

// While the backlog waits for a slow embedder, the entries it is embedding stay free to
// change: a person deprecating one is not made to wait (and refused at the request's lock
// timeout) until the embedder answers.
func TestEmbeddingDoesNotLockTheEntriesItEmbeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.Embedder = embed.None{}
	id := str(e.call("architect", e.one, "write_memory", map[string]any{"content": "The release train leaves on Thursdays"}).obj(t), "memory_id")
	g := &gatedEmbedder{requestWatcher: &requestWatcher{hashEmbedder: &hashEmbedder{name: "hash-v1"}}, open: make(chan struct{}), started: make(chan struct{})}
	e.svc.Embedder = g
	ctx := context.Background()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := e.svc.EmbedPending(ctx, 10)
		done <- result{n, err}
	}()
	<-g.started
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// What a request does: a lock waited for past its lock timeout is an error.
	_, err = conn.Exec(ctx, "SET lock_timeout = '1s'")
	if err == nil {
		_, err = conn.Exec(ctx, "UPDATE memory_entry SET deprecated_at = now() WHERE id = $1", uuidOf(t, id))
	}
	close(g.open)
	if err != nil {
		t.Fatalf("deprecating an entry while it was being embedded: %v", err)
	}
	if r := <-done; r.err != nil || r.n != 1 {
		t.Fatalf("the backlog stored %d vectors (%v), want the entry's", r.n, r.err)
	}
}
