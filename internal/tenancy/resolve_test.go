package tenancy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/tenancy"
)

const twoProjects = `
organisations:
  - {slug: acme, name: Acme Corp}
  - {slug: initech, name: Initech}
agents:
  - {org: acme, slug: architect, name: Architect}
  - {org: acme, slug: backend, name: Backend}
  - {org: initech, slug: peter, name: Peter}
projects:
  - slug: one
    name: One
    host: acme
    members:
      - {agent: acme/architect, part: architect}
      - {agent: acme/backend, part: backend}
  - slug: two
    name: Two
    host: initech
    members:
      - {agent: initech/peter, part: peter}
`

func setup(t *testing.T) (*pg.DB, *tenancy.Resolver, admin.Result) {
	t.Helper()
	d, _ := pgtest.Open(t)
	svc := &admin.Service{DB: d, Q: db.New(), PublicURL: "http://x.test"}
	f, err := admin.ParseFile(strings.NewReader(twoProjects))
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Apply(context.Background(), f, admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d, &tenancy.Resolver{DB: d, Q: db.New()}, res
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
	_, err = r.Part(ctx, mistype(code1), "architect", arch)
	wantCode(t, err, apperr.Unauthenticated)
	_, err = r.Part(ctx, code1, "architect", mistype(arch))
	wantCode(t, err, apperr.Unauthenticated)
}

func TestResolvingMovesLastSeen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, r, res := setup(t)
	code, key := res.Projects["one"].ConnectCode, res.Agents["acme/architect"].Key
	lastSeen := func() time.Time {
		var ts *time.Time
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, "SELECT last_seen_at FROM membership WHERE part = 'architect'").Scan(&ts)
		})
		if err != nil {
			t.Fatal(err)
		}
		if ts == nil {
			return time.Time{}
		}
		return *ts
	}
	if !lastSeen().IsZero() {
		t.Fatal("last_seen set before any call")
	}
	if _, err := r.Part(ctx, code, "architect", key); err != nil {
		t.Fatal(err)
	}
	first := lastSeen()
	if first.IsZero() {
		t.Fatal("an authenticated call did not set last_seen")
	}
	// last_seen is kept to the second: a call within the second leaves it, a later one
	// moves it. Age it instead of sleeping.
	age := func() {
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE membership SET last_seen_at = now() - interval '1 hour' WHERE part = 'architect'")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	age()
	if _, err := r.Agent(ctx, key); err != nil {
		t.Fatal(err)
	}
	if time.Since(lastSeen()) > time.Minute {
		t.Fatal("a call on the all-rooms address did not move last_seen")
	}
	age()
	if _, err := r.RoomByKey(ctx, key, res.Projects["one"].ID); err != nil {
		t.Fatal(err)
	}
	if time.Since(lastSeen()) > time.Minute {
		t.Fatal("a call on the room address did not move last_seen")
	}
	_ = first
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
	for _, bad := range []string{mistype(key), strings.ToUpper(key), "sk-qyt-short"} {
		_, err := r.Agent(ctx, bad)
		wantCode(t, err, apperr.Unauthenticated)
	}
	_, err := r.Agent(ctx, key)
	wantCode(t, err, apperr.Unavailable) // the well-formed key does reach for the database
}

// mistype changes a credential's last character to a different one: a plain "+x" is the
// same credential one time in 62.
func mistype(s string) string {
	if s[len(s)-1] == 'x' {
		return s[:len(s)-1] + "y"
	}
	return s[:len(s)-1] + "x"
}
