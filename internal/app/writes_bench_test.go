package app_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/loadtest"
	"github.com/relayroom/relayroom/internal/pg"
)

// writeClients is the concurrency of BenchmarkWritesConcurrent: 32 clients, as many
// connections for the raw loop it is compared with.
const writeClients = 32

// writeSenders is how many parts write in the load project; the 32 clients take turns
// among them (many parts reporting to one main agent).
const writeSenders = 16

// loadSeed adds a project where 16 worker parts report to one always-on lead, and eight
// more parts receive messages sent to many.
func loadSeed() string {
	var agents, members strings.Builder
	add := func(slug string) {
		fmt.Fprintf(&agents, "  - {org: acme, slug: %s, name: %s}\n", slug, slug)
		fmt.Fprintf(&members, "      - {agent: acme/%s, part: %s}\n", slug, slug)
	}
	for i := range writeSenders {
		add(fmt.Sprintf("w%02d", i))
	}
	for i := range 8 {
		add(fmt.Sprintf("r%02d", i))
	}
	return `
organisations:
  - {slug: acme, name: Acme Corp, plan: scale}
agents:
  - {org: acme, slug: lead, name: Lead, kind: always_on}
` + agents.String() + `projects:
  - slug: load
    name: Load
    host: acme
    members:
      - {agent: acme/lead, part: lead, main: true}
` + members.String()
}

// writeLoad drives tools/calls from 32 clients against a running server.
type writeLoad struct {
	s       *server
	res     admin.Result
	project uuid.UUID
	client  *loadtest.Client
}

func (l *writeLoad) threads(part string) (string, string) {
	return admin.ThreadsURL(l.s.base, l.res.Projects["load"].ConnectCode, part), l.res.Agents["acme/"+part].Key
}

func (l *writeLoad) room(agent string) (string, string) {
	return fmt.Sprintf("%s/api/mcp/p/%s", l.s.base, l.project), l.res.Agents["acme/"+agent].Key
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}`)

// call makes one tools/call with the load generator's plain MCP client and returns the
// result's text; a tool error fails.
func (l *writeLoad) call(url, key, tool string, args map[string]any) (string, error) {
	a, err := l.client.Do(context.Background(), loadtest.Call{URL: url, Key: key, Tool: tool, Args: args})
	return a.Text(), err
}

// run makes n calls of op from writeClients goroutines (op gets the call's number) and
// returns each call's latency and the wall time of the whole run.
func run(n int, op func(i int) error) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range writeClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n)) // stop the others
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(start), firstErr
}

// report states calls/s, p50 and p99 (ms), and the ratio of calls/s to the raw loop's.
func report(b *testing.B, lat []time.Duration, wall time.Duration, raw float64) float64 {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rate := float64(len(lat)) / wall.Seconds()
	b.ReportMetric(rate, "calls/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	if raw > 0 {
		b.ReportMetric(rate/raw, "x-raw")
	}
	b.ReportMetric(0, "ns/op") // the rate above is what counts, not the time per b.N
	return rate
}

// BenchmarkWritesConcurrent: every write tool through the real HTTP handler with real
// agent keys, from 32 concurrent clients, beside a raw pgx INSERT transaction loop at 32
// connections in the same run; each reports calls/s, p50, p99 and x-raw, its rate as a
// ratio to the raw loop's (the ratio holds on a noisy machine; absolute numbers do not).
// Each sub-benchmark makes b.N calls: bound the run with a count, e.g.
//
//	go test ./internal/app -run '^$' -bench WritesConcurrent -benchtime 2000x
//
// send_one is 32 clients sending to one offline recipient (one part's wake); send_many
// sends to eight; post_message, send_task and respond_to_task wake the always-on lead.
func BenchmarkWritesConcurrent(b *testing.B) {
	var res admin.Result
	s := startServerWith(b, func(ctx context.Context, d *pg.DB, _ admin.Result) {
		f, err := admin.ParseFile(strings.NewReader(loadSeed()))
		if err != nil {
			b.Fatal(err)
		}
		if res, err = admin.New(d, "http://unused").Apply(ctx, f, admin.Options{}); err != nil {
			b.Fatal(err)
		}
	})
	l := &writeLoad{s: s, res: res, project: res.Projects["load"].ID,
		client: &loadtest.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * writeClients}}}}
	sender := func(i int) string { return fmt.Sprintf("w%02d", i%writeSenders) }
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, s.dbURL+"&pool_max_conns=32&pool_min_conns=32")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_raw (id uuid PRIMARY KEY, body text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	rawInsert := func(n int) ([]time.Duration, time.Duration) {
		lat, wall, err := run(n, func(int) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO bench_raw (id, body) VALUES ($1, $2)`, uuid.Must(uuid.NewV7()), "a raw insert"); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			return tx.Commit(ctx)
		})
		if err != nil {
			b.Fatal(err)
		}
		return lat, wall
	}
	b.Run("raw_insert", func(b *testing.B) {
		lat, wall := rawInsert(b.N)
		report(b, lat, wall, 0)
	})

	// Each tool is measured right after a raw burst of the same size, and x-raw is its
	// rate over that burst's: the load of a shared machine drifts within a run, so the
	// neighbouring burst is the fairer yardstick (raw-calls/s says what it was).
	tool := func(name string, prepare func(n int) func(i int) error) {
		b.Run(name, func(b *testing.B) {
			op := prepare(b.N)
			rl, rw := rawInsert(b.N)
			raw := float64(len(rl)) / rw.Seconds()
			b.ResetTimer()
			lat, wall, err := run(b.N, op)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(raw, "raw-calls/s")
			report(b, lat, wall, raw)
		})
	}
	simple := func(op func(i int) error) func(int) func(int) error {
		return func(int) func(int) error { return op }
	}
	tool("send_one", simple(func(i int) error {
		u, k := l.threads(sender(i))
		_, err := l.call(u, k, "send", map[string]any{"to": []string{"lead"}, "subject": "status", "body": fmt.Sprintf("report %d", i)})
		return err
	}))
	many := []string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07"}
	tool("send_many", simple(func(i int) error {
		u, k := l.threads(sender(i))
		_, err := l.call(u, k, "send", map[string]any{"to": many, "subject": "status", "body": fmt.Sprintf("report %d", i)})
		return err
	}))
	tool("reply", func(int) func(int) error {
		// One thread per sender, opened with the lead: 32 clients reply to 16 threads and
		// each reply wakes the lead.
		threads := make([]string, writeSenders)
		for i := range threads {
			u, k := l.threads(sender(i))
			out, err := l.call(u, k, "send", map[string]any{"to": []string{"lead"}, "subject": "thread", "body": "opening"})
			if err != nil {
				b.Fatal(err)
			}
			threads[i] = uuidRE.FindString(out)
		}
		return func(i int) error {
			u, k := l.threads(sender(i))
			_, err := l.call(u, k, "reply", map[string]any{"threadId": threads[i%writeSenders], "body": fmt.Sprintf("reply %d", i)})
			return err
		}
	})
	tool("learn", simple(func(i int) error {
		u, k := l.threads(sender(i))
		_, err := l.call(u, k, "learn", map[string]any{"title": fmt.Sprintf("lesson %d", i), "kind": "fact",
			"body": fmt.Sprintf("The deploy of build %d needs the cache warmed first.", i)})
		return err
	}))
	tool("post_message", simple(func(i int) error {
		u, k := l.room(sender(i))
		_, err := l.call(u, k, "post_message", map[string]any{"content": fmt.Sprintf("progress note %d", i)})
		return err
	}))
	tool("write_memory", simple(func(i int) error {
		u, k := l.room(sender(i))
		_, err := l.call(u, k, "write_memory", map[string]any{"content": fmt.Sprintf("The invoice service retries payments %d times before it alerts.", i%97),
			"tags": []string{"billing"}, "category": "ops"})
		return err
	}))
	tool("send_task", simple(func(i int) error {
		u, k := l.room(sender(i))
		_, err := l.call(u, k, "send_task", map[string]any{"to_agent_slug": "lead", "goal": fmt.Sprintf("review change %d", i)})
		return err
	}))
	tool("respond_to_task", func(n int) func(int) error {
		// The lead assigns n tasks (untimed, 32 at a time); the workers respond, and each
		// response wakes the lead.
		ids := make([]string, n)
		u, k := l.room("lead")
		if _, _, err := run(n, func(i int) error {
			out, err := l.call(u, k, "send_task", map[string]any{"to_agent_slug": sender(i), "goal": fmt.Sprintf("check build %d", i)})
			ids[i] = uuidRE.FindString(out)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return func(i int) error {
			u, k := l.room(sender(i))
			_, err := l.call(u, k, "respond_to_task", map[string]any{"task_id": ids[i], "status": "done", "result": "looks good"})
			return err
		}
	})
}
