package rooms_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
)

// Benchmarks. Run them alone, e.g.
//
//	go test ./internal/rooms -run '^$' -bench . -benchtime 200x
//
// RR_BENCH_MEMORY (default 10000; 100000 takes minutes: the HNSW index is built as rows
// arrive) and RR_BENCH_MESSAGES (default 100000; 1000000 for the target) size the
// fixtures. Each reports p50/p95 in milliseconds; read_memory also reports recall@10 of
// the HNSW search against an exact scan.

var benchWords = strings.Fields(`escalation timeout approve expire customer invoice payment refund server database
backup encrypt upload deploy release rollback incident outage latency error retry queue worker schedule meeting
report weekly review budget forecast contract vendor supplier shipment warehouse inventory order delivery
support ticket agent manager engineer design architecture decision policy security password access audit log
metric dashboard alert threshold capacity storage network cache memory cpu disk region cluster migration schema
index query search ranking model training dataset label quality test regression failure bug fix patch version
feature request roadmap priority deadline milestone sprint team hiring salary office travel expense lunch
holiday calendar email message chat call document contract legal compliance privacy consent region europe
america asia price discount campaign marketing sales lead pipeline revenue growth churn retention survey`)

func benchText(rng *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = benchWords[rng.IntN(len(benchWords))]
	}
	return strings.Join(w, " ")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// seedMemory stores n entries with the default (builtin) embedder's vectors in room one,
// in batches.
func seedMemory(b *testing.B, e *env, n int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	emb := embed.NewUSE()
	acme, arch := e.res.Organisations["acme"].ID, e.res.Agents["acme/architect"].ID
	start := time.Now()
	// Building the HNSW index once over all rows is much faster than growing it row by
	// row: drop it, load, and build it again with the migration's definition.
	var def string
	if err := e.db.Operator(ctx, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_vector_use_hnsw'").Scan(&def)
	}); err != nil {
		b.Fatal(err)
	}
	e.exec("DROP INDEX memory_vector_use_hnsw")
	for done := 0; done < n; {
		k := min(2000, n-done)
		ids, texts, vecs := make([]uuid.UUID, k), make([]string, k), make([]string, k)
		for i := range k {
			ids[i] = uuid.Must(uuid.NewV7())
			texts[i] = benchText(rng, 12+rng.IntN(14))
		}
		vs, err := embed.EmbedParallel(ctx, emb, texts, runtime.GOMAXPROCS(0))
		if err != nil {
			b.Fatal(err)
		}
		for i, v := range vs {
			parts := make([]string, len(v))
			for j, x := range v {
				parts[j] = strconv.FormatFloat(float64(x), 'g', 7, 32)
			}
			vecs[i] = "[" + strings.Join(parts, ",") + "]"
		}
		err = e.db.Operator(ctx, func(tx *pg.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', '0', true)"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO memory_entry (project_id, id, org_id, agent_id, content)
SELECT $1, id, $2, $3, c FROM unnest($4::uuid[], $5::text[]) AS u(id, c)`, e.one, acme, arch, ids, texts); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO memory_vector (project_id, memory_id, embedder, embedding)
SELECT $1, id, $2, v::vector FROM unnest($3::uuid[], $4::text[]) AS u(id, v)`, e.one, emb.Name(), ids, vecs)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		done += k
	}
	loaded := time.Since(start)
	err := e.db.Operator(ctx, func(tx *pg.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', '0', true), set_config('maintenance_work_mem', '512MB', true)"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, def)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	// Steady state: autovacuum would have merged the GIN pending lists by now.
	for _, t := range []string{"memory_entry", "memory_vector"} {
		if _, err := e.db.Ops.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil { // also merges GIN pending lists
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d memory entries: load %v, HNSW build %v", n, loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))
}

type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(l[len(l)/2]), "p50-ms")
	b.ReportMetric(ms(l[len(l)*95/100]), "p95-ms")
}

func BenchmarkReadMemory(b *testing.B) {
	n := envInt("RR_BENCH_MEMORY", 10000)
	b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
		e := newEnv(b)
		seedMemory(b, e, n)
		ctx := context.Background()
		sc := e.scope("peter", e.one)
		rng := rand.New(rand.NewPCG(3, 4))
		queries := make([]string, 100)
		for i := range queries {
			queries[i] = benchText(rng, 4+rng.IntN(5))
		}
		// recall@10 of the HNSW search (with the project and visibility filters, as served)
		// against an exact scan of the same rows.
		var hit, total int
		for _, q := range queries[:50] {
			approx, err := e.svc.SemanticIDs(ctx, sc, q, 10, false)
			if err != nil {
				b.Fatal(err)
			}
			exact, err := e.svc.SemanticIDs(ctx, sc, q, 10, true)
			if err != nil {
				b.Fatal(err)
			}
			for _, id := range exact {
				if slices.Contains(approx, id) {
					hit++
				}
			}
			total += len(exact)
		}
		// Warm up, then measure whole tool calls through the MCP handler.
		for _, q := range queries[:10] {
			e.call("peter", e.one, "read_memory", map[string]any{"query": q})
		}
		var lat latencies
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			r := e.call("peter", e.one, "read_memory", map[string]any{"query": queries[i%len(queries)]})
			lat = append(lat, time.Since(t0))
			if r.IsError {
				b.Fatal(r.Text)
			}
		}
		b.StopTimer()
		lat.report(b)
		b.ReportMetric(float64(hit)/float64(max(total, 1)), "recall@10")
	})
}

// seedMessages stores n messages in room one with one INSERT … SELECT.
func seedMessages(b *testing.B, e *env, n int) {
	start := time.Now()
	arch, acme := e.res.Agents["acme/architect"].ID, e.res.Organisations["acme"].ID
	// UUIDv7-shaped ids in time order: a millisecond timestamp prefix per row.
	e.exec(`INSERT INTO room_message (project_id, id, author_agent_id, author_org_id, author_model, content, created_at)
SELECT $1,
  (lpad(to_hex((extract(epoch FROM now() - interval '30 days')*1000)::bigint + g), 12, '0') || '7' ||
   substr(md5(g::text), 1, 3) || '8' || substr(md5(g::text), 4, 15))::uuid,
  $2, $3, 'claude-opus-4', 'seeded message number ' || g, now() - interval '30 days' + g * interval '1 millisecond'
FROM generate_series(1, $4::int) g`, e.one, arch, acme, n)
	// Steady state: what autovacuum would have done by now (it would otherwise compete
	// for the two cores during the measurement).
	if _, err := e.db.Ops.Exec(context.Background(), "VACUUM (ANALYZE) room_message"); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d messages in %v", n, time.Since(start).Round(time.Millisecond))
}

// benchCall reports the latencies of b.N calls of one tool in room one.
func benchCall(e *env, agent, tool string, args map[string]any) func(b *testing.B) {
	return func(b *testing.B) {
		var lat latencies
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			r := e.call(agent, e.one, tool, args)
			lat = append(lat, time.Since(t0))
			if r.IsError {
				b.Fatal(r.Text)
			}
		}
		lat.report(b)
	}
}

func BenchmarkMessages(b *testing.B) {
	n := envInt("RR_BENCH_MESSAGES", 100000)
	e := newEnv(b)
	seedMessages(b, e, n)
	b.Run(fmt.Sprintf("get_messages/messages=%d", n), benchCall(e, "peter", "get_messages", map[string]any{"limit": 20}))
	b.Run(fmt.Sprintf("post_message/messages=%d", n), benchCall(e, "peter", "post_message", map[string]any{"content": "benchmark message"}))
	// send_task, then the recipient's get_inbox (p50/p95 of the pair); the task is then
	// answered, untimed, so the inbox stays one task long.
	b.Run(fmt.Sprintf("send_task+get_inbox/messages=%d", n), func(b *testing.B) {
		var lat latencies
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			s := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "benchmark task"})
			in := e.call("peter", e.one, "get_inbox", map[string]any{"limit": 5})
			lat = append(lat, time.Since(t0))
			if s.IsError || in.IsError {
				b.Fatal(s.Text, in.Text)
			}
			if r := e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": str(s.obj(b), "task_id"), "result": "ok", "status": "done"}); r.IsError {
				b.Fatal(r.Text)
			}
		}
		lat.report(b)
	})
}

// BenchmarkEmbedBacklog: how fast the embedding backlog drains (entries/s), to compare
// with the rate write_memory stores entries (BenchmarkWritesConcurrent in internal/app):
// b.N entries without a vector (written while the embedder was down) with the builtin
// embedder, embedded by EmbedPending in the periodic job's batches of 500 (sweep), or by
// RunEmbedder, which takes the backlog at start on its workers (RunEmbedder).
func BenchmarkEmbedBacklog(b *testing.B) {
	b.Run("sweep", func(b *testing.B) {
		e := newBacklog(b)
		ctx := context.Background()
		b.ResetTimer()
		start := time.Now()
		done := 0
		for done < b.N {
			n, err := e.svc.EmbedPending(ctx, 500)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				b.Fatalf("backlog stalled at %d of %d", done, b.N)
			}
			done += n
		}
		b.ReportMetric(float64(done)/time.Since(start).Seconds(), "entries/s")
	})
	b.Run("RunEmbedder", func(b *testing.B) {
		e := newBacklog(b)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		b.ResetTimer()
		start := time.Now()
		go func() { defer close(stopped); e.svc.RunEmbedder(ctx) }()
		for e.count(`SELECT count(*) FROM memory_entry e WHERE NOT EXISTS (SELECT 1 FROM memory_vector v
WHERE v.project_id = e.project_id AND v.memory_id = e.id)`) > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
		cancel()
		<-stopped
	})
}

// newBacklog is an env whose room "one" holds b.N memory entries without a vector.
func newBacklog(b *testing.B) *env {
	e := newEnv(b)
	acme, arch := e.res.Organisations["acme"].ID, e.res.Agents["acme/architect"].ID
	rng := rand.New(rand.NewPCG(5, 6))
	ids, texts := make([]uuid.UUID, b.N), make([]string, b.N)
	for i := range ids {
		ids[i], texts[i] = uuid.Must(uuid.NewV7()), benchText(rng, 12+rng.IntN(14))
	}
	e.exec(`INSERT INTO memory_entry (project_id, id, org_id, agent_id, content)
SELECT $1, id, $2, $3, c FROM unnest($4::uuid[], $5::text[]) AS u(id, c)`, e.one, acme, arch, ids, texts)
	return e
}

// BenchmarkEmbedBacklogIdle: what a tick of the embedding backlog costs when there is
// nothing to embed, the steady state it spends most ticks in (every 30 s, on every
// replica), over a memory of 200,000 entries that all have their vector row.
func BenchmarkEmbedBacklogIdle(b *testing.B) {
	const entries = 200_000
	e := newEnv(b)
	e.exec(`INSERT INTO memory_entry (project_id, id, org_id, agent_id, content, created_at)
SELECT $1, gen_random_uuid(), $2, $3, 'entry ' || i, now() - interval '1 day' + i * interval '1 ms' FROM generate_series(1, $4::int) AS i`,
		e.one, e.res.Organisations["acme"].ID, e.res.Agents["acme/architect"].ID, entries)
	e.exec(`INSERT INTO memory_vector (project_id, memory_id, embedder) SELECT project_id, id, $1 FROM memory_entry`, e.svc.Embedder.Name())
	e.exec(`ANALYZE memory_entry`)
	e.exec(`ANALYZE memory_vector`)
	ctx := context.Background()
	// The first tick reads every entry (as the hourly pass does); the others read on
	// from where it left off.
	start := time.Now()
	if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 0 {
		b.Fatalf("%d, %v", n, err)
	}
	full := time.Since(start)
	b.ResetTimer()
	for range b.N {
		if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 0 {
			b.Fatalf("%d, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tick")
	b.ReportMetric(float64(full.Microseconds())/1000, "ms/full-pass")
}
