package wake_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

//go:embed testdata/seed.yaml
var seed string

// clock is the injected time of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

type fixture struct {
	t       testing.TB
	ctx     context.Context
	d       *pg.DB
	url     string
	svc     *wake.Service
	res     admin.Result
	clock   *clock
	project uuid.UUID
	other   uuid.UUID
	member  map[string]uuid.UUID    // part → membership id (project one, and "peter" in two)
	host    map[uuid.UUID]uuid.UUID // project → its host organisation
	agent   map[string]wake.Agent
}

func setup(t testing.TB) *fixture { return setupPool(t, 8) }

// setupPool is setup with a request pool of maxConns connections.
func setupPool(t testing.TB, maxConns int32) *fixture {
	t.Helper()
	ctx := context.Background()
	b := testfix.SeedWith(t, seed, testfix.Options{MaxConns: maxConns, OpsMaxConns: 12})
	d, u, res := b.DB, b.URL, b.Result
	c := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	fx := &fixture{t: t, ctx: ctx, d: d, url: u, res: res, clock: c,
		svc:     wake.New(wake.Deps{DB: d, Now: c.Now, PollInterval: 50 * time.Millisecond}),
		project: res.Projects["one"].ID, other: res.Projects["two"].ID,
		member: map[string]uuid.UUID{}, agent: map[string]wake.Agent{}, host: map[uuid.UUID]uuid.UUID{}}
	fx.op(func(tx *pg.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, host_org_id FROM project`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, host uuid.UUID
			if err := rows.Scan(&id, &host); err != nil {
				return err
			}
			fx.host[id] = host
		}
		return rows.Err()
	})
	fx.op(func(tx *pg.Tx) error {
		rows, err := tx.Query(ctx, `SELECT m.part, m.id, m.agent_id, m.org_id FROM membership m`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var part string
			var id, agentID, orgID uuid.UUID
			if err := rows.Scan(&part, &id, &agentID, &orgID); err != nil {
				return err
			}
			fx.member[part] = id
			fx.agent[part] = wake.Agent{ID: agentID, OrgID: orgID}
		}
		return rows.Err()
	})
	return fx
}

// in is the fixture failing t instead of the test that set it up: a story's step uses
// it, since a subtest must not stop its parent.
func (f *fixture) in(t testing.TB) *fixture {
	g := *f
	g.t = t
	return &g
}

func (f *fixture) op(fn func(tx *pg.Tx) error) {
	f.t.Helper()
	if err := f.d.Operator(f.ctx, fn); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	f.op(func(tx *pg.Tx) error { _, err := tx.Exec(f.ctx, sql, args...); return err })
}

// queue queues r in a tenant transaction of r's project, as a toolset does.
func (f *fixture) queue(r wake.Request) {
	f.t.Helper()
	if r.ProjectID == uuid.Nil {
		r.ProjectID = f.project
	}
	r.HostOrgID = f.host[r.ProjectID]
	if err := f.d.InTenant(f.ctx, pg.Tenant{ProjectID: r.ProjectID}, func(tx *pg.Tx) error {
		return f.svc.Queue(f.ctx, tx, r)
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) msg(parts ...string) wake.Request {
	r := wake.Request{Source: "message", ItemID: uuid.Must(uuid.NewV7()), HostOrgID: f.host[f.project]}
	for _, p := range parts {
		r.MemberIDs = append(r.MemberIDs, f.member[p])
	}
	return r
}

func (f *fixture) budget(n int) {
	f.exec(`UPDATE project SET settings = settings || jsonb_build_object('wakeBudgetPerHour', $2::int) WHERE id = $1`, f.project, n)
}

func (f *fixture) park(part string, until time.Time) {
	f.exec(`UPDATE membership SET parked_until = $2 WHERE id = $1`, f.member[part], until)
}

func (f *fixture) seen(part string, at time.Time) {
	f.exec(`UPDATE membership SET last_seen_at = $2 WHERE id = $1`, f.member[part], at)
}

// deliver claims the part's wake as its pager would and acknowledges it; it fails when
// there is nothing deliverable.
func (f *fixture) deliver(part string) *wake.Wake {
	f.t.Helper()
	w := f.next(part)
	if w == nil {
		f.t.Fatalf("%s: nothing deliverable; wakes %+v", part, f.wakes(part))
	}
	if _, err := f.svc.Ack(f.ctx, f.agent[part], w.ID); err != nil {
		f.t.Fatal(err)
	}
	return w
}

type wakeRow struct {
	ID        uuid.UUID
	Status    string
	Count     int
	Urgent    bool
	Charged   bool
	Sources   []string
	ThreadIDs []string
}

// wakes returns a part's wakes, oldest first, once every wake event has been folded into
// its part's pending wake (as a sweep or a claim would).
func (f *fixture) wakes(part string) []wakeRow {
	f.t.Helper()
	if _, err := f.svc.Coalesce(f.ctx, f.clock.Now(), false); err != nil {
		f.t.Fatal(err)
	}
	var out []wakeRow
	f.op(func(tx *pg.Tx) error {
		rows, err := tx.Query(f.ctx, `SELECT id, status, count, urgent, charged_at IS NOT NULL, sources, thread_counts
			FROM wake WHERE member_id = $1 ORDER BY created_at, id`, f.member[part])
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w wakeRow
			var tc json.RawMessage
			if err := rows.Scan(&w.ID, &w.Status, &w.Count, &w.Urgent, &w.Charged, &w.Sources, &tc); err != nil {
				return err
			}
			m := map[string]int{}
			_ = json.Unmarshal(tc, &m)
			for k := range m {
				w.ThreadIDs = append(w.ThreadIDs, k)
			}
			out = append(out, w)
		}
		return rows.Err()
	})
	return out
}

// open returns the part's one pending wake, failing when there is not exactly one.
func (f *fixture) open(part string) wakeRow {
	f.t.Helper()
	var open []wakeRow
	for _, w := range f.wakes(part) {
		if w.Status == wake.StatusPending {
			open = append(open, w)
		}
	}
	if len(open) != 1 {
		f.t.Fatalf("%s: want one open wake, have %+v", part, f.wakes(part))
	}
	return open[0]
}

// queueIn queues a message for part and moves the pending wake it opens to status (a dead
// letter, a canceled wake), returning that wake's id.
func (f *fixture) queueIn(part, status string) uuid.UUID {
	f.t.Helper()
	f.queue(f.msg(part))
	id := f.open(part).ID
	f.exec(`UPDATE wake SET status = $2 WHERE id = $1`, id, status)
	return id
}

// queueTwoHeld queues two messages for a part that may not be woken now (why: its budget
// is spent, it is parked): they coalesce into one uncharged pending wake, not delivered.
func (f *fixture) queueTwoHeld(part, why string) {
	f.t.Helper()
	f.queue(f.msg(part))
	f.queue(f.msg(part))
	if w := f.open(part); w.Charged || w.Count != 2 {
		f.t.Fatalf("%s: two messages do not coalesce into one uncharged pending wake: %+v", why, w)
	}
	if got := f.next(part); got != nil {
		f.t.Fatalf("%s: the wake was delivered: %+v", why, got)
	}
}

func (f *fixture) none(part string) {
	f.t.Helper()
	if ws := f.wakes(part); len(ws) != 0 {
		f.t.Fatalf("%s: want no wake, have %+v", part, ws)
	}
}

func (f *fixture) sweep(at time.Time) wake.SweepResult {
	f.t.Helper()
	res, err := f.svc.Sweep(f.ctx, at)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *fixture) next(part string) *wake.Wake {
	f.t.Helper()
	w, err := f.svc.Next(f.ctx, f.agent[part], 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}
