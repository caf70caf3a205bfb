package rooms

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/embed"
)

// Entries the embedding server fails on, alone, while it embeds other texts (an Ollama
// answering 500 to one text, always) are parked: left out of the backlog's listings for a
// while, then tried again. The backlog lists its oldest entries first, so without this a
// hundred such entries at its head (one listing's worth) were listed, tried and failed on
// every tick, and no entry behind them, of any room, was ever embedded.
//
// Parking is decided only when the server is seen to work in the same tick (another entry
// embedded, or embedCanary answered): an outage fails every text alike and parks nothing,
// so the whole backlog is tried again as soon as the server is back.
//
// The parking lot is this process's memory: after a restart, or on another replica, a
// parked entry is tried once more before it is parked there too. That costs one failed
// call per entry and process, and needs no table and no write per failure.

// parkFirst is how long an entry is left out after its first failure; each further
// failure doubles it, up to parkLongest.
const (
	parkFirst   = time.Minute
	parkLongest = time.Hour
)

// parkGiveUp is how many failures (over about two hours with the times above) make an
// entry one the server will not embed: it is then stored without a vector for this
// embedder, as an entry the server refuses is, and found by its words only until the
// embedder changes.
const parkGiveUp = 8

// maxParked bounds the entries one process remembers. Past it a failing entry is not
// parked and is tried on every tick, as before parking existed; the warning says so.
const maxParked = 10_000

// embedCanary is the text that tells a server that is down from texts it fails on.
const embedCanary = "relayroom embedding check"

type parkedEntry struct {
	row      db.MemoryEntryListUnembeddedRow
	failures int
	until    time.Time
}

// parkingLot holds the parked entries of each embedder.
type parkingLot struct {
	mu      sync.Mutex
	entries map[string]map[uuid.UUID]*parkedEntry // embedder -> entry id
}

func newParkingLot() *parkingLot {
	return &parkingLot{entries: map[string]map[uuid.UUID]*parkedEntry{}}
}

// skip lists the entries of embedder still parked at now, for the listing to leave out,
// and the creation time of the oldest parked entry (zero when none is parked), where the
// backlog's cursor must stay so that each is listed again once it is due.
func (p *parkingLot) skip(embedder string, now time.Time) (ids []uuid.UUID, oldest time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids = []uuid.UUID{}
	for id, e := range p.entries[embedder] {
		if now.Before(e.until) {
			ids = append(ids, id)
		}
		if oldest.IsZero() || e.row.CreatedAt.Before(oldest) {
			oldest = e.row.CreatedAt
		}
	}
	return ids, oldest
}

// settle records a tick of embedder in which done were settled (embedded, refused, or
// claimed by another embedder) and the server failed on each of failed alone while it
// worked: done entries leave the lot, failed ones are parked (again, for twice as long),
// and those that failed parkGiveUp times are returned, to be stored without a vector. It
// reports how many could not be parked for want of room.
func (p *parkingLot) settle(embedder string, now time.Time, done, failed []db.MemoryEntryListUnembeddedRow) (givenUp []db.MemoryEntryListUnembeddedRow, noRoom int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lot := p.entries[embedder]
	if lot == nil {
		lot = map[uuid.UUID]*parkedEntry{}
		p.entries[embedder] = lot
	}
	for _, r := range done {
		delete(lot, r.ID)
	}
	for _, r := range failed {
		e := lot[r.ID]
		if e == nil {
			if len(lot) >= maxParked {
				noRoom++
				continue
			}
			e = &parkedEntry{row: r}
			lot[r.ID] = e
		}
		e.failures++
		if e.failures >= parkGiveUp {
			delete(lot, r.ID)
			givenUp = append(givenUp, r)
			continue
		}
		wait := parkFirst << (e.failures - 1)
		e.until = now.Add(min(wait, parkLongest))
	}
	return givenUp, noRoom
}

// forgetGone drops the parked entries of embedder that a listing from since to before of
// at most limit rows (oldest first) should have found, since they are due at now, and did
// not: another embedder stored their vectors, or they were deleted. Left in the lot they
// would hold the backlog's cursor at their creation time for good.
func (p *parkingLot) forgetGone(embedder string, now, since, before time.Time, rows []db.MemoryEntryListUnembeddedRow, limit int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lot := p.entries[embedder]
	if len(lot) == 0 {
		return
	}
	listed := make(map[uuid.UUID]bool, len(rows))
	for _, r := range rows {
		listed[r.ID] = true
	}
	for id, e := range lot {
		at := e.row.CreatedAt
		reached := len(rows) < limit || (len(rows) > 0 && !at.After(rows[len(rows)-1].CreatedAt))
		if !now.Before(e.until) && !listed[id] && !at.Before(since) && at.Before(before) && reached {
			delete(lot, id)
		}
	}
}

// serverWorks reports whether the embedder answers a text of its own: it tells a server
// that fails on some texts (it works) from one that is down.
func (s *Service) serverWorks(ctx context.Context, e embed.Embedder) bool {
	ctx, cancel := context.WithTimeout(ctx, s.embedTimeout())
	defer cancel()
	vs, err := e.Embed(ctx, []string{embedCanary})
	return err == nil && len(vs) == 1
}

// parkFailures settles a tick of EmbedPending in which done were settled and the server,
// seen to work, failed on each of failed alone: it parks those, and stores without a
// vector the ones that failed too often. It returns how many it stored so.
func (s *Service) parkFailures(ctx context.Context, e embed.Embedder, done, failed []db.MemoryEntryListUnembeddedRow) (int, error) {
	givenUp, noRoom := s.parked.settle(e.Name(), s.now(), done, failed)
	if noRoom > 0 {
		s.log().WarnContext(ctx, "rooms: too many memory entries the embedder fails on; the rest are tried on every tick",
			"embedder", e.Name(), "not_parked", noRoom, "parked_at_most", maxParked)
	}
	if len(givenUp) == 0 {
		return 0, nil
	}
	n, err := s.storeWithoutVector(ctx, e, givenUp)
	for _, r := range givenUp {
		s.log().WarnContext(ctx, "rooms: the embedder failed on a memory entry every time; it is found by its words only",
			"memory_id", r.ID.String(), "embedder", e.Name(), "failures", parkGiveUp)
	}
	return n, err
}
