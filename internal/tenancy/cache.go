package tenancy

import (
	"context"
	"crypto/sha256"
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

// recheck serves a resolution from the cache when ck is there, verifying it in one round
// trip: BEGIN, the lookup settings, CredentialAssumeCachedTenant (the key and code checked
// against the stored hashes, the cached tenant and directory set only when they match),
// the recheck of the membership and agreement (ScopeRecheckMember, or AgentRecheckOwn for
// an agent alone) with last_seen moved, and COMMIT. ok is false, and the entry dropped,
// when nothing is cached, when the credentials no longer verify or the membership is gone
// (the uncached path then says why), and when the agreement's status or the part's name
// changed, since the cached directory lists depend on them: the uncached path computes
// them again. The rest of what the membership and agreement say (access, capabilities,
// grants, parking) is taken from the recheck, not from the cache.
func (r *Resolver) recheck(ctx context.Context, what string, ck scopeKey, key auth.Parsed, code *auth.Parsed, projectID *uuid.UUID) (Scope, bool, error) {
	cached, ok := r.cache.get(ck)
	if !ok {
		return Scope{}, false, nil
	}
	lookup := key.ID
	p := db.CredentialAssumeCachedTenantParams{KeyID: key.ID, KeyHash: key.Hash(), AgentID: cached.AgentID, ProjectID: projectID}
	if code != nil {
		lookup += "," + code.ID
		p.CodeID, p.CodeHash = code.ID, code.Hash()
	}
	if v := cached.Visible; v != nil {
		p.Orgs, p.Projects, p.Agents, p.Users = v.Orgs, v.Projects, v.Agents, v.Users
	}
	s, found := cached, false
	err := r.DB.InTenant(ctx, pg.Tenant{Lookup: lookup}, func(tx *pg.Tx) error {
		if err := tx.Pipeline(func() error { return r.Q.CredentialAssumeCachedTenant(ctx, tx, p) }); err != nil {
			return fmt.Errorf("verify credentials: %w", err)
		}
		// The one write (last_seen) touches the caller's own admitted membership, so the
		// COMMIT goes with it, as with the uncached binds.
		tx.CommitWithNext(ctx)
		if !cached.InRoom() {
			_, err := r.Q.AgentRecheckOwn(ctx, tx)
			if pg.IsNoRows(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("recheck agent: %w", err)
			}
			found = true
			return nil
		}
		m, err := r.Q.ScopeRecheckMember(ctx, tx, cached.MemberID)
		if pg.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("recheck membership: %w", err)
		}
		status, grants := "", []string(nil)
		if m.AgreementStatus != nil {
			status, grants = *m.AgreementStatus, m.AgreementGrants
		}
		if m.Part != cached.Part || status != cached.AgreementStatus {
			return nil
		}
		found = true
		s.IsMain, s.Nickname, s.Access, s.Capabilities, s.ParkedUntil = m.IsMain, m.Nickname, m.Access, m.Capabilities, m.ParkedUntil
		s.Grants = grants
		return nil
	})
	if err != nil {
		return Scope{}, false, pg.Classify(what, err)
	}
	if !found {
		r.cache.drop(ck)
		return Scope{}, false, nil
	}
	return s, true, nil
}
