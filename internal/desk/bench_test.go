package desk_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
)

// benchFullEnv selects the size, 100k conversations and 1M messages (generating
// it takes minutes on a shared 2-core machine); by default the benchmarks run on a tenth
// of it.
const benchFullEnv = "RELAYROOM_DESK_BENCH_FULL"

// Shape of the generated workspace: every conversation has benchMessages messages
// (customer, automated, reply, note, then customers and replies alternating).
const (
	benchMessages = 10
	benchFirstID  = 1000 // above the fixture's own conversations and messages
)

// benchWords are the generated texts' vocabulary. "invoice" is in a third of the
// subjects (a common term); "zebracorn" in one conversation in 10,000 (a rare one).
var benchWords = []string{"account", "billing", "export", "login", "password", "report", "upload", "webhook", "team", "invite",
	"dashboard", "mobile", "sync", "calendar", "refund", "plan", "seat", "email", "domain", "api", "token", "error", "timeout",
	"slow", "chart", "filter", "archive", "restore", "backup", "theme", "language", "notification", "integration", "slack",
	"zapier", "salesforce", "hubspot", "pdf", "spreadsheet", "attachment", "permission", "admin", "owner", "role", "audit",
	"trial", "upgrade", "downgrade", "discount", "receipt"}

// generate fills acme's support and billing inboxes with n conversations and n×10
// messages in three server-side INSERT … SELECT generate_series statements (no rows
// cross the wire), their search text and first-reply times consistent with the messages,
// over the year before the fixture's present.
func generate(b *testing.B, fx *fixture, n int) {
	b.Helper()
	ctx := context.Background()
	org := fx.orgs["acme"]
	start := time.Now()
	// body(g, k) is message k of conversation g: three words of the vocabulary.
	const body = `w[1 + (g * 31 + k * 17) % array_length(w, 1)] || ' ' || w[1 + (g * 13 + k * 7) % array_length(w, 1)] || ' ' || w[1 + (g + k * 3) % array_length(w, 1)]`
	const typ = `CASE k WHEN 0 THEN 'customer' WHEN 1 THEN 'automated' WHEN 2 THEN 'reply' WHEN 3 THEN 'note' ELSE CASE WHEN k % 2 = 0 THEN 'customer' ELSE 'reply' END END`
	err := fx.d.Operator(ctx, func(tx *pg.Tx) error {
		// The generated rows are consistent by construction: their foreign-key checks
		// (a trigger call per row, most of the time taken) are skipped.
		for _, set := range []string{`SET LOCAL statement_timeout = 0`, `SET LOCAL session_replication_role = replica`} {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		convs := `
INSERT INTO desk_conversation (org_id, id, inbox_id, subject, status, customer_email, created_at, updated_at, resolved_at, first_reply_at, search)
SELECT $1, $4::bigint + g, CASE WHEN g % 5 = 0 THEN $3::bigint ELSE $2::bigint END, s.subject,
  CASE g % 3 WHEN 0 THEN 'open' WHEN 1 THEN 'pending' ELSE 'resolved' END,
  'c' || g || '@customer.test', t.ts, t.ts + ($7::int - 1) * interval '1 minute',
  CASE WHEN g % 3 = 2 THEN t.ts + interval '3 hours' END, t.ts + interval '2 minutes',
  strip(to_tsvector('desk_words', s.subject || ' ' || (
    SELECT string_agg(` + body + `, ' ') FROM generate_series(0, $7::int - 1) k WHERE k <> 3)))
FROM generate_series(1, $5::int) g, (SELECT $6::text[] AS w) v,
LATERAL (SELECT $8::timestamptz - (g % 8760) * interval '1 hour' - (g % 53) * interval '1 minute' AS ts) t,
LATERAL (SELECT w[1 + g % array_length(w, 1)] || ' ' || w[1 + (g * 7) % array_length(w, 1)]
  || CASE WHEN g % 3 = 0 THEN ' invoice' ELSE '' END || CASE WHEN g % 10000 = 17 THEN ' zebracorn' ELSE '' END AS subject) s`
		if _, err := tx.Exec(ctx, convs, org, fx.inbox("acme", "support"), fx.inbox("acme", "billing"), benchFirstID, n, benchWords, benchMessages,
			now.Add(-time.Hour)); err != nil {
			return fmt.Errorf("conversations: %w", err)
		}
		msgs := `
INSERT INTO desk_message (org_id, id, conversation_id, type, body, author_user_id, created_at)
SELECT $1, c.id * $4 + k, c.id, ` + typ + `, ` + body + `,
  CASE WHEN k = 2 OR k = 3 OR (k > 3 AND k % 2 = 1) THEN $6::uuid END,
  c.created_at + k * interval '1 minute'
FROM (SELECT id, id - $2 AS g, created_at FROM desk_conversation WHERE org_id = $1 AND id > $2 AND id <= $2 + $3) c
CROSS JOIN generate_series(0, $4 - 1) k, (SELECT $5::text[] AS w) v`
		b.Logf("conversations: %s", time.Since(start).Round(time.Millisecond))
		if _, err := tx.Exec(ctx, msgs, org, benchFirstID, n, benchMessages, benchWords, fx.users["bo@acme.test"]); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		b.Logf("messages: %s", time.Since(start).Round(time.Millisecond))
		_, err := tx.Exec(ctx, `UPDATE desk_counter SET last = $2 WHERE org_id = $1 AND kind IN ('conversation', 'message')`,
			org, int64(benchFirstID+n+1)*benchMessages)
		if err != nil {
			return fmt.Errorf("counters: %w", err)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// What autovacuum does to a workspace in its steady state: statistics, and pages
	// marked all-visible (index-only scans). VACUUM cannot run in a transaction.
	for _, t := range []string{`VACUUM ANALYZE desk_conversation`, `VACUUM ANALYZE desk_message`} {
		if _, err := fx.d.Ops.Exec(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("generated %d conversations and %d messages in %s", n, n*benchMessages, time.Since(start).Round(time.Millisecond))
}

// latencies runs call b.N times and reports the median and 95th percentile.
func latencies(b *testing.B, call func() error) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkDesk measures the tools through the service (the whole call: admission, the
// rate-limit statement, the tool's transaction with its tenant settings) on a workspace
// of 10k conversations / 100k messages, or 100k / 1M with RELAYROOM_DESK_BENCH_FULL=1,
// beside the raw search query on the owner's pool for the ratio.
func BenchmarkDesk(b *testing.B) {
	n := 10_000
	if os.Getenv(benchFullEnv) != "" {
		n = 100_000
	}
	ctx := context.Background()
	unlimited := desk.Limits{Window: time.Minute, MemberReads: 1 << 30, MemberWrites: 1 << 30, WorkspaceReads: 1 << 30, WorkspaceWrites: 1 << 30}
	fx := newFixtureWith(b, map[string]desk.Limits{desk.PlanGrowth: unlimited, desk.PlanScale: unlimited})
	generate(b, fx, n)
	ana := fx.scope("acme", "ana@acme.test")
	bo := fx.scope("acme", "bo@acme.test")
	size := fmt.Sprintf("%dk-conversations", n/1000)

	search := func(sc func() error) func(b *testing.B) { return func(b *testing.B) { latencies(b, sc) } }
	for _, q := range []struct{ name, query string }{{"rare", "zebracorn"}, {"common", "invoice"}, {"two-words", "invoice refund"}} {
		b.Run(size+"/search-"+q.name, search(func() error {
			r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: q.query})
			if err == nil && len(r.Conversations) == 0 {
				err = fmt.Errorf("%q found nothing", q.query)
			}
			return err
		}))
		b.Run(size+"/search-"+q.name+"-member", search(func() error {
			_, err := fx.svc.SearchConversations(ctx, bo, desk.SearchInput{Query: q.query})
			return err
		}))
		// The statement alone, as the request role (RLS on), for the ratio.
		b.Run(size+"/search-"+q.name+"-raw-query", search(func() error {
			return fx.d.InTenant(ctx, pg.Tenant{OrgID: fx.orgs["acme"]}, func(tx *pg.Tx) error {
				_, err := fx.q.DeskConversationSearch(ctx, tx, db.DeskConversationSearchParams{OrgID: fx.orgs["acme"], Query: q.query,
					SeesAll: true, UserID: fx.users["ana@acme.test"], Lim: desk.DefaultLimit + 1, Cap: desk.DefaultSearchCandidates})
				return err
			})
		}))
	}
	b.Run(size+"/get-conversation", search(func() error {
		_, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fmt.Sprintf("conv_%d", benchFirstID+n/2), IncludePrivateNotes: true})
		return err
	}))
	for _, m := range []string{desk.MetricConversationVolume, desk.MetricFirstResponseTime, desk.MetricResolutionTime} {
		b.Run(size+"/report-31-days-"+m, search(func() error {
			_, err := fx.svc.GetReport(ctx, ana, desk.ReportInput{Metric: m, StartDate: "2026-10-10", EndDate: "2026-11-09"})
			return err
		}))
	}
	files := 0 // every file imported holds new rows: the benchmark runs more than once
	b.Run(size+"/import-5000-rows", func(b *testing.B) {
		b.StopTimer()
		var total time.Duration
		for range b.N {
			i := files
			files++
			var csv bytes.Buffer
			csv.WriteString("customer_email,subject,body,created_at,status\n")
			for r := range desk.MaxImportRows {
				fmt.Fprintf(&csv, "row%d-%d@customer.test,Imported question %d-%d,Old ticket body about the %s,2026-%02d-%02dT10:00:00Z,resolved\n",
					i, r, i, r, benchWords[r%len(benchWords)], 1+r%10, 1+r%28)
			}
			b.StartTimer()
			t0 := time.Now()
			sum, err := desk.ImportCSV(ctx, fx.d, fx.orgs["acme"], "support", &csv, now, nil)
			total += time.Since(t0)
			b.StopTimer()
			if err != nil || sum.Created != desk.MaxImportRows {
				b.Fatalf("%+v %v", sum, err)
			}
		}
		b.ReportMetric(total.Seconds()/float64(b.N), "s/import")
		b.ReportMetric(float64(desk.MaxImportRows*b.N)/total.Seconds(), "rows/s")
	})
}
