package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
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
	type stmt struct {
		sql  string
		args []any
	}
	total := benchProjects * benchPerProj
	stmts := []stmt{
		{`INSERT INTO organisation (id, slug, name) VALUES ($1, 'bench', 'Bench')`, []any{org}},
		{`INSERT INTO agent (id, org_id, slug, name) SELECT gen_random_uuid(), $1, 'a' || i, 'A' || i
		 FROM generate_series(1, $2::int) i`, []any{org, total}},
		{`INSERT INTO project (id, host_org_id, slug, name) SELECT gen_random_uuid(), $1, 'p' || i, 'P' || i
		 FROM generate_series(1, $2::int) i`, []any{org, benchProjects}},
		{`WITH a AS (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM agent WHERE org_id = $1),
		      p AS (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM project WHERE host_org_id = $1)
		 INSERT INTO membership (project_id, id, agent_id, org_id, part, parked_until)
		 SELECT p.id, gen_random_uuid(), a.id, $1, 'part' || a.rn,
		   CASE WHEN a.rn % $3::int = 0 THEN $4::timestamptz + interval '10 seconds' END
		 FROM a JOIN p ON p.rn = (a.rn - 1) / $2::int + 1`, []any{org, benchPerProj, benchParkedOf, now}},
		// History: one delivered wake per part, charged half an hour ago.
		{`INSERT INTO wake (project_id, id, member_id, agent_id, part, status, count, other_count, charged_at, created_at, updated_at, delivered_at)
		 SELECT m.project_id, gen_random_uuid(), m.id, m.agent_id, m.part, 'delivered', 1, 1,
		   $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '29 minutes'
		 FROM membership m WHERE m.org_id = $1`, []any{org, now}},
		// Pending: a wake for every part.
		{`INSERT INTO wake (project_id, id, member_id, agent_id, part, status, count, other_count, created_at, updated_at)
		 SELECT m.project_id, gen_random_uuid(), m.id, m.agent_id, m.part, 'pending', 3, 3,
		   $2::timestamptz - interval '5 minutes', $2::timestamptz - interval '5 minutes'
		 FROM membership m WHERE m.org_id = $1`, []any{org, now}},
		{`INSERT INTO wake_target (org_id, agent_id, url, secret_enc)
		 SELECT $1, m.agent_id, 'https://hooks.example.com/' || m.part, '\\x00'::bytea
		 FROM membership m WHERE m.org_id = $1 AND substr(m.part, 5)::int % 100 = 0`, []any{org}},
		{`ANALYZE`, []any{}},
	}
	err = d.Operator(ctx, func(tx *pg.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return d, now
}

// BenchmarkSweepTick measures one tick of the 30 s sweep with 10k parked parts, all past
// resetAt (every one resumed in the tick), 100k pending wakes of unparked parts, and the
// 1,100 deliverable webhook wakes handed to delivery jobs. Each iteration parks the parts
// again and puts the webhook wakes back (untimed).
func BenchmarkSweepTick(b *testing.B) {
	ctx := context.Background()
	d, now := seedSweepBench(b)
	runner := jobs.New(d.Ops, jobs.Options{})
	svc := &wake.Service{DB: d, Q: db.New()}
	if err := svc.RegisterJobs(runner); err != nil {
		b.Fatal(err)
	}
	tick := now.Add(30 * time.Second)
	reset := func() {
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			for _, q := range []string{
				`UPDATE membership SET parked_until = $1::timestamptz + interval '10 seconds'
				 WHERE org_id IN (SELECT id FROM organisation WHERE slug = 'bench') AND substr(part, 5)::int % 11 = 0`,
				`UPDATE wake SET status = 'pending', charged_at = NULL WHERE status = 'sending' AND $1::timestamptz IS NOT NULL`,
				`DELETE FROM river.river_job WHERE $1::timestamptz IS NOT NULL`,
			} {
				if _, err := tx.Exec(ctx, q, now); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
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
	runner := jobs.New(d.Ops, jobs.Options{})
	svc := &wake.Service{DB: d, Q: db.New()}
	if err := svc.RegisterJobs(runner); err != nil {
		b.Fatal(err)
	}
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
	svc := &wake.Service{DB: d, Q: db.New(), Now: func() time.Time { return now.Add(time.Minute) }}
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
	svc := &wake.Service{DB: d, Q: db.New()}
	type target struct{ project, member uuid.UUID }
	var targets []target
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := tx.Query(ctx, `SELECT project_id, id FROM membership ORDER BY id LIMIT 5000`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t target
			if err := rows.Scan(&t.project, &t.member); err != nil {
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
				return svc.Queue(ctx, tx, wake.Request{ProjectID: t.project, MemberIDs: []uuid.UUID{t.member},
					Source: "message", ThreadID: uuid.Must(uuid.NewV7()), ItemID: uuid.Must(uuid.NewV7())})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
