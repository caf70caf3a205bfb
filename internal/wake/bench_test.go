package wake_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

// Bench sizes: 110k parts across 100 projects of 1,100; every 11th part (10k) is parked
// until 10 s after the seed time; every part has a pending wake (110k, of which 100k
// belong to unparked parts) and one delivered wake charged half an hour ago, so budget
// checks read real history; every 100th agent (1,100) has a webhook.
const (
	benchProjects = 100
	benchPerProj  = 1100
	benchParkedOf = 11
)

func seedSweepBench(b *testing.B) (*pg.DB, time.Time) {
	b.Helper()
	ctx := context.Background()
	d, err := pg.Open(ctx, pgtest.New(b), pg.Options{MaxConns: 2, OpsMaxConns: 4, StatementTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	now := time.Now().UTC()
	org := uuid.Must(uuid.NewV7())
	total := benchProjects * benchPerProj
	testfix.OpAll(b, d, []testfix.Stmt{
		{SQL: `INSERT INTO organisation (id, slug, name) VALUES ($1, 'bench', 'Bench')`, Args: []any{org}},
		{SQL: `INSERT INTO agent (id, org_id, slug, name) SELECT gen_random_uuid(), $1, 'a' || i, 'A' || i
		 FROM generate_series(1, $2::int) i`, Args: []any{org, total}},
		{SQL: `INSERT INTO project (id, host_org_id, slug, name) SELECT gen_random_uuid(), $1, 'p' || i, 'P' || i
		 FROM generate_series(1, $2::int) i`, Args: []any{org, benchProjects}},
		{SQL: `WITH a AS (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM agent WHERE org_id = $1),
		      p AS (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM project WHERE host_org_id = $1)
		 INSERT INTO membership (project_id, id, agent_id, org_id, part, parked_until)
		 SELECT p.id, gen_random_uuid(), a.id, $1, 'part' || a.rn,
		   CASE WHEN a.rn % $3::int = 0 THEN $4::timestamptz + interval '10 seconds' END
		 FROM a JOIN p ON p.rn = (a.rn - 1) / $2::int + 1`, Args: []any{org, benchPerProj, benchParkedOf, now}},
		// History: one delivered wake per part, charged half an hour ago.
		{SQL: `INSERT INTO wake (project_id, id, member_id, agent_id, part, status, count, other_count, charged_at, created_at, updated_at, delivered_at)
		 SELECT m.project_id, gen_random_uuid(), m.id, m.agent_id, m.part, 'delivered', 1, 1,
		   $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '29 minutes'
		 FROM membership m WHERE m.org_id = $1`, Args: []any{org, now}},
		// Pending: a wake for every part.
		{SQL: `INSERT INTO wake (project_id, id, member_id, agent_id, part, status, count, other_count, created_at, updated_at)
		 SELECT m.project_id, gen_random_uuid(), m.id, m.agent_id, m.part, 'pending', 3, 3,
		   $2::timestamptz - interval '5 minutes', $2::timestamptz - interval '5 minutes'
		 FROM membership m WHERE m.org_id = $1`, Args: []any{org, now}},
		{SQL: `INSERT INTO wake_target (org_id, agent_id, url, secret_enc)
		 SELECT $1, m.agent_id, 'https://hooks.example.com/' || m.part, '\\x00'::bytea
		 FROM membership m WHERE m.org_id = $1 AND substr(m.part, 5)::int % 100 = 0`, Args: []any{org}},
		{SQL: `ANALYZE`},
	}...)
	return d, now
}

// sweepService is the wake service with its jobs registered, as the server runs it.
func sweepService(b *testing.B, d *pg.DB) *wake.Service {
	b.Helper()
	svc := wake.New(wake.Deps{DB: d, Q: db.New()})
	if err := svc.RegisterJobs(jobs.New(d.Ops, jobs.Options{})); err != nil {
		b.Fatal(err)
	}
	return svc
}

// BenchmarkSweepTick measures one tick of the 30 s sweep with 10k parked parts, all past
// resetAt (every one resumed in the tick), 100k pending wakes of unparked parts, and the
// 1,100 deliverable webhook wakes handed to delivery jobs. Each iteration parks the parts
// again and puts the webhook wakes back (untimed).
func BenchmarkSweepTick(b *testing.B) {
	ctx := context.Background()
	d, now := seedSweepBench(b)
	svc := sweepService(b, d)
	tick := now.Add(30 * time.Second)
	reset := func() {
		testfix.OpAll(b, d,
			testfix.Stmt{SQL: `UPDATE membership SET parked_until = $1::timestamptz + interval '10 seconds'
				 WHERE org_id IN (SELECT id FROM organisation WHERE slug = 'bench') AND substr(part, 5)::int % 11 = 0`, Args: []any{now}},
			testfix.Stmt{SQL: `UPDATE wake SET status = 'pending', charged_at = NULL WHERE status = 'sending'`},
			testfix.Stmt{SQL: `DELETE FROM river.river_job`},
		)
		for _, t := range []string{"wake", "membership", "river.river_job"} {
			if _, err := d.Ops.Exec(ctx, `VACUUM ANALYZE `+t); err != nil {
				b.Fatal(err)
			}
		}
	}
	var last wake.SweepResult
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		reset()
		b.StartTimer()
		res, err := svc.Sweep(ctx, tick)
		if err != nil {
			b.Fatal(err)
		}
		last = res
	}
	b.StopTimer()
	if last.Resumed != benchProjects*benchPerProj/benchParkedOf || last.Dispatched != 1100 {
		b.Fatalf("tick did not do the work: %+v", last)
	}
	b.ReportMetric(float64(last.Resumed), "resumed/op")
	b.ReportMetric(float64(last.Dispatched), "dispatched/op")
}

// BenchmarkSweepTickIdle: the same data, no park ended and no webhook wake deliverable.
func BenchmarkSweepTickIdle(b *testing.B) {
	ctx := context.Background()
	d, now := seedSweepBench(b)
	svc := sweepService(b, d)
	// Park every webhook agent's part so nothing is deliverable.
	if err := d.Operator(ctx, func(tx *pg.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE membership SET parked_until = $1::timestamptz + interval '1 hour'
			WHERE substr(part, 5)::int % 100 = 0`, now)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := svc.Sweep(ctx, now)
		if err != nil {
			b.Fatal(err)
		}
		if res.Resumed != 0 || res.Dispatched != 0 {
			b.Fatalf("idle tick did work: %+v", res)
		}
	}
}

// BenchmarkClaim: a pager's claim (budget and park checked at delivery) with the 110k
// pending wakes in the table; each iteration claims another part's wake.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	d, now := seedSweepBench(b)
	svc := wake.New(wake.Deps{DB: d, Q: db.New(), Now: func() time.Time { return now.Add(time.Minute) }})
	var agents []wake.Agent
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := tx.Query(ctx, `SELECT agent_id, org_id FROM membership WHERE parked_until IS NULL ORDER BY id LIMIT 20000`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a wake.Agent
			if err := rows.Scan(&a.ID, &a.OrgID); err != nil {
				return err
			}
			agents = append(agents, a)
		}
		return rows.Err()
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := svc.Next(ctx, agents[i%len(agents)], 0)
		if err != nil {
			b.Fatal(err)
		}
		if w == nil && i < len(agents) {
			b.Fatal("nothing to claim")
		}
	}
}

// BenchmarkQueue: the cost a send pays for its wake, as its own tenant transaction (the
// send shares it, so subtract a transaction's BEGIN/COMMIT): one part of a 1,100-part
// project, with the 110k pending wakes in the table (each queue coalesces or opens one).
func BenchmarkQueue(b *testing.B) {
	ctx := context.Background()
	d, _ := seedSweepBench(b)
	svc := wake.New(wake.Deps{DB: d, Q: db.New()})
	type target struct{ project, host, member uuid.UUID }
	var targets []target
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := tx.Query(ctx, `SELECT m.project_id, p.host_org_id, m.id FROM membership m JOIN project p ON p.id = m.project_id ORDER BY m.id LIMIT 5000`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t target
			if err := rows.Scan(&t.project, &t.host, &t.member); err != nil {
				return err
			}
			targets = append(targets, t)
		}
		return rows.Err()
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("tx-only", func(b *testing.B) { // the baseline: the same transaction, SELECT 1
		for i := 0; i < b.N; i++ {
			t := targets[i%len(targets)]
			err := d.InTenant(ctx, pg.Tenant{ProjectID: t.project}, func(tx *pg.Tx) error {
				var x int
				return tx.QueryRow(ctx, "SELECT 1").Scan(&x)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("queue", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			t := targets[i%len(targets)]
			err := d.InTenant(ctx, pg.Tenant{ProjectID: t.project}, func(tx *pg.Tx) error {
				return svc.Queue(ctx, tx, wake.Request{ProjectID: t.project, HostOrgID: t.host, MemberIDs: []uuid.UUID{t.member},
					Source: "message", ThreadID: uuid.Must(uuid.NewV7()), ItemID: uuid.Must(uuid.NewV7())})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// queueAlternatives are the ways of queueing a wake measured by BenchmarkQueueOnePart,
// with the same arguments ($1 member ids, $2 new ids, $3 project, $4 urgent, $5 source,
// $6 thread, $7 item, $8 now, $9 online since). "upsert" is the statement wakes used
// before migration 000008 (one pending row per part, raised by every message);
// "events-notify-in-tx" inserts an event as today but sends its NOTIFY inside the
// transaction, as the upsert did (today's Queue notifies after the commit, in batches).
var queueAlternatives = map[string]string{
	"upsert": `WITH req AS (SELECT unnest($1::uuid[]) AS member_id, unnest($2::uuid[]) AS id), up AS (
  INSERT INTO wake (project_id, id, member_id, agent_id, part, status, urgent, sources, count,
    thread_counts, other_count, last_item_id, created_at, updated_at)
  SELECT m.project_id, req.id, m.id, m.agent_id, m.part, 'pending', $4::boolean, ARRAY[$5::text], 1,
    jsonb_build_object($6::uuid::text, 1), 0, $7::uuid, $8::timestamptz, $8::timestamptz
  FROM req JOIN membership m ON m.project_id = $3::uuid AND m.id = req.member_id
  WHERE (m.last_seen_at IS NULL OR m.last_seen_at <= $9::timestamptz)
  ON CONFLICT (project_id, member_id) WHERE status = 'pending' DO UPDATE SET
    count = wake.count + 1, urgent = wake.urgent OR EXCLUDED.urgent,
    sources = CASE WHEN EXCLUDED.sources[1] = ANY (wake.sources) THEN wake.sources ELSE wake.sources || EXCLUDED.sources END,
    thread_counts = jsonb_set(wake.thread_counts, ARRAY[$6::uuid::text],
      to_jsonb(COALESCE((wake.thread_counts->>$6::uuid::text)::integer, 0) + 1)),
    other_count = wake.other_count + EXCLUDED.other_count,
    last_item_id = COALESCE(EXCLUDED.last_item_id, wake.last_item_id), updated_at = EXCLUDED.updated_at
  RETURNING wake.agent_id)
SELECT count(pg_notify('rr_wake', up.agent_id::text)::text)::integer FROM up`,
	"events-notify-in-tx": `WITH req AS (SELECT unnest($1::uuid[]) AS member_id, unnest($2::uuid[]) AS id), ev AS (
  INSERT INTO wake_event (project_id, id, member_id, agent_id, part, source, urgent, thread_id, item_id, created_at)
  SELECT m.project_id, req.id, m.id, m.agent_id, m.part, $5::text, $4::boolean, $6::uuid, $7::uuid, $8::timestamptz
  FROM req JOIN membership m ON m.project_id = $3::uuid AND m.id = req.member_id
  WHERE (m.last_seen_at IS NULL OR m.last_seen_at <= $9::timestamptz)
  RETURNING agent_id)
SELECT pg_notify('rr_wake', string_agg(DISTINCT agent_id::text, ',')) FROM ev HAVING count(*) > 0`,
}

// BenchmarkQueueOnePart: 32 senders queueing wakes for one offline part at once, each in
// its own tenant transaction (the wake's statement, then COMMIT, as a send ends), on a
// pool of 32 connections: calls/s, p50, p99. "events" is Queue as shipped (its batched
// NOTIFY sent by the running service); the others are the alternatives above. b.N
// transactions in all after 256 untimed ones (plans cached on every connection), e.g.
// -benchtime 3000x.
func BenchmarkQueueOnePart(b *testing.B) {
	f := setupPool(b, 32)
	member := f.member["a"]
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.svc.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	queue := func(alt string) func(tx *pg.Tx) error {
		return func(tx *pg.Tx) error {
			now := f.clock.Now()
			if alt == "events" {
				return f.svc.Queue(f.ctx, tx, wake.Request{ProjectID: f.project, HostOrgID: f.host[f.project], MemberIDs: []uuid.UUID{member}, Source: "message",
					ThreadID: uuid.Must(uuid.NewV7()), ItemID: uuid.Must(uuid.NewV7())})
			}
			_, err := tx.Exec(f.ctx, queueAlternatives[alt], []uuid.UUID{member}, []uuid.UUID{uuid.Must(uuid.NewV7())}, f.project,
				false, "message", uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), now, now.Add(-time.Minute))
			return err
		}
	}
	// burst runs n transactions from 32 goroutines: each one's latency, the wall time, and
	// how many failed (the upsert's lock waits run into the statement timeout).
	burst := func(b *testing.B, alt string, n int) ([]time.Duration, time.Duration, int64) {
		lat := make([]time.Duration, n)
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					t0 := time.Now()
					if err := f.d.InTenant(f.ctx, pg.Tenant{ProjectID: f.project}, queue(alt)); err != nil {
						if failed.Add(1) == 1 {
							b.Log(err)
						}
					}
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		return lat, time.Since(start), failed.Load()
	}
	for _, alt := range []string{"upsert", "events-notify-in-tx", "events"} {
		b.Run(alt, func(b *testing.B) {
			burst(b, alt, 256)
			b.ResetTimer()
			lat, wall, failed := burst(b, alt, b.N)
			b.StopTimer()
			b.ReportMetric(float64(failed), "failed")
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/wall.Seconds(), "calls/s")
			b.ReportMetric(float64(lat[b.N/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[b.N*99/100].Microseconds())/1000, "p99-ms")
			// Fold what this run queued, so every alternative starts from one pending wake.
			if _, err := f.svc.Coalesce(f.ctx, f.clock.Now(), false); err != nil {
				b.Fatal(err)
			}
		})
	}
}
