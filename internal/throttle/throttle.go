// Package throttle limits failed authentication: how many refused credentials one client
// address, and one agent key id, may present per window. The counts live in Postgres, so
// every replica shares them, and the decision is the shared count's: before a credential
// this replica has not verified is checked, its subjects' counts are read, so a subject at
// its limit through any replica is refused on every replica from its next attempt. A
// block, once a replica has learnt it, is kept in that replica's memory until the window
// ends, so a blocked caller is refused without any database work; memory only ever
// refuses, it never admits what the shared count would refuse (a credential verified here
// recently is not a guess, and skips the read). A known credential costs a map lookup.
//
// The credentials verified recently are shared too, for agent keys: a replica records
// the hash of a key it accepted (auth_verified), and a replica that learns a key id's
// block from the shared counts reads that key id's verified credentials in the same
// transaction, so the key's holder passes the block on every replica, not only on those
// it happened to call before. A password's pass is never shared (see Attempt.Random).
package throttle

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
)

// Defaults of the settings (RELAYROOM_AUTH_FAILURE_WINDOW, …_PER_ADDRESS, …_PER_KEY,
// RELAYROOM_AUTH_BLOCKED_DELAY).
const (
	DefaultWindow       = time.Minute
	DefaultPerAddress   = 20
	DefaultPerKey       = 10
	DefaultBlockedDelay = time.Second
)

// Limits: at most PerAddress refused credentials per client address and PerKey per agent
// key id in each fixed Window; past either, the caller is refused until the window ends.
// A limit of 0 or less is off (nothing counted for that kind). Each refusal of a blocked
// caller is answered after BlockedDelay (or when the caller hangs up), so that one
// connection can send at most one blocked attempt per BlockedDelay: a flood then costs
// the server sleeping requests, not work. 0: answered at once.
type Limits struct {
	Window       time.Duration
	PerAddress   int
	PerKey       int
	BlockedDelay time.Duration
}

// Messages of the 429 answers.
const (
	MsgAddressBlocked = "too many failed authentications from this address: retry later"
	MsgKeyBlocked     = "too many failed authentications with this key: retry later"
)

const (
	// verifiedFor is how long a credential the database accepted may pass its key id's
	// block on this replica: someone guessing at a key's id must not lock its holder out.
	verifiedFor = 10 * time.Minute
	// Bounds of the in-memory maps. Past maxBlocked, new blocks are not remembered (each
	// further attempt then costs its transactions again, and the shared count still
	// refuses it); past maxVerified, new credentials are not remembered.
	maxBlocked  = 100_000
	maxVerified = 10_000
	// recordTimeout bounds recording a refusal, which outlives the request on purpose.
	recordTimeout = 5 * time.Second
)

// Subject prefixes, as stored (the migration's CHECK names the same two).
const (
	addressSubject = "addr:"
	keySubject     = "key:"
)

// Attempt is one authentication as the throttle sees it.
type Attempt struct {
	Address    string // the client address (ClientAddress), "" when unknown
	KeyID      string // the public id of a well-formed agent key, "" when none
	Credential string // what was presented, to recognise one verified before; never stored
	// Always: every attempt is counted, not only refused credentials (a rate, such as
	// client registrations), so Admit reads the shared count even with no credential.
	Always bool
	// Random: Credential is one of relayroom's random secrets (an agent key, 190 random
	// bits), whose SHA-256 may be stored (its own table stores the same): once verified,
	// it is shared with every replica. Never set for a password, whose fast hash could be
	// guessed offline: a sign-in's pass stays the replica's that checked it.
	Random bool
}

// pass is how long a verified credential passes its key id's block here (until), and how
// long every replica knows it from auth_verified (shared; zero when never recorded).
type pass struct{ until, shared time.Time }

// Throttle is safe for concurrent use. Build it with New.
type Throttle struct {
	db     *pg.DB
	q      *db.Queries
	limits Limits
	log    *slog.Logger
	now    func() time.Time

	mu        sync.Mutex
	blocked   map[string]time.Time // subject → blocked until (this process's clock)
	verified  map[[32]byte]pass    // credential hash → its pass through a key id's block
	sweepAt   int                  // sweep expired blocks when blocked grows past this
	warnAfter time.Time            // recording failures are logged once per window
}

// New returns a throttle counting in d. now may be nil (time.Now).
func New(d *pg.DB, l Limits, log *slog.Logger, now func() time.Time) *Throttle {
	if l.Window <= 0 {
		l.Window = DefaultWindow
	}
	if now == nil {
		now = time.Now
	}
	return &Throttle{
		db: d, q: db.New(), limits: l, log: log, now: now,
		blocked: map[string]time.Time{}, verified: map[[32]byte]pass{}, sweepAt: 1024,
	}
}

// Admit refuses an attempt whose address or key id is blocked, with apperr.RateLimited
// carrying retry_after_seconds (HTTP 429 and Retry-After on every endpoint), after
// BlockedDelay or when ctx ends. A block this replica knows is read from memory; an
// attempt that would be checked against the database (a credential not verified here
// recently, or an Always attempt) first reads its subjects' shared counts, so that no
// replica checks a credential for a subject already at its limit.
func (t *Throttle) Admit(ctx context.Context, at Attempt) error {
	err := t.check(at)
	if err == nil && t.unknown(at) {
		err = t.checkShared(ctx, at)
	}
	if err != nil && t.limits.BlockedDelay > 0 {
		timer := time.NewTimer(t.limits.BlockedDelay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return err
}

// unknown reports whether at would cost a check of its credential (or, Always, is counted
// whatever it presents): a request with no credential guesses nothing, and a credential
// this replica verified recently is its holder's.
func (t *Throttle) unknown(at Attempt) bool {
	if at.Always {
		return true
	}
	if at.Credential == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.verifiedLocked(at, t.now())
}

// checkShared learns the blocks of at's subjects from their shared counts, then decides
// as check does. A failure to read is logged (once per window) and admits: the credential
// check that follows needs the same database, and a refusal is still counted.
func (t *Throttle) checkShared(ctx context.Context, at Attempt) error {
	subjects := t.subjects(at)
	if len(subjects) == 0 {
		return nil
	}
	counts, passes, err := t.countsAndPasses(ctx, subjects, func(tx *pg.Tx) ([]count, error) {
		return countsOf(t.q.AuthThrottleFailures(ctx, tx, db.AuthThrottleFailuresParams{Subjects: subjects, WindowSeconds: t.limits.Window.Seconds()}))
	})
	if err != nil {
		t.warn(ctx, fmt.Errorf("throttle: read the shared counts: %w", err))
		return nil
	}
	t.learn(counts, passes)
	return t.check(at)
}

// passes reads, in the transaction that read or wrote counts, the credentials any replica
// verified for the key ids counts block: only when a key id is blocked, so an attempt
// under the limits pays nothing for it.
func (t *Throttle) passes(ctx context.Context, tx *pg.Tx, counts []count) ([]db.AuthVerifiedListRow, error) {
	var keys []string
	for _, c := range counts {
		if strings.HasPrefix(c.subject, keySubject) && t.over(c) {
			keys = append(keys, c.subject)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := t.q.AuthVerifiedList(ctx, tx, keys)
	if err != nil {
		return nil, fmt.Errorf("read the verified credentials: %w", err)
	}
	return rows, nil
}

// count is one subject's failures in its live window, as stored.
type count struct {
	subject     string
	failures    int32
	secondsLeft float64
}

// countRow is a row of the two count queries (AuthThrottleFailures only reads the counts,
// AuthThrottleRecordFailures also records): sqlc gives each a type of its own.
type countRow = struct {
	Subject     string
	Failures    int32
	SecondsLeft float64
}

// countsOf is a count query's rows as counts, passing its error on.
func countsOf[R ~countRow](rows []R, err error) ([]count, error) {
	counts := make([]count, len(rows))
	for i, r := range rows {
		c := countRow(r)
		counts[i] = count{c.Subject, c.Failures, c.SecondsLeft}
	}
	return counts, err
}

// over reports whether c has reached its subject's limit in a live window.
func (t *Throttle) over(c count) bool {
	limit := t.limits.PerKey
	if strings.HasPrefix(c.subject, addressSubject) {
		limit = t.limits.PerAddress
	}
	return int(c.failures) >= limit && c.secondsLeft > 0
}

// learn remembers the block of every subject whose count has reached its limit, and the
// credentials other replicas verified for those key ids (passes), as if verified here.
func (t *Throttle) learn(counts []count, passes []db.AuthVerifiedListRow) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range counts {
		if t.over(c) {
			t.blockLocked(c.subject, now.Add(seconds(c.secondsLeft)))
		}
	}
	for _, p := range passes {
		var h [32]byte
		if len(p.CredentialHash) != len(h) || p.SecondsLeft <= 0 {
			continue
		}
		copy(h[:], p.CredentialHash)
		if until := now.Add(seconds(p.SecondsLeft)); until.After(t.verified[h].until) {
			t.rememberLocked(h, pass{until: until, shared: until})
		}
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// subjects are the counted subjects of at, sorted (the order the record locks them in).
func (t *Throttle) subjects(at Attempt) []string {
	var subjects []string
	if at.Address != "" && t.limits.PerAddress > 0 {
		subjects = append(subjects, addressSubject+at.Address)
	}
	if at.KeyID != "" && t.limits.PerKey > 0 {
		subjects = append(subjects, keySubject+at.KeyID)
	}
	slices.Sort(subjects)
	return subjects
}

func (t *Throttle) check(at Attempt) error {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if until, ok := t.blockedLocked(addressSubject+at.Address, now); ok && at.Address != "" {
		return refusal(MsgAddressBlocked, until.Sub(now))
	}
	if at.KeyID == "" {
		return nil
	}
	until, ok := t.blockedLocked(keySubject+at.KeyID, now)
	if !ok {
		return nil
	}
	if t.verifiedLocked(at, now) {
		return nil // the key's own holder, verified here recently
	}
	return refusal(MsgKeyBlocked, until.Sub(now))
}

func (t *Throttle) verifiedLocked(at Attempt, now time.Time) bool {
	v, seen := t.verified[hash(at.Credential)]
	return seen && now.Before(v.until)
}

func (t *Throttle) blockedLocked(subject string, now time.Time) (time.Time, bool) {
	until, ok := t.blocked[subject]
	if !ok {
		return until, false
	}
	if !now.Before(until) {
		delete(t.blocked, subject)
		return until, false
	}
	return until, true
}

func refusal(msg string, left time.Duration) error {
	secs := int(math.Ceil(left.Seconds()))
	if secs < 1 {
		secs = 1
	}
	e := apperr.New(apperr.RateLimited, "%s", msg)
	e.Details = map[string]any{"retry_after_seconds": secs}
	return e
}

// Verified remembers a credential the database has just accepted, so that for a while (see
// verifiedFor) it passes its key id's block on this replica and costs no read of the
// shared counts. An agent key (Attempt.Random, with its key id) is also recorded for every
// replica (auth_verified), when this replica had not recorded it in the last half of
// verifiedFor: a key in use costs one write per replica every five minutes, not one per
// call. A failure to record is logged, at most once per window: the pass stays this
// replica's, as before.
func (t *Throttle) Verified(ctx context.Context, at Attempt) {
	if at.Credential == "" {
		return
	}
	h, now := hash(at.Credential), t.now()
	t.mu.Lock()
	p := t.verified[h]
	share := at.Random && at.KeyID != "" && t.limits.PerKey > 0 && p.shared.Sub(now) < verifiedFor/2
	p.until = now.Add(verifiedFor)
	t.rememberLocked(h, p)
	t.mu.Unlock()
	if !share {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	subject := keySubject + at.KeyID
	err := t.db.InTenant(ctx, pg.Tenant{Lookup: subject}, func(tx *pg.Tx) error {
		return t.q.AuthVerifiedRecord(ctx, tx, db.AuthVerifiedRecordParams{Subject: subject, CredentialHash: h[:], Seconds: verifiedFor.Seconds()})
	})
	if err != nil {
		t.warn(ctx, fmt.Errorf("throttle: record a verified credential: %w", err))
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.verified[h]; ok && v.shared.Before(p.until) {
		v.shared = p.until
		t.verified[h] = v
	}
}

// rememberLocked keeps h's pass p, within maxVerified credentials.
func (t *Throttle) rememberLocked(h [32]byte, p pass) {
	if _, ok := t.verified[h]; !ok && len(t.verified) >= maxVerified {
		now := t.now()
		for k, v := range t.verified {
			if !now.Before(v.until) {
				delete(t.verified, k)
			}
		}
		if len(t.verified) >= maxVerified {
			return
		}
	}
	t.verified[h] = p
}

// Refused counts a refused credential against its address and key id in the shared
// counters and remembers any block the counts now impose. It runs to completion even when
// the client has gone (a caller cannot escape the count by hanging up); a failure to count
// is logged, at most once per window, and otherwise ignored: the refusal itself stands.
func (t *Throttle) Refused(ctx context.Context, at Attempt) {
	// No longer accepted: it gets no pass through a block, here, even when another
	// replica's record of it is read below (there it lapses with its verified_until; a
	// pass never skips the credential's check, which refuses it and counts).
	forget := func() {
		if at.Credential != "" {
			t.mu.Lock()
			delete(t.verified, hash(at.Credential))
			t.mu.Unlock()
		}
	}
	forget()
	subjects := t.subjects(at)
	if len(subjects) == 0 {
		return
	}
	counts, passes, err := t.record(ctx, subjects)
	if err != nil {
		t.warn(ctx, err)
		return
	}
	t.learn(counts, passes)
	forget()
}

// Abandoned counts an authentication whose caller hung up before it was decided, as
// Refused does, unless the credential was verified here recently: hanging up must not
// dodge the count, but a known client cancelling its own call is not guessing.
func (t *Throttle) Abandoned(ctx context.Context, at Attempt) {
	t.mu.Lock()
	known := at.Credential != "" && t.verifiedLocked(at, t.now())
	t.mu.Unlock()
	if !known {
		t.Refused(ctx, at)
	}
}

// record counts a refusal against subjects and returns their counts, with the verified
// credentials of the key ids they now block.
func (t *Throttle) record(ctx context.Context, subjects []string) ([]count, []db.AuthVerifiedListRow, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	counts, passes, err := t.countsAndPasses(ctx, subjects, func(tx *pg.Tx) ([]count, error) {
		return countsOf(t.q.AuthThrottleRecordFailures(ctx, tx, db.AuthThrottleRecordFailuresParams{Subjects: subjects, WindowSeconds: t.limits.Window.Seconds()}))
	})
	if err != nil {
		return nil, nil, fmt.Errorf("throttle: record refused authentication: %w", err)
	}
	return counts, passes, nil
}

// countsAndPasses runs read (the subjects' shared counts, only read or also recorded) and,
// in the same transaction, reads the verified credentials of the key ids those counts
// block.
func (t *Throttle) countsAndPasses(ctx context.Context, subjects []string, read func(tx *pg.Tx) ([]count, error)) ([]count, []db.AuthVerifiedListRow, error) {
	var counts []count
	var passes []db.AuthVerifiedListRow
	err := t.db.InTenant(ctx, pg.Tenant{Lookup: strings.Join(subjects, ",")}, func(tx *pg.Tx) error {
		var err error
		if counts, err = read(tx); err != nil {
			return err
		}
		passes, err = t.passes(ctx, tx, counts)
		return err
	})
	return counts, passes, err
}

func (t *Throttle) blockLocked(subject string, until time.Time) {
	if _, ok := t.blocked[subject]; !ok && len(t.blocked) >= t.sweepAt {
		now := t.now()
		for k, v := range t.blocked {
			if !now.Before(v) {
				delete(t.blocked, k)
			}
		}
		t.sweepAt = max(2*len(t.blocked), 1024)
		if len(t.blocked) >= maxBlocked {
			return
		}
	}
	t.blocked[subject] = until
}

func (t *Throttle) warn(ctx context.Context, err error) {
	now := t.now()
	t.mu.Lock()
	due := !now.Before(t.warnAfter)
	if due {
		t.warnAfter = now.Add(t.limits.Window)
	}
	t.mu.Unlock()
	if due {
		t.log.WarnContext(ctx, "failed authentications are not being counted", "error", err.Error())
	}
}

// Prune deletes the counters whose window has ended and the shared verified credentials
// whose time has passed (a periodic job, on the owner's pool).
func (t *Throttle) Prune(ctx context.Context) (int64, error) {
	var n int64
	err := t.db.Operator(ctx, func(tx *pg.Tx) error {
		counters, err := t.q.AuthThrottlePrune(ctx, tx, t.limits.Window.Seconds())
		if err != nil {
			return err
		}
		verified, err := t.q.AuthVerifiedPrune(ctx, tx)
		n = counters + verified
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("throttle: prune: %w", err)
	}
	return n, nil
}

func hash(s string) [32]byte { return sha256.Sum256([]byte(s)) }
