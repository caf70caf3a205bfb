package rooms

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/stopwords"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// Search tuning.
const (
	// minCosine drops semantic candidates that are no closer than unrelated text: with the
	// builtin embedder (the Universal Sentence Encoder) unrelated texts score about
	// 0.1–0.3 and paraphrases 0.2–0.8.
	minCosine = 0.2
	// minRelevance drops entries whose fused score (see fusedScore) is below it.
	minRelevance = minCosine
	// absentBelow: when even the best entry scores below it, the room has nothing on the
	// query and read_memory says so (absentCut picks it by embedder). Calibrated on the
	// tune split of testdata/paraphrases.json with the builtin embedder (the Universal
	// Sentence Encoder): every off-topic query's best entry scored 0.21–0.33 there, and
	// 0.34 is the lowest cut that empties them all. The price: 2 of the 47 tune
	// paraphrases found in the top 3 without a cut have their best entry below it
	// (docs/rooms.md, "Paraphrase retrieval").
	absentBelow = 0.34
	// absentBelowGlove is the same cut for the GloVe embedder (RELAYROOM_EMBEDDER=glove),
	// calibrated the same way on its scale: off-topic queries' best entries scored
	// 0.24–0.38 there. Any other embedder (openai) gets absentBelow until calibrated.
	absentBelowGlove = 0.40
	// strongLexical is the lexical score from which a match is exact (the whole query as
	// a substring, 3) or has every query word (2 + rank): rr_memory_lexical's scale.
	strongLexical = 2.0
	// A lexical match on some of the query's words adds its rank (ts_rank_cd: 0.1 per
	// matched word occurrence) to its cosine when at least two occurrences match, at
	// most someTermsMax. One shared word is too weak a sign ("chess openings" stems to
	// "open" and matches a ticket left open): on the tune split any bonus for a single
	// word lost more paraphrases than it found.
	someTermsMin = 0.2
	someTermsMax = 0.3
)

// absentCut is absentBelow for the embedder called name.
func absentCut(name string) float64 {
	if name == embed.BuiltinName {
		return absentBelowGlove
	}
	return absentBelow
}

// hnswIndex is an HNSW expression index over memory_vector: the embedder's dimensions, the
// type its expression casts the embedding to (a search must cast to it as well, or the
// planner does not use the index) and the smallest candidate list of a search (ef; a
// search for more candidates uses their number).
type hnswIndex struct {
	dim int
	typ string
	ef  int
}

// hnswIndexed reports the HNSW index over memory_vector of embedder name, if it has one.
// Other embedders are searched exactly within the project.
//
// The builtin Universal Sentence Encoder's (migrations 000028 and 000045) holds the
// vectors in half precision, built with ef_construction 32: its insert, most of a stored
// vector's Postgres CPU, costs half of what the full-precision index with pgvector's
// default 64 cost. Its graph is a little coarser, which a longer candidate list makes up
// for: against an exact scan of 11,000 entries, agents' short queries find 0.949–0.953 of
// their ten nearest at ef 80, the old index 0.953–0.955 at 64, for the same search CPU
// (0.93 at 64, 0.96 at 100; docs/performance.md, "The USE index in half precision").
//
// GloVe's (000005) keeps full precision and ef 64. A search's cost grows with ef (150
// cost twice as much as 40 at 10,000 entries).
func hnswIndexed(name string) (hnswIndex, bool) {
	switch name {
	case embed.USEName:
		return hnswIndex{dim: embed.USEDim, typ: fmt.Sprintf("halfvec(%d)", embed.USEDim), ef: 80}, true
	case embed.BuiltinName:
		return hnswIndex{dim: 100, typ: "vector(100)", ef: 64}, true
	}
	return hnswIndex{}, false
}

// WriteMemoryInput is write_memory's arguments.
type WriteMemoryInput struct {
	Content    string   `json:"content"`
	Tags       []string `json:"tags,omitempty"`
	Category   string   `json:"category,omitempty"`
	IsDecision bool     `json:"is_decision,omitempty"`
	IsPrivate  bool     `json:"is_private,omitempty"`
}

// WriteMemoryResult is write_memory's answer.
type WriteMemoryResult struct {
	Success    bool    `json:"success"`
	MemoryID   string  `json:"memory_id"`
	WrittenBy  string  `json:"written_by"`
	SharedWith string  `json:"shared_with"`
	Category   *string `json:"category,omitempty"`
	Timestamp  string  `json:"timestamp"`
	// AlreadyStored: the same write was stored before (findSame), and that entry is
	// answered; nothing new was written and no card was posted. Absent otherwise.
	AlreadyStored bool `json:"already_stored,omitempty"`
}

// WriteMemory checks the agreement, refuses anything that looks like a secret (storing
// nothing), and stores the entry and a card in the room's conversation in one
// transaction. Its vector is made after the commit by RunEmbedder when it runs
// (embedder.go); otherwise the content is embedded first (waiting at most EmbedTimeout)
// and the vector stored in the same transaction. The write never fails because of the
// embedder: without a vector the entry waits for EmbedPending.
func (s *Service) WriteMemory(ctx context.Context, sc tenancy.Scope, in WriteMemoryInput) (WriteMemoryResult, error) {
	if err := requireGrant(sc, tenancy.GrantWriteMemory, MsgNoWriteMemory); err != nil {
		return WriteMemoryResult{}, err
	}
	if !sc.CanWrite() {
		// A read-only member reads the room's memory but does not add to it, as a
		// read-only part may not learn on the threads endpoint.
		return WriteMemoryResult{}, apperr.New(apperr.Forbidden, MsgNoWriteAccess, sc.Access)
	}
	if strings.TrimSpace(in.Content) == "" {
		return WriteMemoryResult{}, invalid("content must not be blank")
	}
	if s.Secrets == nil {
		return WriteMemoryResult{}, errors.New("rooms: no secret detector configured")
	}
	// Tags and the category are stored and shown in the card too: a secret in any of
	// them refuses the write, with the contract's one message.
	for _, text := range append([]string{in.Content, in.Category}, in.Tags...) {
		if len(s.Secrets.Scan(text)) > 0 {
			return WriteMemoryResult{}, apperr.New(apperr.Invalid, MsgSecret)
		}
	}
	tags := normTags(in.Tags)
	var category *string
	if c := strings.TrimSpace(in.Category); c != "" {
		category = &c
	}
	// The contract's example writes category "decision" and reads the entry back with
	// is_decision true: that category marks a decision, whatever the flag says.
	if category != nil && strings.EqualFold(*category, CategoryDecision) {
		in.IsDecision = true
	}
	id, at := newID(), s.now()
	e := s.embedder()
	deferred := s.deferEmbedding()
	var (
		vec      *pgvector.Vector
		embedded bool
	)
	if !deferred {
		vec, embedded = s.embedOne(ctx, e, in.Content)
	}

	var same *db.MemoryEntryFindSameRow
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		// The same write again (a client retrying without an Idempotency-Key, an agent
		// recording what it recorded before) answers the stored entry instead of filling
		// the room's memory and conversation with copies. Only the same write: other tags,
		// category, flag or visibility are an entry of their own.
		row, err := s.Q.MemoryEntryFindSame(ctx, tx, db.MemoryEntryFindSameParams{ProjectID: sc.ProjectID, Content: in.Content, Tags: tags,
			Category: category, IsDecision: in.IsDecision, IsPrivate: in.IsPrivate, OrgID: sc.OrgID})
		if err == nil {
			same = &row
			return nil
		}
		if !pg.IsNoRows(err) {
			return fmt.Errorf("find the same entry: %w", err)
		}
		// The entry, its vector and its card return nothing anyone reads: they travel
		// with the COMMIT, one round trip for the whole write (pg.Tx.Pipeline).
		return tx.Pipeline(func() error {
			if err := s.Q.MemoryEntryInsert(ctx, tx, db.MemoryEntryInsertParams{
				ProjectID: sc.ProjectID, ID: id, OrgID: sc.OrgID, AgentID: &sc.AgentID, Model: sc.AgentModel,
				Content: in.Content, Tags: tags, Category: category, IsDecision: in.IsDecision, IsPrivate: in.IsPrivate, CreatedAt: at,
			}); err != nil {
				return err
			}
			if deferred {
				tx.AfterCommit(func() {
					s.queueEmbedding(db.MemoryEntryListUnembeddedRow{ProjectID: sc.ProjectID, ID: id, Content: in.Content})
				})
			}
			if embedded {
				if err := s.Q.MemoryVectorInsert(ctx, tx, db.MemoryVectorInsertParams{
					ProjectID: sc.ProjectID, MemoryID: id, Embedder: e.Name(), Embedding: vec,
				}); err != nil {
					return err
				}
			}
			return s.card(ctx, tx, sc, cardMemory, memoryCard(sc, in, category), id, at)
		})
	})
	if err != nil {
		return WriteMemoryResult{}, pg.Classify("write memory", err)
	}
	shared := SharedWithAll
	if in.IsPrivate {
		shared = SharedWithOrg
	}
	if same != nil {
		// The writing agent may have been deleted since (agent_id set null).
		return WriteMemoryResult{Success: true, MemoryID: same.ID.String(), WrittenBy: orUnknown(same.AgentName, "Unknown"), SharedWith: shared,
			Category: same.Category, Timestamp: ts(same.CreatedAt), AlreadyStored: true}, nil
	}
	return WriteMemoryResult{Success: true, MemoryID: id.String(), WrittenBy: sc.AgentName, SharedWith: shared,
		Category: category, Timestamp: ts(at)}, nil
}

// CategoryDecision is the category that marks an entry as a decision (is_decision).
const CategoryDecision = "decision"

// cardMemory is the room_message kind of a memory write's card.
const cardMemory = "memory"

// memoryCardWithheld is the card as a company without the read_memory grant sees it: the
// card's excerpt is the entry's content, which the grant guards on every other path.
const memoryCardWithheld = "[memory] Wrote a memory entry. Its content is shown only to companies granted read_memory."

// memoryCard is what the conversation shows for a memory write. A private entry's card
// says only that one was written: its content is for the writer's organisation.
func memoryCard(sc tenancy.Scope, in WriteMemoryInput, category *string) string {
	what := "a memory entry"
	if in.IsDecision {
		what = "a decision"
	}
	if in.IsPrivate {
		return fmt.Sprintf("[memory] Wrote %s visible to %s only.", what, sc.OrgName)
	}
	c := ""
	if category != nil {
		c = " (" + *category + ")"
	}
	return fmt.Sprintf("[memory] Wrote %s%s: %s", what, c, excerpt(in.Content, 280))
}

func normTags(in []string) []string {
	out := make([]string, 0, len(in))
	seen := map[string]bool{}
	for _, t := range in {
		t = strings.TrimSpace(t)
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// embedOne embeds a text for storage. ok=false means "not embedded yet" (the embedder is
// off, slow or down): no vector row is written and EmbedPending retries. A zero vector is
// a finished embedding without semantic signal: stored as NULL so it is not retried.
func (s *Service) embedOne(ctx context.Context, e embed.Embedder, text string) (*pgvector.Vector, bool) {
	if e.Name() == embed.KindNone {
		return nil, false
	}
	ectx, cancel := context.WithTimeout(ctx, s.embedTimeout())
	defer cancel()
	vs, err := e.Embed(ectx, []string{text})
	if err != nil || len(vs) != 1 {
		if !errors.Is(err, embed.ErrDisabled) {
			s.log().WarnContext(ctx, "rooms: embedding deferred", "embedder", e.Name(), "error", fmt.Sprint(err))
		}
		return nil, false
	}
	if embed.IsZero(vs[0]) {
		return nil, true
	}
	v := pgvector.NewVector(vs[0])
	return &v, true
}

// EmbedPending embeds up to limit entries that have no vector row for the current
// embedder — entries written while the embedder was slow or down, and every entry after
// the embedder changes — and returns how many it finished. It runs across tenants on the
// operator pool; the periodic job calls it until it returns 0. Reads never wait for it:
// an entry without a current vector is still found lexically.
func (s *Service) EmbedPending(ctx context.Context, limit int) (int, error) {
	e := s.embedder()
	if e.Name() == embed.KindNone || limit <= 0 {
		return 0, nil
	}
	// Entries RunEmbedder has queued are left to it (sweepGrace).
	before := s.now().Add(time.Second)
	if s.embeds != nil && s.embeds.running.Load() {
		before = s.now().Add(-sweepGrace)
	}
	rows, err := s.listUnembedded(ctx, e, before, limit)
	if err != nil {
		return 0, fmt.Errorf("rooms: embed pending: %w", err)
	}
	// A chunk that fails is tried one entry at a time, and a failure never ends the tick:
	// the oldest entries are listed first, so a chunk left failing (one text longer than
	// the model takes, one text the server always fails on) would otherwise hold back the
	// whole backlog behind it, of every room, on every tick. An entry the server fails on
	// alone is parked (embedpark.go), so that even a listing's worth of them does not.
	var t embedTick
	for chunk := range slices.Chunk(rows, embedChunk) {
		n, err := s.embedChunk(ctx, e, chunk)
		switch {
		case err == nil:
			t.stored += n
			t.settled = append(t.settled, chunk...)
		case len(chunk) > 1 && ctx.Err() == nil:
			s.embedEach(ctx, e, chunk, &t)
		case embed.Refused(err):
			t.refusal = cmp.Or(t.refusal, err)
			if len(chunk) == 1 {
				t.refused = append(t.refused, chunk...)
			}
		default:
			t.failure = cmp.Or(t.failure, err)
			if len(chunk) == 1 && ctx.Err() == nil {
				t.failed = append(t.failed, chunk...)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	stored := t.stored
	// Whether the server works at all, asked once a tick and only when nothing it was sent
	// worked: a check text of its own tells a server that fails on these texts from one
	// that is down or misconfigured.
	checked, works := false, false
	serverWorks := func() bool {
		if !checked {
			checked, works = true, ctx.Err() == nil && s.serverWorks(ctx, e)
		}
		return works
	}
	if len(t.refused) > 0 && stored == 0 && !serverWorks() {
		// The server refused everything it was sent, its own check text too: its
		// configuration, not the texts. Nothing is marked; the next tick tries again.
		return 0, fmt.Errorf("rooms: embed pending: %w", t.refusal)
	}
	failure := t.failure
	if len(t.refused) > 0 {
		// The server embeds other entries: each of these it refuses alone is stored
		// without a vector for this embedder (as a blank text is), found by its words
		// only, and embedded again only when the embedder changes.
		n, err := s.storeWithoutVector(ctx, e, t.refused)
		for _, r := range t.refused {
			s.log().WarnContext(ctx, "rooms: the embedder refused a memory entry; it is found by its words only",
				"memory_id", r.ID.String(), "embedder", e.Name())
		}
		stored += n
		failure = cmp.Or(failure, err)
	}
	parked := len(t.failed) > 0
	if len(t.failed) > 0 || len(t.settled) > 0 || len(t.refused) > 0 {
		if len(t.failed) > 0 && stored == 0 && !serverWorks() {
			t.failed, parked = nil, false // down: nothing is the texts' fault
		}
		n, err := s.parkFailures(ctx, e, append(t.settled, t.refused...), t.failed)
		stored += n
		failure = cmp.Or(err, failure)
		if err == nil && parked && stored == 0 {
			failure = nil // every failure is parked: the server works, these texts do not
		}
	}
	if failure != nil && stored == 0 {
		return 0, fmt.Errorf("rooms: embed pending: %w", failure)
	}
	if failure != nil || parked {
		s.log().WarnContext(ctx, "rooms: some memory entries were not embedded; they are tried again later",
			"embedder", e.Name(), "parked", len(t.failed), "error", fmt.Sprint(failure))
	}
	return stored, nil
}

// embedTick is what one tick of EmbedPending did with the entries it listed.
type embedTick struct {
	stored  int                               // vectors stored
	settled []db.MemoryEntryListUnembeddedRow // embedded, or claimed by another embedder
	refused []db.MemoryEntryListUnembeddedRow // the server refused each alone
	failed  []db.MemoryEntryListUnembeddedRow // the server failed on each alone
	refusal error                             // the first refusal
	failure error                             // the first other failure
}

// embedEachGiveUp is how many failures in a row, with nothing embedded, end a chunk's
// one-by-one pass in one direction: the server is down, not one of the texts.
const embedEachGiveUp = 3

// embedEach embeds rows one at a time and adds what happened to each to t; rows it did
// not try (it gave up) are in none of t's lists and are left for the next tick. A pass
// that fails embedEachGiveUp times in a row before anything works goes on from the
// chunk's other end, and ends only when that end fails the same way: entries the server
// always fails on at the head of a chunk (listed first again on every tick) must not keep
// the rest of it from ever being tried.
func (s *Service) embedEach(ctx context.Context, e embed.Embedder, rows []db.MemoryEntryListUnembeddedRow, t *embedTick) {
	worked := false
	try := func(i int) (failed bool) {
		n, err := s.embedChunk(ctx, e, rows[i:i+1])
		switch {
		case err == nil:
			t.stored += n
			t.settled = append(t.settled, rows[i])
			worked = true
		case embed.Refused(err):
			t.refused, t.refusal = append(t.refused, rows[i]), cmp.Or(t.refusal, err)
			worked = true
		case ctx.Err() != nil:
			return true // stopping: not the text's fault
		default:
			t.failed, t.failure = append(t.failed, rows[i]), cmp.Or(t.failure, err)
			return true
		}
		return false
	}
	inARow := 0
	// stuck takes each try's outcome in turn, counts a pass's failures in a row and tells
	// whether the pass ends there.
	stuck := func(failed bool) bool {
		if failed {
			inARow++
		} else {
			inARow = 0
		}
		return ctx.Err() != nil || (!worked && inARow >= embedEachGiveUp)
	}
	lo := 0
	for ; lo < len(rows); lo++ {
		if stuck(try(lo)) {
			break
		}
	}
	if lo >= len(rows)-1 || ctx.Err() != nil {
		return
	}
	inARow = 0
	for hi := len(rows) - 1; hi > lo; hi-- {
		if stuck(try(hi)) {
			break
		}
	}
}

// storeWithoutVector claims rows that still have no vector for e and stores each without
// one (a null embedding), so the backlog no longer lists them.
func (s *Service) storeWithoutVector(ctx context.Context, e embed.Embedder, rows []db.MemoryEntryListUnembeddedRow) (int, error) {
	var n int
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		claimed, err := s.claimUnembedded(ctx, tx, e.Name(), rows)
		if err != nil {
			return err
		}
		n = len(claimed)
		return s.storeVectors(ctx, tx, e.Name(), claimed, make([][]float32, len(claimed)))
	})
	if err != nil {
		return 0, fmt.Errorf("store entries the embedder refused: %w", err)
	}
	return n, nil
}

func (s *Service) storeVectors(ctx context.Context, tx *pg.Tx, embedder string, rows []db.MemoryEntryListUnembeddedRow, vs [][]float32) error {
	for i, r := range rows {
		var v *pgvector.Vector
		if !embed.IsZero(vs[i]) {
			vv := pgvector.NewVector(vs[i])
			v = &vv
		}
		if err := s.Q.MemoryVectorInsert(ctx, tx, db.MemoryVectorInsertParams{
			ProjectID: r.ProjectID, MemoryID: r.ID, Embedder: embedder, Embedding: v,
		}); err != nil {
			return err
		}
	}
	return nil
}

// ReadMemoryInput is read_memory's arguments.
type ReadMemoryInput struct {
	Query    string   `json:"query"`
	Limit    int      `json:"limit,omitempty"`
	Category string   `json:"category,omitempty"`
	Tags     []string `json:"tags,omitempty"`
}

// MemoryEntry is one entry of read_memory.
type MemoryEntry struct {
	ID         string   `json:"id"`
	WrittenBy  string   `json:"written_by"`
	Model      string   `json:"model"`
	Timestamp  string   `json:"timestamp"`
	IsDecision bool     `json:"is_decision"`
	Category   *string  `json:"category,omitempty"`
	Tags       []string `json:"tags"`
	Content    string   `json:"content"`
	Relevance  *string  `json:"relevance,omitempty"`
	// OrgID is the writing company's, for the dashboard's company filter; not on the wire.
	OrgID uuid.UUID `json:"-"`
}

// ReadMemoryResult is read_memory's answer: found+entries, or message+entries when empty.
type ReadMemoryResult struct {
	Found   *int          `json:"found,omitempty"`
	Message string        `json:"message,omitempty"`
	Entries []MemoryEntry `json:"entries"`
	// Truncated is true when MaxMemoryBytes cut the answer short of limit (the entries
	// left out rank lower). Left out of a whole answer, which keeps the contract's shape.
	Truncated bool `json:"truncated,omitempty"`
	// Semantic reports whether the semantic half ran (not sent to clients).
	Semantic bool `json:"-"`
}

type filter struct {
	category *string
	tags     []string
}

// ReadMemory searches the room's memory: a semantic search (pgvector, cosine, over
// vectors of the current embedder only) and a lexical one (full text, plus a substring
// match for names and ids), fused into one score that orders the answer and that
// relevance reports (fuse); nothing relevant enough answers MsgNoMemory. Deprecated
// entries and other organisations' private entries are never returned.
func (s *Service) ReadMemory(ctx context.Context, sc tenancy.Scope, in ReadMemoryInput) (ReadMemoryResult, error) {
	if err := requireGrant(sc, tenancy.GrantReadMemory, MsgNoReadMemory); err != nil {
		return ReadMemoryResult{}, err
	}
	q := strings.TrimSpace(in.Query)
	if q == "" {
		return ReadMemoryResult{}, invalid("query must not be blank")
	}
	// The tool's schema bounds it too; the dashboard's search box is bounded only here,
	// and embedding a query costs CPU and memory by its length.
	if utf8.RuneCountInString(q) > MaxMemoryQuery {
		return ReadMemoryResult{}, invalid("query holds at most %d characters", MaxMemoryQuery)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 10
	}
	f := filter{tags: normTags(in.Tags)}
	if c := strings.TrimSpace(in.Category); c != "" {
		f.category = &c
	}
	e := s.embedder()
	qvec := s.queryVector(ctx, e, q)
	candidates := max(3*limit, 30)

	// Both halves, the lexical matches' cosines and the final load run in one
	// transaction, one after the other: under concurrency every extra transaction (its
	// tenant binding, BEGIN and COMMIT) cost more than running the halves side by side on
	// two connections saved (docs/performance.md, "Search and memory rows").
	var entries []MemoryEntry
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		var sem, semAll []scored
		if qvec != nil {
			var err error
			if semAll, err = s.semanticAll(ctx, tx, sc, e, qvec, f, candidates); err != nil {
				return err
			}
			sem = closeEnough(semAll)
		}
		lex, err := s.lexical(ctx, tx, q, f, candidates)
		if err != nil {
			return err
		}
		if qvec != nil && len(lex) > 0 {
			// A lexical match is ranked by its meaning too (fusedScore): its cosine, which
			// the semantic half only has for its own candidates.
			if err := s.lexicalCosines(ctx, tx, sc, e, qvec, lex, semAll); err != nil {
				return err
			}
		}
		ranked := fuse(limit, qvec != nil, absentCut(e.Name()), sem, lex)
		if len(ranked) == 0 {
			return nil
		}
		// Loading is primary-key lookups whatever the values; its joins' row-level
		// security makes planning cost more than running it: keep the generic plan.
		tx.PreferGenericPlan()
		entries, err = s.loadEntries(ctx, tx, sc, ranked)
		return err
	})
	if err != nil {
		return ReadMemoryResult{}, pg.Classify("read memory", err)
	}
	if len(entries) == 0 {
		return ReadMemoryResult{Message: MsgNoMemory, Entries: []MemoryEntry{}, Semantic: qvec != nil}, nil
	}
	entries, truncated := cutEntries(entries)
	n := len(entries)
	return ReadMemoryResult{Found: &n, Entries: entries, Semantic: qvec != nil, Truncated: truncated}, nil
}

// MaxMemoryBytes bounds the content one read_memory answer holds, as JSON writes it
// (never fewer than one entry): 50 entries of 20,000 control characters, six bytes each
// once written, made a 7 MB answer.
const MaxMemoryBytes = 1 << 20

// cutEntries keeps the best-ranked entries whose content fits MaxMemoryBytes, and
// reports whether it left any out.
func cutEntries(entries []MemoryEntry) ([]MemoryEntry, bool) {
	size := 0
	for i, e := range entries {
		if size += text.JSONSize(e.Content); i > 0 && size > MaxMemoryBytes {
			return entries[:i], true
		}
	}
	return entries, false
}

// queryVector embeds the query, or returns nil when the semantic half cannot run (embedder
// none, down, slow, or a query without semantic signal).
func (s *Service) queryVector(ctx context.Context, e embed.Embedder, q string) []float32 {
	if e.Name() == embed.KindNone {
		return nil
	}
	ectx, cancel := context.WithTimeout(ctx, s.embedTimeout())
	defer cancel()
	vs, err := e.Embed(ectx, []string{q})
	if err != nil || len(vs) != 1 || embed.IsZero(vs[0]) {
		if err != nil && !errors.Is(err, embed.ErrDisabled) {
			s.log().WarnContext(ctx, "rooms: read_memory without semantic search", "embedder", e.Name(), "error", err.Error())
		}
		return nil
	}
	return vs[0]
}

type scored struct {
	id    uuid.UUID
	score float64
	// cos is a lexical match's cosine with the query (lexicalCosines); nil when the
	// entry has no vector of the current embedder or the search is not semantic.
	cos *float64
}

// visible is the WHERE clause every memory read shares ($1 project, $2 org, $3 category,
// $4 tags). The filters match in any case, as the lexical half's do (migration 000062):
// "Decision" is the decision category, so a filter of "decision" must find it.
const visible = `e.project_id = $1 AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
  AND ($3::text IS NULL OR lower(e.category) = lower($3))
  AND (coalesce(cardinality($4::text[]), 0) = 0 OR EXISTS (SELECT 1 FROM unnest(e.tags) t, unnest($4::text[]) f WHERE lower(t) = lower(f)))`

func (s *Service) semanticAll(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, e embed.Embedder, qvec []float32, f filter, n int) ([]scored, error) {
	ix, ok := hnswIndexed(e.Name())
	if !ok || len(qvec) != ix.dim {
		return s.semanticExact(ctx, tx, sc, e, qvec, f, n)
	}
	// Matches the partial expression index: the embedder is a literal (a constant name,
	// never user input), the ORDER BY the indexed expression. Iterative scans keep
	// returning candidates past the project and visibility filters until the limit is met
	// (pgvector 0.8). The cosine reported is the full vector's, as lexicalCosines and the
	// exact scan compute it: one score per entry whichever half found it, on the scale the
	// cuts (minCosine, absentCut) were calibrated on; the index's type only chooses the
	// candidates, which are then ordered by that cosine.
	hnswSettings(tx, ix, n)
	return queryScored(ctx, tx, "semantic search", semanticIndexedSQL(e.Name(), ix), sc.ProjectID, sc.OrgID, f.category, f.tags, pgvector.NewVector(qvec), n)
}

// hnswSettings sets the scan's settings for a search of n candidates in index ix.
func hnswSettings(tx *pg.Tx, ix hnswIndex, n int) {
	tx.SetLocal("hnsw.ef_search", fmt.Sprint(max(ix.ef, n)))
	tx.SetLocal("hnsw.iterative_scan", "relaxed_order")
}

// semanticIndexedSQL is the semantic half's statement for embedder name, whose HNSW index
// is ix: the candidates in the index's order, then by their full vector's cosine. Its
// arguments are visible's, the query vector ($5) and the number of candidates ($6).
func semanticIndexedSQL(name string, ix hnswIndex) string {
	return `SELECT id, cos FROM (
  SELECT e.id, 1 - (v.embedding <=> $5::vector) AS cos
  FROM memory_vector v JOIN memory_entry e ON e.project_id = v.project_id AND e.id = v.memory_id
  WHERE v.project_id = $1 AND v.embedder = '` + name + `' AND v.embedding IS NOT NULL AND ` + visible + `
  ORDER BY v.embedding::` + ix.typ + ` <=> $5::` + ix.typ + `
  LIMIT $6) t ORDER BY cos DESC`
}

// semanticExact is the semantic half as an exact scan of the project's vectors of the
// embedder: for embedders without an index, and the ground truth the index's recall is
// measured against.
func (s *Service) semanticExact(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, e embed.Embedder, qvec []float32, f filter, n int) ([]scored, error) {
	const sql = `SELECT e.id, 1 - (v.embedding <=> $5::vector) AS cos
  FROM memory_vector v JOIN memory_entry e ON e.project_id = v.project_id AND e.id = v.memory_id
  WHERE v.project_id = $1 AND v.embedder = $7 AND v.embedding IS NOT NULL
    AND vector_dims(v.embedding) = vector_dims($5::vector) AND ` + visible + `
  ORDER BY v.embedding <=> $5::vector
  LIMIT $6`
	return queryScored(ctx, tx, "semantic search", sql, sc.ProjectID, sc.OrgID, f.category, f.tags, pgvector.NewVector(qvec), n, e.Name())
}

// queryScored runs a search half's statement, whose rows are (id, score).
func queryScored(ctx context.Context, tx *pg.Tx, op, sql string, args ...any) ([]scored, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (scored, error) {
		var x scored
		return x, r.Scan(&x.id, &x.score)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// closeEnough is the semantic candidates without those no closer than unrelated text.
func closeEnough(all []scored) []scored {
	kept := make([]scored, 0, len(all))
	for _, x := range all {
		if x.score >= minCosine {
			kept = append(kept, x)
		}
	}
	return kept
}

// lexicalSQL runs the lexical half in the database (migrations 000005 and 000038,
// rr_memory_lexical): see there why it is a SECURITY DEFINER function and how it applies
// the tenant. Its arguments are the query, a LIKE pattern or NULL, the filters and a limit.
const lexicalSQL = `SELECT id, score FROM rr_memory_lexical($1, $2, $3, $4, $5)`

func (s *Service) lexical(ctx context.Context, tx *pg.Tx, q string, f filter, n int) ([]scored, error) {
	// The whole query as a substring finds exact names and ids ("ZX-4471", "Acme Corp");
	// a sentence is left to full text, which ranks it better and costs less.
	// Not a query made of stop words: "the" is inside nearly every entry (and inside
	// "other" and "there"), and matched every entry as exactly as an id.
	var like *string
	if l := len(q); l >= 3 && l <= 100 && len(strings.Fields(q)) <= 3 && !stopwords.Only(q) {
		p := pg.LikeSubstring(q)
		like = &p
	}
	return queryScored(ctx, tx, "lexical search", lexicalSQL, q, like, f.category, f.tags, n)
}

// lexicalCosines fills in the cosine of each lexical match that has a vector of the
// current embedder, in the lexical half's transaction. A match among the semantic half's
// candidates (semAll, before closeEnough) takes the cosine that half computed, the same
// expression over the same vector: only the others' vectors are read, and when there are
// none no statement is sent.
func (s *Service) lexicalCosines(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, e embed.Embedder, qvec []float32, lex, semAll []scored) error {
	known := make(map[uuid.UUID]float64, len(semAll))
	for _, x := range semAll {
		known[x.id] = x.score
	}
	var ids []uuid.UUID
	at := make(map[uuid.UUID]int, len(lex))
	for i, x := range lex {
		if cos, ok := known[x.id]; ok {
			lex[i].cos = &cos
			continue
		}
		ids, at[x.id] = append(ids, x.id), i
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT memory_id, 1 - (embedding <=> $3::vector)
FROM memory_vector
WHERE project_id = $1 AND embedder = $2 AND memory_id = ANY($4::uuid[]) AND embedding IS NOT NULL
  AND vector_dims(embedding) = vector_dims($3::vector)`, sc.ProjectID, e.Name(), pgvector.NewVector(qvec), ids)
	if err != nil {
		return fmt.Errorf("lexical cosines: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  uuid.UUID
			cos float64
		)
		if err := rows.Scan(&id, &cos); err != nil {
			return fmt.Errorf("lexical cosines: %w", err)
		}
		lex[at[id]].cos = &cos
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lexical cosines: %w", err)
	}
	return nil
}

// ranked is one entry of read_memory's answer before loading: its id and, when the
// search ran semantically, the fused score its relevance reports.
type ranked struct {
	id    uuid.UUID
	score *float64
}

// fusedScore is one number for an entry found by meaning, by words or both, on the
// cosine's scale so that relevance can show it: the cosine, lifted when the entry shares
// at least two of the query's words (someTermsMin); an exact or every-word match scores at
// least 0.5 (0.5 + half its cosine), above any off-topic entry, so a name or an id is
// found even when its meaning is far off (or its vector not made yet).
func fusedScore(cos float64, lexScore float64, lexical bool) float64 {
	switch {
	case lexical && lexScore >= strongLexical:
		return 0.5 + 0.5*max(cos, 0)
	case lexical && lexScore >= someTermsMin:
		return cos + min(lexScore, someTermsMax)
	}
	return cos
}

// fuse merges the semantic candidates (score: cosine) and the lexical ones (score:
// rr_memory_lexical's) into the answer's order, best first, at most limit.
//
// Semantic search: every candidate gets its fusedScore; candidates below minRelevance
// are dropped, and when even the best one is below cut (absentCut) the room has nothing on
// the query and the answer is empty. The order is the score's, so the relevance each
// entry reports is what ranked it. Lexical only — no query vector, or no candidate with
// a vector of the current embedder (just after a switch of embedder, before
// EmbedPending caught up): the lexical order, no score, no threshold (a cosine-scale
// threshold means nothing without cosines).
func fuse(limit int, semantic bool, cut float64, sem, lex []scored) []ranked {
	if semantic && len(sem) == 0 && !slices.ContainsFunc(lex, func(x scored) bool { return x.cos != nil }) {
		semantic = false
	}
	if !semantic {
		out := make([]ranked, 0, min(limit, len(lex)))
		for _, x := range lex[:min(limit, len(lex))] {
			out = append(out, ranked{id: x.id})
		}
		return out
	}
	type cand struct {
		cos      float64
		lexScore float64
		lexical  bool
	}
	cands := map[uuid.UUID]*cand{}
	var order []uuid.UUID
	get := func(id uuid.UUID) *cand {
		c, ok := cands[id]
		if !ok {
			c = &cand{}
			cands[id] = c
			order = append(order, id)
		}
		return c
	}
	for _, x := range sem {
		get(x.id).cos = x.score
	}
	for _, x := range lex {
		c := get(x.id)
		c.lexical, c.lexScore = true, x.score
		if x.cos != nil {
			c.cos = *x.cos
		}
	}
	out := make([]ranked, 0, len(order))
	for _, id := range order {
		c := cands[id]
		sc := fusedScore(c.cos, c.lexScore, c.lexical)
		if sc >= minRelevance {
			out = append(out, ranked{id: id, score: &sc})
		}
	}
	// Ties keep the semantic half's order, then the lexical half's: deterministic.
	sort.SliceStable(out, func(i, j int) bool { return *out[i].score > *out[j].score })
	if len(out) == 0 || *out[0].score < cut {
		return nil
	}
	return out[:min(limit, len(out))]
}

func (s *Service) loadEntries(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, list []ranked) ([]MemoryEntry, error) {
	ids := make([]uuid.UUID, len(list))
	for i, r := range list {
		ids[i] = r.id
	}
	rows, err := tx.Query(ctx, `SELECT e.id, a.name, o.name, e.model, e.created_at, e.is_decision, e.category, e.tags, e.content, e.org_id
FROM memory_entry e
LEFT JOIN agent a ON a.id = e.agent_id
LEFT JOIN organisation o ON o.id = e.org_id
WHERE e.project_id = $1 AND e.id = ANY($2::uuid[]) AND e.deprecated_at IS NULL
  AND (NOT e.is_private OR e.org_id = $3)`, sc.ProjectID, ids, sc.OrgID)
	if err != nil {
		return nil, fmt.Errorf("load entries: %w", err)
	}
	byID := map[uuid.UUID]MemoryEntry{}
	for rows.Next() {
		var (
			id, orgID      uuid.UUID
			name, org, cat *string
			model, content string
			at             time.Time
			dec            bool
			tags           []string
		)
		if err := rows.Scan(&id, &name, &org, &model, &at, &dec, &cat, &tags, &content, &orgID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load entries: %w", err)
		}
		me := MemoryEntry{ID: id.String(), WrittenBy: nameOrg(name, org), Model: model, Timestamp: ts(at),
			IsDecision: dec, Category: cat, Tags: tags, Content: content, OrgID: orgID}
		if me.Tags == nil {
			me.Tags = []string{}
		}
		byID[id] = me
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load entries: %w", err)
	}
	out := make([]MemoryEntry, 0, len(list))
	for _, r := range list {
		if me, ok := byID[r.id]; ok {
			if r.score != nil {
				me.Relevance = strp(relevance(*r.score))
			}
			out = append(out, me)
		}
	}
	return out, nil
}

// relevance is a fused score (fusedScore) shown as a rounded percentage, clamped to
// 0–100. Rounding and clamping never invert two scores, so the order holds.
func relevance(cos float64) string {
	p := math.Round(math.Max(0, math.Min(1, cos)) * 100)
	return fmt.Sprintf("%d%%", int(p))
}
