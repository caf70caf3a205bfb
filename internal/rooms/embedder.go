package rooms

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
)

// Embedding memory entries off the request path. Storing a vector in the HNSW index was
// most of write_memory's database time (docs/performance.md, "Search and memory rows"),
// and 32 writers inserting into one index at once also waited on each other's page
// locks. While RunEmbedder runs, write_memory commits the entry without its vector and
// hands it here after the commit; RunEmbedder embeds what has queued up in one batch and
// stores the vectors a chunk to a transaction. Until then the entry is found lexically, as
// after an embedder outage. Without RunEmbedder (a Service used directly, as most tests
// do) write_memory embeds in its own transaction, as before.

// maxQueuedEmbeddings bounds the entries waiting in memory for RunEmbedder. Past it an
// entry is still committed without its vector and is not queued: the periodic
// EmbedPending sweep finds it by its missing vector (after sweepGrace), as it finds the
// entries of a process that stopped with a queue. So embedding never lands on a
// write_memory request while RunEmbedder runs, even when writes arrive faster than the
// sentence encoder embeds them (about 16 ms of CPU for a 40-word entry); the backlog then
// waits in the database, its entries found lexically until their vectors are stored.
const maxQueuedEmbeddings = 256

// embedBatchMax is the most entries RunEmbedder takes from the queue at once.
const embedBatchMax = 256

// storeChunk is the most vectors stored in one transaction. A pipelined batch is one
// statement for statement_timeout, and each HNSW insert costs milliseconds: 500 at once
// (the sweep's batch) ran past the 5 s timeout on a loaded machine and stored nothing.
const storeChunk = 32

// sweepGrace is how old an entry must be before the periodic sweep (EmbedPending) takes
// it while RunEmbedder runs: younger ones are RunEmbedder's, and both inserting the same
// vector row made one wait for the other's commit.
const sweepGrace = time.Minute

type embedQueue struct {
	running atomic.Bool   // RunEmbedder is taking the queue
	signal  chan struct{} // capacity 1: "something is queued"

	mu      sync.Mutex
	pending []db.MemoryEntryListUnembeddedRow
}

func newEmbedQueue() *embedQueue { return &embedQueue{signal: make(chan struct{}, 1)} }

// add queues an entry, or reports false when the queue is full (the sweep takes it).
func (q *embedQueue) add(r db.MemoryEntryListUnembeddedRow) bool {
	q.mu.Lock()
	if len(q.pending) >= maxQueuedEmbeddings {
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

func (q *embedQueue) take(n int) []db.MemoryEntryListUnembeddedRow {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(n, len(q.pending))
	out := append([]db.MemoryEntryListUnembeddedRow(nil), q.pending[:k]...)
	q.pending = append(q.pending[:0], q.pending[k:]...)
	return out
}

// deferEmbedding reports whether write_memory leaves its entry's vector to RunEmbedder
// (or, past its queue's bound, to the sweep): whenever RunEmbedder runs.
func (s *Service) deferEmbedding() bool {
	return s.embeds != nil && s.embeds.running.Load()
}

// queueEmbedding hands a committed entry to RunEmbedder, or leaves it to the sweep when
// the queue is full.
func (s *Service) queueEmbedding(r db.MemoryEntryListUnembeddedRow) {
	if !s.embeds.add(r) {
		s.embedsSpilled.Add(1)
	}
}

// EmbeddingsSpilled counts the entries left to the sweep because RunEmbedder's queue was
// full: a rate above zero says writes outrun the embedder.
func (s *Service) EmbeddingsSpilled() uint64 { return s.embedsSpilled.Load() }

// RunEmbedder embeds and stores the vectors of the entries write_memory queues, batch
// after batch, until ctx ends. A batch that fails is logged and left to the periodic
// EmbedPending sweep (its entries have no vector, which is what the sweep looks for).
func (s *Service) RunEmbedder(ctx context.Context) {
	if s.embeds == nil {
		return
	}
	s.embeds.running.Store(true)
	defer s.embeds.running.Store(false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.embeds.signal:
		}
		for {
			batch := s.embeds.take(embedBatchMax)
			if len(batch) == 0 {
				break
			}
			if err := s.embedRows(ctx, s.embedder(), batch); err != nil {
				s.log().WarnContext(ctx, "rooms: embedding batch deferred to the sweep", "entries", len(batch), "error", err.Error())
			}
		}
	}
}

// embedRows embeds the rows' contents with e and stores one vector row each, in one
// transaction on the operator pool (ON CONFLICT DO NOTHING: the sweep and the queue may
// meet on an entry).
func (s *Service) embedRows(ctx context.Context, e embed.Embedder, rows []db.MemoryEntryListUnembeddedRow) error {
	if e.Name() == embed.KindNone || len(rows) == 0 {
		return nil
	}
	texts := make([]string, len(rows))
	for i, r := range rows {
		texts[i] = r.Content
	}
	vs, err := e.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed %d texts: %w", len(texts), err)
	}
	if len(vs) != len(rows) {
		return fmt.Errorf("embed: %d vectors for %d texts", len(vs), len(rows))
	}
	for lo := 0; lo < len(rows); lo += storeChunk {
		hi := min(lo+storeChunk, len(rows))
		err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
			// One round trip for the chunk (with the COMMIT), not one per entry.
			return tx.Pipeline(func() error { return s.storeVectors(ctx, tx, e.Name(), rows[lo:hi], vs[lo:hi]) })
		})
		if err != nil {
			return fmt.Errorf("store vectors: %w", err)
		}
	}
	return nil
}
