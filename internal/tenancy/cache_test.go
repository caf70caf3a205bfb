package tenancy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestCachedResolution: a resolution served from the scope cache reuses what it derived
// (names, directory lists) and nothing that decides what the caller may do: the key and
// code, the membership and the agreement are read again by every call. The cache here
// keeps entries for an hour, so that nothing depends on how long a call takes.
func TestCachedResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, r, res := setupFile(t, guests)
	code, one := res.Projects["one"].ConnectCode, res.Projects["one"].ID
	architect, gina := res.Agents["acme/architect"].Key, res.Agents["globex/gina"].Key
	operator := func(t *testing.T, sql string, args ...any) { t.Helper(); testfix.Exec(t, d, sql, args...) }
	cached := r.WithScopeCache(time.Hour)
	uncached := r.WithScopeCache(0)
	resolvers := []struct {
		name string
		part func(r *tenancy.Resolver, key, part string) (tenancy.Scope, error)
	}{
		{"part", func(r *tenancy.Resolver, key, part string) (tenancy.Scope, error) {
			return r.Part(ctx, code, part, key)
		}},
		{"room", func(r *tenancy.Resolver, key, _ string) (tenancy.Scope, error) { return r.RoomByKey(ctx, key, one) }},
	}

	t.Run("a cached resolution is one round trip and reuses its directory lists", func(t *testing.T) {
		for _, rv := range resolvers {
			first, err := rv.part(cached, architect, "architect")
			if err != nil {
				t.Fatal(err)
			}
			before := d.RoundTrips()
			again, err := rv.part(cached, architect, "architect")
			if err != nil {
				t.Fatal(err)
			}
			if n := d.RoundTrips() - before; n != 1 && !d.Citus() {
				t.Fatalf("%s: %d round trips, want 1", rv.name, n)
			}
			if again.MemberID != first.MemberID || again.Visible == nil || !slices.Equal(again.Visible.Agents, first.Visible.Agents) {
				t.Fatalf("%s: cached %+v, first %+v", rv.name, again, first)
			}
		}
		if d.Citus() {
			return // the cache serves plain PostgreSQL's one-round-trip path only
		}
		// Walt leaves the project: the cached lists still name his agent (derived, at most
		// the cache's age), a resolution in full no longer does.
		walt := res.Agents["wayne/walt"].ID
		s, err := cached.Part(ctx, code, "architect", architect)
		if err != nil || !slices.Contains(s.Visible.Agents, walt) {
			t.Fatalf("before: %v %v", s.Visible, err)
		}
		operator(t, "DELETE FROM membership WHERE part = 'walt'")
		if s, err = cached.Part(ctx, code, "architect", architect); err != nil || !slices.Contains(s.Visible.Agents, walt) {
			t.Fatalf("cached: want the lists it derived, got %v %v", s.Visible, err)
		}
		if s, err = uncached.Part(ctx, code, "architect", architect); err != nil || slices.Contains(s.Visible.Agents, walt) {
			t.Fatalf("uncached: want the current lists, got %v %v", s.Visible, err)
		}
	})

	t.Run("access and capabilities are read again by the next call", func(t *testing.T) {
		for _, rv := range resolvers {
			if _, err := rv.part(cached, architect, "architect"); err != nil {
				t.Fatal(err)
			}
		}
		operator(t, "UPDATE membership SET access = 'read', capabilities = '{urgent}' WHERE part = 'architect'")
		t.Cleanup(func() {
			operator(t, "UPDATE membership SET access = 'write', capabilities = '{}' WHERE part = 'architect'")
		})
		for _, rv := range resolvers {
			s, err := rv.part(cached, architect, "architect")
			if err != nil || s.Access != tenancy.AccessRead || !s.HasCapability("urgent") {
				t.Fatalf("%s: %q %v %v", rv.name, s.Access, s.Capabilities, err)
			}
		}
	})

	t.Run("a guest whose agreement is revoked is refused by the next call", func(t *testing.T) {
		for _, rv := range resolvers {
			s, err := rv.part(cached, gina, "gina")
			if err != nil || s.Admitted() != nil {
				t.Fatalf("%s: an active guest: %v %v", rv.name, err, s.Admitted())
			}
		}
		operator(t, "UPDATE agreement SET status = 'revoked' WHERE guest_org_id = $1", res.Organisations["globex"].ID)
		_, err := cached.Part(ctx, code, "gina", gina)
		wantCode(t, err, apperr.Forbidden)
		s, err := cached.RoomByKey(ctx, gina, one)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, s.Admitted(), apperr.Forbidden)
		if s.Tenant().ProjectID != uuid.Nil {
			t.Fatal("a refused scope carries its project into RLS")
		}
	})

	t.Run("a removed membership is refused by the next call", func(t *testing.T) {
		for _, rv := range resolvers {
			if _, err := rv.part(cached, architect, "architect"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cached.Agent(ctx, architect); err != nil {
			t.Fatal(err)
		}
		operator(t, "DELETE FROM membership WHERE part = 'architect'")
		for _, rv := range resolvers {
			_, err := rv.part(cached, architect, "architect")
			wantCode(t, err, apperr.Forbidden)
		}
		// The agent alone (all rooms) is still an agent of its organisation.
		if _, err := cached.Agent(ctx, architect); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a revoked key is refused by the next call", func(t *testing.T) {
		if _, err := cached.Agent(ctx, architect); err != nil {
			t.Fatal(err)
		}
		operator(t, "UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1", res.Agents["acme/architect"].ID)
		_, err := cached.Agent(ctx, architect)
		wantCode(t, err, apperr.Unauthenticated)
	})
}
