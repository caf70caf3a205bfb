package tenancy

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestExpiredEntryIsRefreshedByOneCaller: once an entry expires, one caller resolves it in
// full and the callers that come meanwhile are served the expired entry (which recheck
// verifies like any other), for one more ttl at most.
func TestExpiredEntryIsRefreshedByOneCaller(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	newCache := func() (*scopeCache, scopeKey) {
		c := newScopeCache(2 * time.Second)
		c.now = func() time.Time { return now }
		k := scopeKey{kind: 'a', project: uuid.New()}
		c.put(k, Scope{Part: "architect"})
		return c, k
	}
	t.Run("a fresh entry is a hit", func(t *testing.T) {
		c, k := newCache()
		if _, ok := c.get(k); !ok {
			t.Fatal("a fresh entry missed")
		}
	})
	t.Run("after expiry the first caller misses and the next 31 are served", func(t *testing.T) {
		c, k := newCache()
		c.now = func() time.Time { return now.Add(3 * time.Second) }
		if _, ok := c.get(k); ok {
			t.Fatal("the first caller after expiry was served the expired entry instead of refreshing it")
		}
		for i := range 31 {
			if s, ok := c.get(k); !ok || s.Part != "architect" {
				t.Fatalf("caller %d while the entry is refreshed: %v %+v", i+2, ok, s)
			}
		}
	})
	t.Run("a refresh that never comes back hands the refresh to the next caller after one ttl", func(t *testing.T) {
		c, k := newCache()
		c.now = func() time.Time { return now.Add(3 * time.Second) }
		c.get(k)
		c.now = func() time.Time { return now.Add(5 * time.Second) }
		if _, ok := c.get(k); ok {
			t.Fatal("an entry whose refresh never came back was served past one more ttl")
		}
		if _, ok := c.get(k); !ok {
			t.Fatal("the caller after the new refresher was not served")
		}
	})
	t.Run("the refresher's put makes the entry fresh again", func(t *testing.T) {
		c, k := newCache()
		c.now = func() time.Time { return now.Add(3 * time.Second) }
		c.get(k)
		c.put(k, Scope{Part: "renamed"})
		c.now = func() time.Time { return now.Add(4 * time.Second) }
		if s, ok := c.get(k); !ok || s.Part != "renamed" {
			t.Fatalf("after the refresh: %v %+v", ok, s)
		}
	})
}
