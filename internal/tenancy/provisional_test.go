package tenancy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestProvisionalResolution: a provisional resolver serves a cached caller without a
// round trip, and the caller's verification travels with the first statements of its
// first transaction, so a read is one round trip in all. A key revoked, a membership
// changed or removed a moment ago is seen by that very read: it fails (ErrUnverified)
// having seen nothing, and Settle refuses or resolves again as the uncached path does.
// The cache keeps entries for an hour, so nothing depends on how long a call takes.
func TestProvisionalResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, r, res := setupFile(t, guests)
	if d.Citus() {
		t.Skip("the scope cache serves plain PostgreSQL's one-round-trip path only")
	}
	code, one := res.Projects["one"].ConnectCode, res.Projects["one"].ID
	architect, gina := res.Agents["acme/architect"].Key, res.Agents["globex/gina"].Key
	operator := func(t *testing.T, sql string, args ...any) { t.Helper(); testfix.Exec(t, d, sql, args...) }
	prov := r.WithScopeCache(time.Hour).Provisional()
	// provisional resolves twice (the first fills the cache) and checks the second comes
	// back unsettled without a round trip.
	provisional := func(t *testing.T, resolve func() (tenancy.Scope, error)) tenancy.Scope {
		t.Helper()
		if _, err := resolve(); err != nil {
			t.Fatal(err)
		}
		before := d.RoundTrips()
		s, err := resolve()
		if err != nil {
			t.Fatal(err)
		}
		if n := d.RoundTrips() - before; n != 0 || s.Settled() {
			t.Fatalf("a cached resolution: %d round trips, settled %v; want 0, false", n, s.Settled())
		}
		return s
	}
	// members reads the memberships the scope's tenant sees, in the context Defer gives,
	// committing with the read as the read tools do.
	members := func(s tenancy.Scope) (n int, err error) {
		err = d.InTenant(tenancy.Defer(ctx, s), s.Tenant(), func(tx *pg.Tx) error {
			tx.CommitWithNext(ctx)
			return tx.QueryRow(ctx, "SELECT count(*) FROM membership").Scan(&n)
		})
		return n, err
	}
	part := func() (tenancy.Scope, error) { return prov.Part(ctx, code, "architect", architect) }
	room := func() (tenancy.Scope, error) { return prov.RoomByKey(ctx, architect, one) }
	agent := func() (tenancy.Scope, error) { return prov.Agent(ctx, architect) }

	t.Run("a cached caller's read is one round trip with its verification", func(t *testing.T) {
		for name, resolve := range map[string]func() (tenancy.Scope, error){"part": part, "room": room, "agent": agent} {
			s := provisional(t, resolve)
			before := d.RoundTrips()
			n, err := members(s)
			if err != nil || n == 0 {
				t.Fatalf("%s: %d members, %v", name, n, err)
			}
			if trips := d.RoundTrips() - before; trips != 1 {
				t.Fatalf("%s: %d round trips, want 1", name, trips)
			}
			settled, held, err := prov.Settle(ctx, s)
			if err != nil || !held || !settled.Settled() || d.RoundTrips()-before != 1 {
				t.Fatalf("%s: settle after the read: held %v, %v, %d round trips", name, held, err, d.RoundTrips()-before)
			}
		}
	})

	t.Run("a scope no transaction verified is verified by Settle in one round trip", func(t *testing.T) {
		s := provisional(t, part)
		before := d.RoundTrips()
		settled, held, err := prov.Settle(ctx, s)
		if err != nil || !held || !settled.Settled() || d.RoundTrips()-before != 1 {
			t.Fatalf("held %v, %v, %d round trips", held, err, d.RoundTrips()-before)
		}
	})

	t.Run("a changed access fails the read and is resolved again", func(t *testing.T) {
		s := provisional(t, part)
		operator(t, "UPDATE membership SET access = 'read' WHERE part = 'architect'")
		t.Cleanup(func() { operator(t, "UPDATE membership SET access = 'write' WHERE part = 'architect'") })
		if _, err := members(s); !errors.Is(err, pg.ErrUnverified) {
			t.Fatalf("want ErrUnverified, got %v", err)
		}
		settled, held, err := prov.Settle(ctx, s)
		if err != nil || held || settled.Access != tenancy.AccessRead || !settled.Settled() {
			t.Fatalf("held %v, access %q, %v", held, settled.Access, err)
		}
	})

	t.Run("a parked membership: the write sent with the check stores nothing", func(t *testing.T) {
		s := provisional(t, room)
		operator(t, "UPDATE membership SET parked_until = now() + interval '1 hour' WHERE part = 'architect'")
		t.Cleanup(func() { operator(t, "UPDATE membership SET parked_until = NULL WHERE part = 'architect'") })
		// A write queued before the COMMIT travels in the round trip of the check, the
		// COMMIT with it: the failed check raises, and neither runs.
		err := d.InTenant(tenancy.Defer(ctx, s), s.Tenant(), func(tx *pg.Tx) error {
			return tx.Pipeline(func() error {
				_, err := tx.Exec(ctx, "UPDATE membership SET nickname = 'seen' WHERE project_id = $1", one)
				return err
			})
		})
		if !errors.Is(err, pg.ErrUnverified) {
			t.Fatalf("want ErrUnverified, got %v", err)
		}
		if n := testfix.Scalar[int](t, d, "SELECT count(*) FROM membership WHERE nickname = 'seen'"); n != 0 {
			t.Fatalf("%d memberships written by an unverified caller", n)
		}
	})

	// The probe is a sequence: nextval is not undone by a rollback, so it shows whether a
	// statement sent after the check ran at all, which row-level security cannot hide.
	operator(t, "CREATE SEQUENCE provisional_probe")
	operator(t, "GRANT USAGE ON SEQUENCE provisional_probe TO "+pg.AppRole)
	probed := func(t *testing.T) int64 {
		t.Helper()
		return testfix.Scalar[int64](t, d, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM provisional_probe")
	}
	// write queues a statement and commits, all of it pipelined: the COMMIT travels in
	// the check's round trip.
	write := func(s tenancy.Scope) error {
		return d.InTenant(tenancy.Defer(ctx, s), s.Tenant(), func(tx *pg.Tx) error {
			return tx.Pipeline(func() error {
				_, err := tx.Exec(ctx, "SELECT nextval('provisional_probe')")
				return err
			})
		})
	}

	// addresses are the three ways to resolve the same caller, on a cache of their own:
	// the subtests above leave the shared one holding what they changed since.
	addresses := func() map[string]func() (tenancy.Scope, error) {
		p := r.WithScopeCache(time.Hour).Provisional()
		return map[string]func() (tenancy.Scope, error){
			"part":  func() (tenancy.Scope, error) { return p.Part(ctx, code, "architect", architect) },
			"room":  func() (tenancy.Scope, error) { return p.RoomByKey(ctx, architect, one) },
			"agent": func() (tenancy.Scope, error) { return p.Agent(ctx, architect) },
		}
	}

	t.Run("a cached caller's write commits in one round trip with its verification", func(t *testing.T) {
		for name, resolve := range addresses() {
			s := provisional(t, resolve)
			ran := probed(t)
			before := d.RoundTrips()
			if err := write(s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if trips := d.RoundTrips() - before; trips != 1 {
				t.Fatalf("%s: %d round trips, want 1", name, trips)
			}
			if got := probed(t); got != ran+1 {
				t.Fatalf("%s: the write ran %d times, want once", name, got-ran)
			}
			before = d.RoundTrips()
			if _, held, err := prov.Settle(ctx, s); err != nil || !held || d.RoundTrips() != before {
				t.Fatalf("%s: settle after the write: held %v, %v, %d round trips", name, held, err, d.RoundTrips()-before)
			}
		}
	})

	// Each way a check fails, on each address: the statements pipelined after it, and the
	// COMMIT, never reach the database.
	for _, c := range []struct {
		name, address string
		break_, mend  string
	}{
		{"a parked membership, part address", "part",
			"UPDATE membership SET parked_until = now() + interval '1 hour' WHERE part = 'architect'",
			"UPDATE membership SET parked_until = NULL WHERE part = 'architect'"},
		{"a changed access, room address", "room",
			"UPDATE membership SET access = 'read' WHERE part = 'architect'",
			"UPDATE membership SET access = 'write' WHERE part = 'architect'"},
		{"a revoked key, part address", "part",
			"UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1",
			"UPDATE agent_key SET revoked_at = NULL WHERE agent_id = $1"},
		{"a revoked key, agent address", "agent",
			"UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1",
			"UPDATE agent_key SET revoked_at = NULL WHERE agent_id = $1"},
	} {
		t.Run("a failed check stops everything sent after it, COMMIT included: "+c.name, func(t *testing.T) {
			s := provisional(t, addresses()[c.address])
			args := func(sql string) []any {
				if strings.Contains(sql, "$1") {
					return []any{res.Agents["acme/architect"].ID}
				}
				return nil
			}
			operator(t, c.break_, args(c.break_)...)
			t.Cleanup(func() { operator(t, c.mend, args(c.mend)...) })
			ran := probed(t)
			if err := write(s); !errors.Is(err, pg.ErrUnverified) {
				t.Fatalf("want ErrUnverified, got %v", err)
			}
			if got := probed(t); got != ran {
				t.Fatalf("a statement sent after the failed check ran %d times", got-ran)
			}
			// The operator's transactions, which no policy guards, wait for the verification.
			opRan := false
			err := d.Operator(tenancy.Defer(ctx, s), func(*pg.Tx) error { opRan = true; return nil })
			if !errors.Is(err, pg.ErrUnverified) || opRan {
				t.Fatalf("an operator's transaction of the unverified caller: %v (ran %v)", err, opRan)
			}
		})
	}

	t.Run("an operator's transaction makes a pending verification first", func(t *testing.T) {
		s := provisional(t, addresses()["part"])
		before := d.RoundTrips()
		if err := d.Operator(tenancy.Defer(ctx, s), func(tx *pg.Tx) error {
			return tx.Pipeline(func() error { _, err := tx.Exec(ctx, "SELECT 1"); return err })
		}); err != nil {
			t.Fatal(err)
		}
		if trips := d.RoundTrips() - before; trips != 2 || !s.Settled() {
			t.Fatalf("%d round trips, settled %v; want 2 (the verification; the statement with its COMMIT), true", trips, s.Settled())
		}
	})

	t.Run("a guest whose agreement is revoked is refused by the next read", func(t *testing.T) {
		s := provisional(t, func() (tenancy.Scope, error) { return prov.Part(ctx, code, "gina", gina) })
		operator(t, "UPDATE agreement SET status = 'revoked' WHERE guest_org_id = $1", res.Organisations["globex"].ID)
		if n, err := members(s); !errors.Is(err, pg.ErrUnverified) {
			t.Fatalf("want ErrUnverified, got %d %v", n, err)
		}
		_, _, err := prov.Settle(ctx, s)
		wantCode(t, err, apperr.Forbidden)
	})

	t.Run("a revoked key is refused by the next read, and by a transaction for another tenant", func(t *testing.T) {
		s := provisional(t, part)
		a := provisional(t, agent)
		operator(t, "UPDATE agent_key SET revoked_at = now() WHERE agent_id = $1", res.Agents["acme/architect"].ID)
		if n, err := members(s); !errors.Is(err, pg.ErrUnverified) {
			t.Fatalf("want ErrUnverified, got %d %v", n, err)
		}
		_, _, err := prov.Settle(ctx, s)
		wantCode(t, err, apperr.Unauthenticated)
		// Another tenant's transaction (the all-rooms address binding a room) makes the
		// verification first, and does not run when it fails.
		ran := false
		err = d.InTenant(tenancy.Defer(ctx, a), pg.Tenant{OrgID: a.OrgID, AgentID: a.AgentID, ProjectID: one}, func(*pg.Tx) error {
			ran = true
			return nil
		})
		if !errors.Is(err, pg.ErrUnverified) || ran {
			t.Fatalf("want ErrUnverified before the transaction, got %v (ran %v)", err, ran)
		}
		_, _, err = prov.Settle(ctx, a)
		wantCode(t, err, apperr.Unauthenticated)
		_, err = part()
		wantCode(t, err, apperr.Unauthenticated)
	})
}
