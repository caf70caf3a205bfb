package tenancy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
)

// ScopeCacheTTL is how long a resolved Scope's derived part (names, the directory lists)
// is reused for the same credentials. What decides what a caller may do is never taken
// from the cache: every call verifies the key (and connect code) against the stored
// hashes and reads the membership and agreement again, in one round trip, so a revoked
// key or code, a suspended agreement, a removed membership or a changed access is
// refused or followed by the very next call on every replica. Only what the caller may
// see of the directory (who else is in its rooms, their names) can be up to this old, and
// up to one more ScopeCacheTTL while one caller refreshes an expired entry (get).
const ScopeCacheTTL = 2 * time.Second

// scopeCacheMax bounds the cache: past it, expired entries are dropped, and if none has
// expired the whole cache is, so a flood of distinct valid credentials cannot grow it.
const scopeCacheMax = 4096

// scopeKey names a resolution: the hash of the presented credentials (only credentials
// that verified are ever stored, and a hit is verified again), and the project and part
// the address names.
type scopeKey struct {
	kind    byte // 'p' threads part, 'r' room, 'a' agent
	creds   [sha256.Size]byte
	project uuid.UUID
	part    string
}

type scopeEntry struct {
	scope Scope
	until time.Time
	// refreshing is when a caller found the entry expired and went to resolve it in
	// full; zero while nobody is.
	refreshing time.Time
}

// scopeCache holds Scopes resolved a moment ago (Resolver). nil caches nothing.
type scopeCache struct {
	ttl     time.Duration
	now     func() time.Time
	mu      sync.Mutex
	entries map[scopeKey]scopeEntry
}

// newScopeCache is a cache keeping entries for ttl; nil (caching nothing) when ttl ≤ 0.
func newScopeCache(ttl time.Duration) *scopeCache {
	if ttl <= 0 {
		return nil
	}
	return &scopeCache{ttl: ttl, now: time.Now, entries: map[scopeKey]scopeEntry{}}
}

// WithScopeCache returns a resolver on the same database whose cache keeps a resolution
// for ttl (an empty cache of its own; ttl ≤ 0: none, every call resolved in full). The
// service uses NewResolver's ScopeCacheTTL; tests choose theirs so that what they assert
// does not depend on the time a call takes.
func (r *Resolver) WithScopeCache(ttl time.Duration) *Resolver {
	c := *r
	c.cache = newScopeCache(ttl)
	return &c
}

func credentialsDigest(hashes ...[]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, b := range hashes {
		h.Write(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// get answers the entry for k while it is fresh. Once it has expired, the first caller
// gets a miss and resolves in full (put renews the entry), and the callers that come
// while it does are served the expired entry, for at most one more ttl: without that, 32
// connections of one agent all found the entry expired at the same moment and each ran
// the full resolution (measured under the load test: 285 times in one run, 20 ms each).
// A served entry is verified by recheck like any other, so this only lets the directory
// lists be one refresh older.
func (c *scopeCache) get(k scopeKey) (Scope, bool) {
	if c == nil {
		return Scope{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return Scope{}, false
	}
	now := c.now()
	if now.Before(e.until) {
		return e.scope, true
	}
	if !e.refreshing.IsZero() && now.Before(e.refreshing.Add(c.ttl)) {
		return e.scope, true
	}
	// Nobody is refreshing it, or the one who was never put an answer back (its
	// resolution failed or its request ended): this caller refreshes it.
	e.refreshing = now
	c.entries[k] = e
	return Scope{}, false
}

func (c *scopeCache) put(k scopeKey, s Scope) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= scopeCacheMax {
		for key, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= scopeCacheMax {
			clear(c.entries)
		}
	}
	c.entries[k] = scopeEntry{scope: s, until: now.Add(c.ttl)}
}

func (c *scopeCache) drop(k scopeKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.entries, k)
	c.mu.Unlock()
}

// verification is the check of a resolution served from the cache (pg.Verification): in
// one round trip, CredentialAssumeCachedTenant verifies the key (and connect code) against
// the stored hashes and, only then, sets the cached tenant with its cached directory
// lists; then ScopeConfirmMember (AgentConfirmOwn for an agent alone) finds the membership
// and the agreement exactly as cached, moving last_seen, or raises (rr_unverified), so
// that nothing sent after it runs. Revocation,
// suspension, removal and any change of access, capabilities, grants, parking or names are
// therefore seen by the very next call on every replica; only the directory lists can be
// a ScopeCacheTTL old.
func (r *Resolver) verification(cached Scope, key auth.Parsed, code *auth.Parsed, projectID *uuid.UUID) *pg.Verification {
	lookup := key.ID
	p := db.CredentialAssumeCachedTenantParams{KeyID: key.ID, KeyHash: key.Hash(), AgentID: cached.AgentID, ProjectID: projectID}
	if code != nil {
		lookup += "," + code.ID
		p.CodeID, p.CodeHash = code.ID, code.Hash()
	}
	if v := cached.Visible; v != nil {
		p.Orgs, p.Projects, p.Agents, p.Users = v.Orgs, v.Projects, v.Agents, v.Users
	}
	// A NULL array compares as unknown, never equal: the cache holds nil for none.
	confirm := db.ScopeConfirmMemberParams{MemberID: cached.MemberID, Part: cached.Part, IsMain: cached.IsMain,
		Nickname: cached.Nickname, Access: cached.Access, Capabilities: nonNil(cached.Capabilities),
		ParkedUntil: cached.ParkedUntil, AgreementStatus: cached.AgreementStatus, Grants: nonNil(cached.Grants)}
	return &pg.Verification{Tenant: cached.Tenant(), Lookup: lookup, Queue: func(ctx context.Context, tx *pg.Tx) error {
		if err := tx.Pipeline(func() error { return r.Q.CredentialAssumeCachedTenant(ctx, tx, p) }); err != nil {
			return fmt.Errorf("verify credentials: %w", err)
		}
		return tx.Verifying(func() error {
			if !cached.InRoom() {
				return r.Q.AgentConfirmOwn(ctx, tx)
			}
			return r.Q.ScopeConfirmMember(ctx, tx, confirm)
		})
	}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// recheck serves a resolution from the cache when ck is there. A provisional resolver
// (Provisional) returns an admitted one at once, its verification to travel with the
// request's first statements (pending); otherwise it is verified here, in one round trip
// (verification). ok is false, and the entry dropped, when nothing is cached or the
// verification failed: the uncached path then resolves in full, and says why when it
// refuses. full is that path, for Settle.
func (r *Resolver) recheck(ctx context.Context, what string, ck scopeKey, key auth.Parsed, code *auth.Parsed, projectID *uuid.UUID, full func(context.Context) (Scope, error)) (Scope, bool, error) {
	cached, ok := r.cache.get(ck)
	if !ok {
		return Scope{}, false, nil
	}
	v := r.verification(cached, key, code, projectID)
	if r.final != nil && cached.admitted() {
		cached.pending = &pending{check: v, key: ck, full: full}
		return cached, true, nil
	}
	err := r.DB.Verify(ctx, v)
	if errors.Is(err, pg.ErrUnverified) {
		r.cache.drop(ck)
		return Scope{}, false, nil
	}
	if err != nil {
		return Scope{}, false, pg.Classify(what, err)
	}
	return cached, true, nil
}

// pending is what a provisional Scope carries until it is settled.
type pending struct {
	check *pg.Verification
	key   scopeKey
	// full resolves the request's credentials again without the cache.
	full func(context.Context) (Scope, error)
}

// Provisional returns a resolver on the same database and cache whose resolutions served
// from the cache are provisional: the Scope comes back without a round trip, and its
// verification (the one a cached resolution always gets) is left to the request's first
// tenant transaction, which carries it in its own first round trip once the context comes
// from Defer. Such a Scope must be settled (Settle) before anything but a tool's handler,
// in Defer's context, uses it: internal/mcp's Provisional does this for the MCP endpoints,
// which alone use it.
func (r *Resolver) Provisional() *Resolver {
	c := *r
	c.final = r
	return &c
}

// Defer returns the context in which s's verification, if it is still to be made, travels
// with the first tenant transaction (pg.Verification).
func Defer(ctx context.Context, s Scope) context.Context {
	if s.pending == nil {
		return ctx
	}
	return pg.WithVerification(ctx, s.pending.check)
}

// Settled reports whether s is final: resolved in full, verified, or provisional and
// verified by a transaction since.
func (s Scope) Settled() bool { return s.pending == nil || s.pending.check.Passed() }

// Settle makes s final. held is true when s stands as it is: it was final, or its
// verification passed (made here, one round trip, when no transaction made it). When the
// verification failed, the cache entry is dropped and the credentials are resolved in full:
// the new Scope (held false), or the refusal the uncached path gives.
func (r *Resolver) Settle(ctx context.Context, s Scope) (Scope, bool, error) {
	p := s.pending
	if p == nil {
		return s, true, nil
	}
	err := r.DB.Verify(ctx, p.check)
	if err == nil {
		s.pending = nil
		return s, true, nil
	}
	if !errors.Is(err, pg.ErrUnverified) {
		return Scope{}, false, pg.Classify("settle the scope", err)
	}
	r.cache.drop(p.key)
	s, err = p.full(ctx)
	return s, false, err
}
