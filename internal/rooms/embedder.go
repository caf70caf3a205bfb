package rooms

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
)

// Embedding memory entries off the request path. Storing a vector in the HNSW index was
// most of write_memory's database time (docs/performance.md, "Search and memory rows"),
// and 32 writers inserting into one index at once also waited on each other's page
// locks. While RunEmbedder runs, write_memory commits the entry without its vector and
// hands it here after the commit; RunEmbedder's workers embed it and store its vector.
// Until then the entry is found lexically, as after an embedder outage. Without
// RunEmbedder (a Service used directly, as most tests do) write_memory embeds in its own
// transaction, as before.
//
// Every entry is claimed before it is embedded (embedChunk): its row is locked, skipping
// rows another transaction holds, until its vector is committed. So RunEmbedder's workers,
// the RunEmbedders of other replicas and the periodic sweep share a backlog without two
// of them embedding the same entry: the encoder's CPU is the scarce part.

// maxQueuedEmbeddings bounds the entries waiting in memory for RunEmbedder. Past it an
// entry is still committed without its vector and is not queued: RunEmbedder takes it
// from the database once its queue is empty (it finds entries by their missing vector,
// as it finds the entries of a process that stopped with a queue). So embedding never
// lands on a write_memory request while RunEmbedder runs, even when writes arrive faster
// than the sentence encoder embeds them; the backlog then waits in the database, its
// entries found lexically until their vectors are stored.
const maxQueuedEmbeddings = 256

// embedChunk is the most entries one transaction claims, embeds and stores. Its row locks
// are held while the encoder runs (milliseconds an entry), so a small chunk keeps short
// the wait of a deprecate_memory on a claimed entry; a pipelined store is one statement
// for statement_timeout, and each HNSW insert costs milliseconds: 500 at once ran past
// the 5 s timeout on a loaded machine and stored nothing.
const embedChunk = 16

// pullBatch is the most entries RunEmbedder lists from the database at once, to hand to
// its workers chunk by chunk.
const pullBatch = 256

// maxEmbedWorkers bounds RunEmbedder's workers whatever the number of cores: each holds a
// connection of the owner's pool (16 in the server, shared with the jobs and the
// listeners) while it embeds a chunk.
const maxEmbedWorkers = 4

// sweepGrace is how old an entry must be before the periodic sweep (EmbedPending) takes
// it while RunEmbedder runs: younger ones are RunEmbedder's, and the sweep is for what no
// RunEmbedder takes (a batch that failed, a replica that stopped). Claims keep the two
// from embedding the same entry either way.
const sweepGrace = time.Minute

type embedQueue struct {
	running atomic.Bool // RunEmbedder is taking the queue
	// spilled: an entry was committed past the queue's bound, so RunEmbedder takes the
	// database's backlog once the queue is empty.
	spilled atomic.Bool
	signal  chan struct{} // capacity 1: "something is queued"

	mu      sync.Mutex
	pending []db.MemoryEntryListUnembeddedRow
}

func newEmbedQueue() *embedQueue { return &embedQueue{signal: make(chan struct{}, 1)} }

// add queues an entry, or reports false when the queue is full.
func (q *embedQueue) add(r db.MemoryEntryListUnembeddedRow) bool {
	q.mu.Lock()
	if len(q.pending) >= maxQueuedEmbeddings {
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	q.wake()
	return true
}

func (q *embedQueue) wake() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *embedQueue) take(n int) []db.MemoryEntryListUnembeddedRow {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(n, len(q.pending))
	out := append([]db.MemoryEntryListUnembeddedRow(nil), q.pending[:k]...)
	q.pending = append(q.pending[:0], q.pending[k:]...)
	return out
}

// deferEmbedding reports whether write_memory leaves its entry's vector to RunEmbedder:
// whenever RunEmbedder runs.
func (s *Service) deferEmbedding() bool {
	return s.embeds != nil && s.embeds.running.Load()
}

// queueEmbedding hands a committed entry to RunEmbedder, or, when the queue is full,
// tells it to take the entry from the database.
func (s *Service) queueEmbedding(r db.MemoryEntryListUnembeddedRow) {
	if !s.embeds.add(r) {
		s.embedsSpilled.Add(1)
		s.embeds.spilled.Store(true)
		s.embeds.wake()
	}
}

// EmbeddingsSpilled counts the entries RunEmbedder's queue had no room for (taken from
// the database instead): a rate above zero says writes outrun the embedder.
func (s *Service) EmbeddingsSpilled() uint64 { return s.embedsSpilled.Load() }

// embedWorkers is how many chunks RunEmbedder embeds at once: one per core Go may use
// (GOMAXPROCS) but one, at least one and at most maxEmbedWorkers. The encoder is
// CPU-bound and single-threaded per text, so a worker keeps a core busy for as long as
// the backlog lasts, and a backlog builds exactly while writes arrive: the core left over
// serves the requests. On two shared cores, two workers drained a write_memory row's
// backlog little faster than one (20-58 against 17-45 entries/s) and cut the row itself
// to 87-183 calls/s from 129-295 (p50 164-368 against 95-194 ms; docs/performance.md,
// "The embedding backlog's drain").
func embedWorkers() int {
	return max(1, min(runtime.GOMAXPROCS(0)-1, maxEmbedWorkers))
}

// embedJob is a chunk for a worker; done receives how many entries it stored.
type embedJob struct {
	e    embed.Embedder
	rows []db.MemoryEntryListUnembeddedRow
	done func(stored int, err error)
}

// RunEmbedder embeds and stores the vectors of the entries write_memory queues, and of
// the entries without a vector in the database (at start, and whenever the queue had no
// room), chunk after chunk on embedWorkers goroutines, until ctx ends. A chunk that fails
// is logged and left (its entries have no vector, which is what the next pull and the
// periodic sweep look for).
func (s *Service) RunEmbedder(ctx context.Context) {
	if s.embeds == nil {
		return
	}
	s.embeds.running.Store(true)
	defer s.embeds.running.Store(false)
	work := make(chan embedJob)
	var workers sync.WaitGroup
	for range embedWorkers() {
		workers.Go(func() {
			for j := range work {
				j.done(s.embedChunk(ctx, j.e, j.rows))
			}
		})
	}
	defer func() { close(work); workers.Wait() }()
	// At start the database may hold a backlog: the queue of a process that stopped, or
	// every entry after the embedder changed.
	pull := true
	for {
		e := s.embedder()
		if s.embeds.spilled.Swap(false) {
			pull = true
		}
		// Queued entries first: they are the newest, and the queue must have room for
		// the next writes.
		for rows := s.embeds.take(embedChunk); len(rows) > 0; rows = s.embeds.take(embedChunk) {
			j := embedJob{e: e, rows: rows, done: func(_ int, err error) { s.embedFailed(ctx, len(rows), err) }}
			select {
			case work <- j:
			case <-ctx.Done():
				return
			}
		}
		if pull {
			pull = s.pullBacklog(ctx, e, work)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.embeds.signal:
		}
	}
}

// pullBacklog hands the oldest pullBatch entries without a vector to the workers and
// waits for them. It reports whether more may be left: false when none were listed, none
// could be claimed (other embedders hold them) or a chunk failed (the sweep retries).
func (s *Service) pullBacklog(ctx context.Context, e embed.Embedder, work chan<- embedJob) bool {
	if e.Name() == embed.KindNone {
		return false
	}
	rows, err := s.listUnembedded(ctx, e, s.now().Add(time.Second), pullBatch)
	if err != nil {
		s.embedFailed(ctx, 0, err)
		return false
	}
	var (
		pending sync.WaitGroup
		mu      sync.Mutex
		stored  int
		failed  error
	)
	for rows := range slices.Chunk(rows, embedChunk) {
		pending.Add(1)
		j := embedJob{e: e, rows: rows, done: func(n int, err error) {
			mu.Lock()
			stored += n
			failed = cmp.Or(failed, err)
			mu.Unlock()
			pending.Done()
		}}
		select {
		case work <- j:
		case <-ctx.Done():
			pending.Done()
			pending.Wait()
			return false
		}
	}
	pending.Wait()
	if failed != nil {
		s.embedFailed(ctx, len(rows), failed)
		return false
	}
	return stored > 0
}

// embedFailed logs a chunk or a pull that failed, unless RunEmbedder is stopping.
func (s *Service) embedFailed(ctx context.Context, entries int, err error) {
	if err != nil && ctx.Err() == nil {
		s.log().WarnContext(ctx, "rooms: embedding deferred", "entries", entries, "error", err.Error())
	}
}

// listUnembedded lists up to limit entries written before before with no vector for e,
// the oldest across tenants (the owner's pool), grouped by project: a chunk of one
// project is one claim (claimUnembedded).
func (s *Service) listUnembedded(ctx context.Context, e embed.Embedder, before time.Time, limit int) (rows []db.MemoryEntryListUnembeddedRow, err error) {
	now := s.now()
	since := s.backlog.since(e.Name(), now)
	skip, _ := s.parked.skip(e.Name(), now)
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		rows, err = s.Q.MemoryEntryListUnembedded(ctx, tx, db.MemoryEntryListUnembeddedParams{Embedder: e.Name(), Since: since, Before: before, Skip: skip, Lim: int32(limit)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list entries without a vector: %w", err)
	}
	s.parked.forgetGone(e.Name(), now, since, before, rows, limit)
	_, oldestParked := s.parked.skip(e.Name(), now)
	s.backlog.advance(e.Name(), since, before, rows, oldestParked)
	slices.SortStableFunc(rows, func(a, b db.MemoryEntryListUnembeddedRow) int {
		return bytes.Compare(a.ProjectID[:], b.ProjectID[:])
	})
	return rows, nil
}

// embedChunk claims those of rows that still have no vector for e, embeds them and stores
// their vectors, in one transaction on the owner's pool, and returns how many it stored.
// Entries already stored, or claimed by another transaction, are left out, so an entry is
// embedded once however many embedders run.
func (s *Service) embedChunk(ctx context.Context, e embed.Embedder, rows []db.MemoryEntryListUnembeddedRow) (int, error) {
	if e.Name() == embed.KindNone || len(rows) == 0 {
		return 0, nil
	}
	var stored int
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		claimed, err := s.claimUnembedded(ctx, tx, e.Name(), rows)
		if err != nil || len(claimed) == 0 {
			return err
		}
		texts := make([]string, len(claimed))
		for i, r := range claimed {
			texts[i] = r.Content
		}
		vs, err := e.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("embed %d texts: %w", len(texts), err)
		}
		if len(vs) != len(claimed) {
			return fmt.Errorf("embed: %d vectors for %d texts", len(vs), len(claimed))
		}
		stored = len(claimed)
		// The vectors travel with the COMMIT: one round trip for the chunk.
		return tx.Pipeline(func() error { return s.storeVectors(ctx, tx, e.Name(), claimed, vs) })
	})
	if err != nil {
		return 0, fmt.Errorf("store vectors: %w", err)
	}
	return stored, nil
}

// claimUnembedded claims those of rows that have no vector for embedder and that no other
// transaction has claimed (MemoryEntryClaimUnembedded: an advisory lock per entry, which
// leaves the entry's row free to change while the embedder works), one project at a
// time, and returns them.
func (s *Service) claimUnembedded(ctx context.Context, tx *pg.Tx, embedder string, rows []db.MemoryEntryListUnembeddedRow) ([]db.MemoryEntryListUnembeddedRow, error) {
	var claimed []db.MemoryEntryListUnembeddedRow
	for len(rows) > 0 {
		project := rows[0].ProjectID
		ids := []uuid.UUID{}
		var rest []db.MemoryEntryListUnembeddedRow
		for _, r := range rows {
			if r.ProjectID == project {
				ids = append(ids, r.ID)
			} else {
				rest = append(rest, r)
			}
		}
		rows = rest
		got, err := s.Q.MemoryEntryClaimUnembedded(ctx, tx, db.MemoryEntryClaimUnembeddedParams{ProjectID: project, Ids: ids, Embedder: embedder})
		if err != nil {
			return nil, fmt.Errorf("claim entries: %w", err)
		}
		if len(got) == 0 {
			continue
		}
		// The claim's snapshot predates its locks: an entry whose vector another
		// transaction committed in between (releasing its lock) is locked but done.
		ids = ids[:0]
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		done, err := s.Q.MemoryVectorListIDs(ctx, tx, db.MemoryVectorListIDsParams{ProjectID: project, Ids: ids, Embedder: embedder})
		if err != nil {
			return nil, fmt.Errorf("recheck claimed entries: %w", err)
		}
		for _, r := range got {
			if !slices.Contains(done, r.ID) {
				claimed = append(claimed, db.MemoryEntryListUnembeddedRow{ProjectID: project, ID: r.ID, Content: r.Content})
			}
		}
	}
	return claimed, nil
}

// backlogMargin is how far before a listing's bound the backlog's next listing starts
// again: an entry is dated when its transaction starts and is seen only once it commits,
// which a request's database budget (5 s by default) bounds far below this.
const backlogMargin = 15 * time.Minute

// backlogFullEvery is how often the backlog lists from the first entry again, for
// whatever lost its vector row since it was passed (a row deleted by hand, a restore).
const backlogFullEvery = time.Hour

// backlogCursor remembers, per embedder, from when the embedding backlog's next listing
// reads: every entry written before it has its vector row (or had, at the last full
// pass). Without it each 30 s tick read every entry of every room to find none, which at
// a few hundred thousand entries took most of a second (docs/performance.md).
type backlogCursor struct {
	mu   sync.Mutex
	from map[string]time.Time // where the next listing starts
	full map[string]time.Time // when the last listing from the first entry ran
}

func newBacklogCursor() *backlogCursor {
	return &backlogCursor{from: map[string]time.Time{}, full: map[string]time.Time{}}
}

// since is where a listing of embedder's backlog at now starts: the zero time (the first
// entry) on the first listing and once backlogFullEvery has passed since the last such.
func (c *backlogCursor) since(embedder string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.full[embedder]; !ok || now.Sub(last) >= backlogFullEvery {
		c.full[embedder] = now
		return time.Time{}
	}
	return c.from[embedder]
}

// advance moves the cursor past a listing from since to before that found rows (oldest
// first, as many as its limit allowed) and left out parked entries, the oldest written at
// oldestParked (zero: none): the next starts at the oldest entry found or parked, which is
// still without a vector, or, when there is none, backlogMargin before the bound.
func (c *backlogCursor) advance(embedder string, since, before time.Time, rows []db.MemoryEntryListUnembeddedRow, oldestParked time.Time) {
	next := before.Add(-backlogMargin)
	if len(rows) > 0 && rows[0].CreatedAt.Before(next) {
		next = rows[0].CreatedAt
	}
	if !oldestParked.IsZero() && oldestParked.Before(next) {
		next = oldestParked
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if next.After(c.from[embedder]) || since.IsZero() {
		c.from[embedder] = next
	}
}
