package tenancy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// twoProjects: architect and backend in project one (Acme), peter in project two (Initech).
var twoProjects = testfix.TwoProjects("architect", "backend")

func setup(t *testing.T) (*pg.DB, *tenancy.Resolver, admin.Result) {
	t.Helper()
	return setupFile(t, twoProjects)
}

// setupFile seeds a fresh database from an admin file.
func setupFile(t *testing.T, file string) (*pg.DB, *tenancy.Resolver, admin.Result) {
	t.Helper()
	b := testfix.Seed(t, file)
	return b.DB, b.Resolver, b.Result
}

func wantCode(t *testing.T, err error, code apperr.Code) {
	t.Helper()
	if err == nil || apperr.CodeOf(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func TestPartResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r, res := setup(t)
	code1, code2 := res.Projects["one"].ConnectCode, res.Projects["two"].ConnectCode
	arch, back, peter := res.Agents["acme/architect"].Key, res.Agents["acme/backend"].Key, res.Agents["initech/peter"].Key

	sc, err := r.Part(ctx, code1, "architect", arch)
	if err != nil || sc.Part != "architect" || sc.ProjectName != "One" || !sc.IsHost() {
		t.Fatalf("own part: %+v %v", sc, err)
	}
	// A part may only act as itself: backend's key cannot open architect's URL.
	_, err = r.Part(ctx, code1, "architect", back)
	wantCode(t, err, apperr.Forbidden)
	// A project's connect code does not admit another project's agent.
	_, err = r.Part(ctx, code1, "peter", peter)
	wantCode(t, err, apperr.Forbidden)
	// Another project's connect code does not reach this project's part.
	_, err = r.Part(ctx, code2, "architect", arch)
	wantCode(t, err, apperr.Forbidden)
	// Unknown part, unknown code, mistyped key.
	_, err = r.Part(ctx, code1, "nobody", arch)
	wantCode(t, err, apperr.Forbidden)
	_, err = r.Part(ctx, testfix.Mistype(code1), "architect", arch)
	wantCode(t, err, apperr.Unauthenticated)
	_, err = r.Part(ctx, code1, "architect", testfix.Mistype(arch))
	wantCode(t, err, apperr.Unauthenticated)
}

func TestResolvingMovesLastSeen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, r, res := setup(t)
	code, key := res.Projects["one"].ConnectCode, res.Agents["acme/architect"].Key
	lastSeen := func() time.Time {
		ts := testfix.Scalar[*time.Time](t, d, "SELECT last_seen_at FROM membership WHERE part = 'architect'")
		if ts == nil {
			return time.Time{}
		}
		return *ts
	}
	if !lastSeen().IsZero() {
		t.Fatal("last_seen set before any call")
	}
	// The three addresses a call resolves through, the part's first. Each resolves with
	// the resolver r or, uncached, with a new one (its cache empty).
	addresses := []struct {
		name string
		call func(r *tenancy.Resolver) error
	}{
		{"the part's address", func(r *tenancy.Resolver) error { _, err := r.Part(ctx, code, "architect", key); return err }},
		{"the all-rooms address", func(r *tenancy.Resolver) error { _, err := r.Agent(ctx, key); return err }},
		{"the room address", func(r *tenancy.Resolver) error {
			_, err := r.RoomByKey(ctx, key, res.Projects["one"].ID)
			return err
		}},
	}
	call := func(name string, r *tenancy.Resolver, c func(*tenancy.Resolver) error) {
		t.Helper()
		if err := c(r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	call(addresses[0].name, tenancy.NewResolver(d), addresses[0].call)
	if lastSeen().IsZero() {
		t.Fatal("an authenticated call did not set last_seen")
	}
	// last_seen is kept to the second: a call moves one a second old (aged instead of
	// sleeping) and leaves one that is not (set ahead of the clock, it never is). Both
	// ways of resolving hold to it: the uncached bind, and the check of a caller served
	// from the scope cache (which moves presence through rr_touch_presence, only when due).
	set := func(to string) {
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE membership SET last_seen_at = now() + interval '"+to+"' WHERE part = 'architect'")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range addresses {
		call(a.name, r, a.call) // r now serves the next calls of a from its cache
	}
	ways := []struct {
		name     string
		resolver func() *tenancy.Resolver
	}{
		{"uncached", func() *tenancy.Resolver { return tenancy.NewResolver(d) }},
		{"from the cache", func() *tenancy.Resolver { return r }},
	}
	for _, w := range ways {
		for _, a := range addresses {
			t.Run(w.name+", "+a.name+", moves a last_seen a second old", func(t *testing.T) {
				set("-1 hour")
				before := d.RoundTrips()
				call(a.name, w.resolver(), a.call)
				trips := d.RoundTrips() - before
				if time.Since(lastSeen()) > time.Minute {
					t.Fatalf("a call on %s did not move last_seen", a.name)
				}
				// From the cache the check itself moves it, in its one round trip: a check
				// that failed on a due presence would fall back to the full resolution,
				// which moves it too, at the cost of more round trips. (Citus has no scope
				// cache: every resolution there is the full one.)
				if w.name == "from the cache" && !d.Citus() && trips != 1 {
					t.Fatalf("a cached call on %s took %d round trips to move last_seen, want the check's 1", a.name, trips)
				}
			})
			t.Run(w.name+", "+a.name+", leaves a last_seen less than a second old", func(t *testing.T) {
				set("1 hour")
				ahead := lastSeen()
				call(a.name, w.resolver(), a.call)
				if got := lastSeen(); !got.Equal(ahead) {
					t.Fatalf("a call on %s moved a last_seen less than a second old: %v, was %v", a.name, got, ahead)
				}
			})
		}
	}
}

// TestCachedCheckDoesNotWaitForATouch: when presence is due, every concurrent call of a
// part calls rr_touch_presence at once; the first one's row lock lasts until its
// transaction commits (a write's holds it across the tool's statements). The others must
// go on without moving presence rather than queue behind it (migration 000049). The
// lock is held here by a transaction that locks the membership as a touch does; a call
// that waits for it shows as a backend waiting on a lock, which fails the test before
// the holder lets go.
func TestCachedCheckDoesNotWaitForATouch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, r, res := setup(t)
	if d.Citus() {
		t.Skip("Citus has no scope cache: every call takes the full resolution")
	}
	code, key := res.Projects["one"].ConnectCode, res.Agents["acme/architect"].Key
	addresses := []struct {
		name string
		call func() error
	}{
		{"the part's address", func() error { _, err := r.Part(ctx, code, "architect", key); return err }},
		{"the all-rooms address", func() error { _, err := r.Agent(ctx, key); return err }},
	}
	for _, a := range addresses {
		if err := a.call(); err != nil { // fills r's cache: the next call is only checked
			t.Fatalf("%s: %v", a.name, err)
		}
	}
	for _, a := range addresses {
		t.Run(a.name, func(t *testing.T) {
			// Due, as the check reads it (committed)...
			err := d.Operator(ctx, func(tx *pg.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE membership SET last_seen_at = now() - interval '1 hour' WHERE part = 'architect'")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			// ...and locked as a touch in flight locks it, until this transaction ends.
			err = d.Operator(ctx, func(tx *pg.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT 1 FROM membership WHERE part = 'architect' FOR NO KEY UPDATE"); err != nil {
					return err
				}
				done := make(chan error, 1)
				go func() { done <- a.call() }()
				for {
					select {
					case err := <-done:
						if err != nil {
							t.Errorf("the cached call failed: %v", err)
						}
						return nil
					default:
					}
					var waiting int
					err := d.Operator(ctx, func(tx *pg.Tx) error {
						return tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
							WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
					})
					if err != nil {
						return err
					}
					if waiting > 0 {
						// Rolling back below releases it; the call then finishes.
						t.Errorf("the cached call on %s waited for the membership's row lock", a.name)
						return nil
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	// The all-rooms touch locks only the memberships it writes: one that is not due stays
	// free for its own calls while the touching transaction goes on.
	t.Run("the all-rooms touch leaves a membership that is not due unlocked", func(t *testing.T) {
		sc, err := r.Agent(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		err = d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE membership SET last_seen_at = now() + interval '1 hour' WHERE part = 'architect'")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		err = d.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT rr_touch_presence(NULL)"); err != nil {
				return err
			}
			// Still inside the touching transaction: another one may lock the row at once.
			return d.Operator(ctx, func(tx *pg.Tx) error {
				_, err := tx.Exec(ctx, "SELECT 1 FROM membership WHERE part = 'architect' FOR NO KEY UPDATE NOWAIT")
				return err
			})
		})
		if err != nil {
			t.Fatalf("a membership that is not due was locked by the all-rooms touch: %v", err)
		}
	})
}

func TestRoomResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r, res := setup(t)
	peter := res.Agents["initech/peter"].Key
	_, err := r.RoomByKey(ctx, peter, res.Projects["one"].ID)
	wantCode(t, err, apperr.Forbidden)
	if e, _ := apperr.As(err); e.Message != tenancy.MsgNotParticipant {
		t.Fatalf("message %q, want the spec's %q", e.Message, tenancy.MsgNotParticipant)
	}
	sc, err := r.RoomByKey(ctx, peter, res.Projects["two"].ID)
	if err != nil || !sc.IsHost() || sc.HostName != "Initech" {
		t.Fatalf("%+v %v", sc, err)
	}
}

// TestMistypedKeyNeedsNoDatabase proves the checksum is checked before any query: with
// the pools closed, a mistyped key is still answered as unauthenticated, not unavailable.
func TestMistypedKeyNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, r, res := setup(t)
	key := res.Agents["acme/architect"].Key
	d.Close()
	for _, bad := range []string{testfix.Mistype(key), strings.ToUpper(key), "sk-qyt-short"} {
		_, err := r.Agent(ctx, bad)
		wantCode(t, err, apperr.Unauthenticated)
	}
	_, err := r.Agent(ctx, key)
	wantCode(t, err, apperr.Unavailable) // the well-formed key does reach for the database
}

const guests = `
organisations:
  - {slug: acme, name: Acme Corp}
  - {slug: globex, name: Globex}
  - {slug: umbrella, name: Umbrella}
  - {slug: wayne, name: Wayne}
agents:
  - {org: acme, slug: architect, name: Architect}
  - {org: globex, slug: gina, name: Gina}
  - {org: umbrella, slug: ursula, name: Ursula}
  - {org: wayne, slug: walt, name: Walt}
projects:
  - slug: one
    name: One
    host: acme
    members:
      - {agent: acme/architect, part: architect}
      - {agent: globex/gina, part: gina}
      - {agent: umbrella/ursula, part: ursula}
      - {agent: wayne/walt, part: walt}
    guests:
      - {org: globex, status: active, grants: [read_memory]}
      - {org: umbrella, status: pending, grants: [read_memory]}
      - {org: wayne, status: revoked, grants: [read_memory]}
`

// TestGuestsWithoutAnActiveAgreementAreNotAdmitted: the agreement is read with the
// membership, and a guest whose agreement is pending, revoked or missing gets one and the
// same refusal on the threads and all-rooms bindings, keeps no project in its RLS tenant on
// the per-room binding, and does not show as present.
func TestGuestsWithoutAnActiveAgreementAreNotAdmitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// umbrella's agreement is pending, wayne's revoked; "no agreement" deletes umbrella's
	// row afterwards (a guest member without any agreement).
	d, r, res := setupFile(t, guests)
	code, one := res.Projects["one"].ConnectCode, res.Projects["one"].ID
	refused := func(t *testing.T, err error) {
		t.Helper()
		e, ok := apperr.As(err)
		if !ok || e.Code != apperr.Forbidden || e.Message != tenancy.MsgNoAgreement || e.Reason != tenancy.ReasonNoAgreement {
			t.Fatalf("want the agreement refusal, got %v", err)
		}
	}
	lastSeen := func(part string) *time.Time {
		return testfix.Scalar[*time.Time](t, d, "SELECT last_seen_at FROM membership WHERE part = $1", part)
	}
	check := func(t *testing.T, agent, part string) {
		key := res.Agents[agent].Key
		_, err := r.Part(ctx, code, part, key)
		refused(t, err)
		ag, err := r.Agent(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Room(ctx, ag, one)
		refused(t, err)
		sc, err := r.RoomByKey(ctx, key, one)
		if err != nil {
			t.Fatalf("the per-room address accepts a member's call (the rooms spec): %v", err)
		}
		refused(t, sc.Admitted())
		if sc.Tenant().ProjectID != uuid.Nil {
			t.Fatal("a refused scope carries its project into RLS")
		}
		if lastSeen(part) != nil {
			t.Fatal("a refused guest shows as present")
		}
	}
	t.Run("pending", func(t *testing.T) { check(t, "umbrella/ursula", "ursula") })
	t.Run("revoked", func(t *testing.T) { check(t, "wayne/walt", "walt") })
	t.Run("no agreement", func(t *testing.T) {
		if err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "DELETE FROM agreement WHERE guest_org_id = $1", res.Organisations["umbrella"].ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		check(t, "umbrella/ursula", "ursula")
	})
	t.Run("active", func(t *testing.T) {
		sc, err := r.Part(ctx, code, "gina", res.Agents["globex/gina"].Key)
		if err != nil || sc.Admitted() != nil || sc.Tenant().ProjectID != one || lastSeen("gina") == nil {
			t.Fatalf("an active guest: %+v %v", sc, err)
		}
		if err := sc.RequireGrant(tenancy.GrantReadMemory, "reading"); err != nil {
			t.Fatal(err)
		}
		e, _ := apperr.As(sc.RequireGrant(tenancy.GrantWriteMemory, "writing"))
		if e == nil || e.Code != apperr.Forbidden || e.Reason != tenancy.ReasonGrantRequired || !strings.Contains(e.Message, tenancy.GrantWriteMemory) {
			t.Fatalf("a grant the agreement does not give: %v", e)
		}
	})
}

// TestPartNamesCannotBeProbed: a key holder gets the same answer for a part that does not
// exist and for another agent's part, so trying names lists nothing.
func TestPartNamesCannotBeProbed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r, res := setup(t)
	code, peter := res.Projects["one"].ConnectCode, res.Agents["initech/peter"].Key
	_, absent := r.Part(ctx, code, "nobody", peter)
	_, other := r.Part(ctx, code, "architect", peter)
	a, _ := apperr.As(absent)
	o, _ := apperr.As(other)
	if a == nil || o == nil || a.Code != o.Code || strings.ReplaceAll(a.Message, "nobody", "X") != strings.ReplaceAll(o.Message, "architect", "X") {
		t.Fatalf("absent part %v, another agent's part %v", absent, other)
	}
}
