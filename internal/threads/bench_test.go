package threads_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/embed/wordvec"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/wake"
)

// Benchmarks: go test -run '^$' -bench . -benchtime 300x ./internal/threads/
// Each reports p50_ms and p95_ms over its iterations (one call = one tool's service call,
// its whole transaction included).

// uuid7SQL makes time-ordered ids in SQL, like the UUIDv7 ids Go makes.
const uuid7SQL = `CREATE FUNCTION pg_temp.uuid7(ts timestamptz) RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' ||
          substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid $$`

// seedMessages writes 1M messages across 10k threads of project one, from architect to
// backend, frontend and reader in turn (≈333k in each inbox, 10 % unread). Foreign-key
// triggers are off while seeding (session_replication_role), the data being consistent.
func seedMessages(b *testing.B, e *env) {
	b.Helper()
	arch := e.sc("architect")
	sql := func(qs ...string) []testfix.Stmt {
		out := make([]testfix.Stmt, len(qs))
		for i, q := range qs {
			out[i] = testfix.Stmt{SQL: q, Args: []any{arch.ProjectID, arch.MemberID}}
		}
		return out
	}
	stmts := append([]testfix.Stmt{
		{SQL: "SET LOCAL session_replication_role = replica"},
		{SQL: "SET LOCAL statement_timeout = 0"},
		{SQL: uuid7SQL},
		{SQL: `CREATE TEMP TABLE bt ON COMMIT DROP AS
			   SELECT i, pg_temp.uuid7(now() - interval '40 days' + i * interval '1 second') AS id,
			          (SELECT id FROM membership WHERE project_id = $1 AND part = (ARRAY['backend','frontend','reader'])[1 + i % 3]) AS rcpt
			   FROM generate_series(0, 9999) i`, Args: []any{arch.ProjectID}},
	}, sql(
		`INSERT INTO thread (project_id, id, subject, created_by, last_message_at, created_at)
			   SELECT $1::uuid, id, 'bench thread ' || i, $2::uuid, now(), now() FROM bt`,
		`INSERT INTO participant (project_id, thread_id, member_id)
			   SELECT $1::uuid, id, $2::uuid FROM bt UNION ALL SELECT $1::uuid, id, rcpt FROM bt`,
		`INSERT INTO message (project_id, id, thread_id, sender_id, from_part, body, created_at)
			   SELECT $1::uuid, pg_temp.uuid7(now() - interval '30 days' + g * interval '1 ms'), bt.id, $2::uuid, 'architect',
			          'Message ' || g || E' of the benchmark.\nIt has a second line and enough words to need a preview cut somewhere after one hundred and sixty characters, like real ones do.',
			          now() - interval '30 days' + g * interval '1 ms'
			   FROM generate_series(1, 1000000) g JOIN bt ON bt.i = g % 10000`,
		`INSERT INTO delivery (project_id, member_id, message_id, thread_id, read_at)
			   SELECT m.project_id, bt.rcpt, m.id, m.thread_id, CASE WHEN random() < 0.9 THEN now() END
			   FROM message m JOIN bt ON bt.id = m.thread_id WHERE m.project_id = $1 AND $2::uuid IS NOT NULL`,
	)...)
	seed(b, e, "1M messages / 10k threads", "VACUUM ANALYZE", time.Now(), stmts)
}

// seed runs a benchmark's seeding statements in one operator transaction, then vacuum
// (the steady state autovacuum would reach, instead of it competing for the cores during
// the measurement), and logs how long it took since start.
func seed(b *testing.B, e *env, what, vacuum string, start time.Time, stmts []testfix.Stmt) {
	b.Helper()
	testfix.OpAll(b, e.d, stmts...)
	if _, err := e.d.Ops.Exec(context.Background(), vacuum); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %s in %s", what, time.Since(start).Round(time.Second))
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50_ms")
	b.ReportMetric(ms(0.95), "p95_ms")
}

// timeCalls runs call b.N times, timing each call, fails the benchmark at the first error
// and reports the calls' percentiles.
func timeCalls(b *testing.B, call func(i int) error) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		err := call(i)
		d = append(d, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportPercentiles(b, d)
}

func BenchmarkMessaging1M(b *testing.B) {
	e := setup(b)
	e.svc.Waker = nil
	seedMessages(b, e)
	ctx := context.Background()
	// inbox: every item; inbox_unread: the unread ones only (10 % of the inbox).
	for _, c := range []struct {
		name, part string
		in         threads.InboxInput
	}{
		{"inbox", "backend", threads.InboxInput{Limit: 20}},
		{"inbox_unread", "frontend", threads.InboxInput{Limit: 20, UnreadOnly: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			sc := e.sc(c.part)
			timeCalls(b, func(int) error {
				items, err := e.svc.Inbox(ctx, sc, c.in)
				if err == nil && len(items) != 20 {
					err = fmt.Errorf("%d items, want 20", len(items))
				}
				return err
			})
		})
	}
	// search: a text no thread contains, a text in one message, a text in every message.
	for _, c := range []struct{ name, q string }{
		{"search_miss", "no such phrase anywhere"}, {"search_rare", "Message 4242 of"}, {"search_common", "benchmark"},
	} {
		b.Run(c.name, func(b *testing.B) {
			sc := e.sc("frontend")
			timeCalls(b, func(int) error {
				_, err := e.svc.Search(ctx, sc, threads.SearchInput{Query: c.q})
				return err
			})
		})
	}
	send := func(b *testing.B) {
		sc := e.sc("architect")
		timeCalls(b, func(int) error {
			_, err := e.svc.Send(ctx, sc, threads.SendInput{To: []string{"backend"}, Subject: "bench", Body: "A new message for the benchmark."})
			return err
		})
	}
	b.Run("send", send)
	// The same send with the real wake service queueing backend's wake in the message's
	// transaction, as the running service does (backend never calls, so it is offline).
	b.Run("send_with_wake", func(b *testing.B) {
		e.svc.Waker = wake.New(wake.Deps{DB: e.d, Q: db.New(), Now: time.Now, Log: slog.New(slog.DiscardHandler)})
		defer func() { e.svc.Waker = nil }()
		send(b)
	})
}

// BenchmarkRecall: 10k trusted entries in the project while the table holds 1M rows of
// other projects (100k of them trusted) and of other statuses. Texts are drawn from 5 000
// real English words (ranks 100-5100 of the builtin embedder's vocabulary), a title of 5
// words and a body of 30, so queries match some entries and not all.
func BenchmarkRecall(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	arch, peter := e.sc("architect"), e.sc("peter")
	raw, err := os.ReadFile("../embed/builtin/glove50k.bin")
	if err != nil {
		b.Fatal(err)
	}
	table, err := wordvec.Decode(raw)
	if err != nil {
		b.Fatal(err)
	}
	vocab := table.Words[100:5100]
	start := time.Now()
	text := func(n int, seed string) string {
		return `(SELECT string_agg(w[1 + (abs(hashtext(g::text || '` + seed + `' || k::text)) % 5000)], ' ') FROM generate_series(1, ` + strconv.Itoa(n) + `) k)`
	}
	seed(b, e, "1M knowledge rows", "VACUUM ANALYZE knowledge", start, []testfix.Stmt{
		{SQL: "SET LOCAL statement_timeout = 0"},
		{SQL: "SET LOCAL session_replication_role = replica"},
		{SQL: "DROP INDEX knowledge_trusted_fts_idx, knowledge_live_trgm_idx"},
		// The project's 10k trusted entries.
		{SQL: `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
			 SELECT $1::uuid, gen_random_uuid(), (ARRAY['fact','procedure','pitfall','decision'])[1 + g % 4],
			   ` + text(5, "t") + `, ` + text(30, "b") + `, 'trusted', 0.5 + (g % 50) / 100.0, 'learn'
			 FROM generate_series(1, 10000) g, (SELECT $2::text[] AS w) ws`, Args: []any{arch.ProjectID, vocab}},
		// 100k trusted entries of another project, same vocabulary.
		{SQL: `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
			 SELECT $1::uuid, gen_random_uuid(), 'fact', ` + text(5, "T") + `, ` + text(30, "B") + `, 'trusted', 1, 'learn'
			 FROM generate_series(1, 100000) g, (SELECT $2::text[] AS w) ws`, Args: []any{peter.ProjectID, vocab}},
		// 890k rows of other statuses, half of them in this project.
		{SQL: `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
			 SELECT CASE WHEN g % 2 = 0 THEN $1::uuid ELSE $2::uuid END, gen_random_uuid(), 'fact',
			   w[1 + g % 5000] || ' ' || w[1 + (g * 7) % 5000] || ' ' || g, w[1 + (g * 13) % 5000] || ' ' || w[1 + (g * 31) % 5000] || ' ' || g,
			   (ARRAY['candidate','rejected','demoted','expired'])[1 + g % 4], 0.5, 'learn'
			 FROM generate_series(1, 890000) g, (SELECT $3::text[] AS w) ws`, Args: []any{arch.ProjectID, peter.ProjectID, vocab}},
		{SQL: "SET LOCAL maintenance_work_mem = '256MB'"},
		{SQL: `CREATE INDEX knowledge_trusted_fts_idx ON knowledge USING gin (project_id, tsv) WHERE status = 'trusted'`},
		{SQL: `CREATE INDEX knowledge_live_trgm_idx ON knowledge USING gin (project_id, title gin_trgm_ops) WHERE status IN ('candidate', 'trusted')`},
	})
	// Queries of 2-5 words: a few words from the vocabulary, as an agent would ask.
	queries := []string{
		vocab[10] + " " + vocab[200], vocab[1500] + " " + vocab[37] + " " + vocab[999],
		"how do we " + vocab[2500] + " the " + vocab[3100], vocab[4000] + " " + vocab[4001],
		vocab[5] + " " + vocab[6] + " " + vocab[7] + " " + vocab[8], "deploy rollback",
	}
	if testing.Verbose() {
		explainRecall(b, e, queries[2])
	}
	b.Run("recall", func(b *testing.B) {
		got := 0
		timeCalls(b, func(i int) error {
			r, err := e.know.Recall(ctx, arch, knowledge.RecallInput{Query: queries[i%len(queries)], Limit: 5})
			got += len(r.Entries)
			return err
		})
		b.ReportMetric(float64(got)/float64(b.N), "entries/op")
	})
}

// explainRecall logs the plan and timing of rr_recall's body for one query (go test -v),
// explained as it runs: on the owner's connection with the tenant set.
func explainRecall(b *testing.B, e *env, q string) {
	ctx := context.Background()
	arch := e.sc("architect")
	_ = e.d.Operator(ctx, func(tx *pg.Tx) error {
		var src string
		if err := tx.QueryRow(ctx, "SELECT prosrc FROM pg_proc WHERE proname = 'rr_recall'").Scan(&src); err != nil {
			b.Log(err)
			return err
		}
		src, err := testfix.RecallQuery(src)
		if err != nil {
			b.Log(err)
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT set_config('app.project_id', $1, true), set_config('pg_trgm.word_similarity_threshold', '0.5', true)", arch.ProjectID.String()); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+src, arch.ProjectID, q, q, nil, time.Now(), int32(60))
		if err != nil {
			b.Log(err)
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Log(err)
			return err
		}
		b.Log("\n" + strings.Join(lines, "\n"))
		return nil
	})
}
