package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
)

// ScratchDatabase drops the database name in the cluster clusterURL points at, creates it
// again and migrates it: every run starts from the same empty schema, and nothing else in
// the cluster is touched. It returns the new database's URL. When clusterURL's database
// is a Citus coordinator's, the scratch database is made on every node and distributed as
// `relayroom migrate citus` does (Citus's default shard count), so the run measures the
// service on the coordinator and its workers.
func ScratchDatabase(ctx context.Context, clusterURL, name string) (string, error) {
	u, err := url.Parse(clusterURL)
	if err != nil {
		return "", fmt.Errorf("cluster URL: %w", err)
	}
	if strings.TrimPrefix(u.Path, "/") == name {
		return "", fmt.Errorf("the scratch database %q is the cluster URL's own database: choose another name", name)
	}
	nodes, err := pg.CitusNodes(ctx, clusterURL)
	if err != nil {
		return "", err
	}
	ident := pgx.Identifier{name}.Sanitize()
	for _, n := range nodes {
		if err := recreate(ctx, n, ident); err != nil {
			return "", err
		}
	}
	u.Path = "/" + name
	dbURL := u.String()
	citus := len(nodes) > 1
	if citus {
		if err := pg.MakeCitusDatabase(ctx, nodes, name); err != nil {
			return "", err
		}
	}
	if _, err := pg.MigrateUp(ctx, dbURL); err != nil {
		return "", err
	}
	if err := jobs.MigrateUp(ctx, dbURL); err != nil {
		return "", err
	}
	if citus {
		if _, err := pg.Distribute(ctx, dbURL, pg.CitusOptions{}); err != nil {
			return "", err
		}
	}
	return dbURL, nil
}

// recreate drops the database ident on the server serverURL names and creates it empty.
func recreate(ctx context.Context, serverURL, ident string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect to the cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s on %s: %w", stmt, conn.Config().Host, err)
		}
	}
	return nil
}

// Fixture is the demo data applied to a scratch database: its keys, connect codes and ids.
type Fixture struct {
	DatabaseURL string
	Result      admin.Result
	Project     string            // slug of the file's first project, the one every call uses
	PartAgents  map[string]string // that project's parts -> agent ref (org/slug)
}

// Seed applies the admin file at path (deploy/demo.yaml) as `relayroom admin apply` does.
func Seed(ctx context.Context, dbURL, path string) (Fixture, error) {
	fh, err := os.Open(path)
	if err != nil {
		return Fixture{}, err
	}
	defer fh.Close()
	file, err := admin.ParseFile(fh)
	if err != nil {
		return Fixture{}, err
	}
	if len(file.Projects) == 0 {
		return Fixture{}, fmt.Errorf("%s defines no project", path)
	}
	d, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 2, OpsMaxConns: 2})
	if err != nil {
		return Fixture{}, err
	}
	defer d.Close()
	// The URLs admin prints are built from the server's base later; only keys and ids matter.
	res, err := admin.New(d, "http://127.0.0.1").Apply(ctx, file, admin.Options{})
	if err != nil {
		return Fixture{}, fmt.Errorf("apply %s: %w", path, err)
	}
	ps := file.Projects[0]
	f := Fixture{DatabaseURL: dbURL, Result: res, Project: ps.Slug, PartAgents: map[string]string{}}
	for _, m := range ps.Members {
		part := m.Part
		if part == "" {
			part = m.Agent[strings.Index(m.Agent, "/")+1:]
		}
		f.PartAgents[part] = m.Agent
	}
	return f, nil
}

// PartKey is the key of the agent behind a part of the project.
func (f Fixture) PartKey(part string) string { return f.Result.Agents[f.PartAgents[part]].Key }

// ProjectID is the project's id (the room's id).
func (f Fixture) ProjectID() uuid.UUID { return f.Result.Projects[f.Project].ID }

// ThreadsURL is a part's threads endpoint on the server at base.
func (f Fixture) ThreadsURL(base, part string) string {
	return admin.ThreadsURL(base, f.Result.Projects[f.Project].ConnectCode, part)
}

// RoomURL is the project's room endpoint on the server at base.
func (f Fixture) RoomURL(base string) string { return base + "/api/mcp/p/" + f.ProjectID().String() }

// AllRoomsURL is the every-room endpoint on the server at base.
func AllRoomsURL(base string) string { return base + "/api/mcp" }

// vocabulary makes the seeded texts, the written texts and the queries: the builtin
// embedder's 50,000 English words, drawn by Zipf's law over their frequency rank
// (p(rank r) ∝ 1/(r+1)), the distribution of real text. About 45% of the drawn words are
// among the 100 most frequent ("the", "of", "which"), and a content word occurs in a few
// entries in a thousand, as in real notes. (An earlier fixture drew every word from 120
// work words: each entry then held every query word, so recall and read_memory ranked the
// whole project on every call, which no real project does.)
var vocabulary = newZipfWords()

// zipfWords is a vocabulary with the cumulative Zipf weight of every rank.
type zipfWords struct {
	words []string
	cum   []float64 // cum[r] = Σ_{i ≤ r} 1/(i+1)
}

// functionWords is how many of the most frequent words count as function words
// ("the", "of", "and"); queries are made of the words after them.
const functionWords = 100

func newZipfWords() zipfWords {
	words, err := embed.BuiltinVocabulary()
	if err != nil {
		// The vocabulary is compiled into the binary: failing to decode it means the
		// binary itself is damaged, and nothing in the load test can run.
		panic(err)
	}
	z := zipfWords{words: words, cum: make([]float64, len(words))}
	total := 0.0
	for r := range words {
		total += 1 / float64(r+1)
		z.cum[r] = total
	}
	return z
}

// draw returns a word of rank in [lo, hi), Zipf-weighted within that range.
func (z zipfWords) draw(rng *rand.Rand, lo, hi int) string {
	base := 0.0
	if lo > 0 {
		base = z.cum[lo-1]
	}
	x := base + rng.Float64()*(z.cum[hi-1]-base)
	return z.words[lo+sort.SearchFloat64s(z.cum[lo:hi], x)]
}

// sentence draws n words.
func sentence(rng *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = vocabulary.draw(rng, 0, len(vocabulary.words))
	}
	return strings.Join(w, " ")
}

// searchQueries are what recall and read_memory are asked, as an agent asks: two or three
// content words (ranks 100 to 20,000, Zipf-weighted: "election committee", "bridge
// construction costs"), sometimes joined by a function word, the same 64 on every run.
var searchQueries = func() []string {
	rng := rand.New(rand.NewPCG(13, 64))
	out := make([]string, 64)
	for i := range out {
		w := []string{}
		for range 2 + rng.IntN(2) {
			w = append(w, vocabulary.draw(rng, functionWords, 20000))
		}
		if rng.IntN(3) == 0 {
			w = append(w[:1], append([]string{vocabulary.draw(rng, 0, functionWords)}, w[1:]...)...)
		}
		out[i] = strings.Join(w, " ")
	}
	return out
}()

// SeedKnowledge stores n trusted knowledge entries in the fixture's project (what recall
// searches), in one statement on the owner's connection.
func SeedKnowledge(ctx context.Context, f Fixture, n int) error {
	d, err := pg.Open(ctx, f.DatabaseURL, pg.Options{MaxConns: 2, OpsMaxConns: 2})
	if err != nil {
		return err
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	titles, bodies := make([]string, n), make([]string, n)
	for i := range n {
		titles[i] = sentence(rng, 4+rng.IntN(4))
		bodies[i] = sentence(rng, 20+rng.IntN(20))
	}
	return d.Operator(ctx, func(tx *pg.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', '0', true)"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
SELECT $1, gen_random_uuid(), (ARRAY['fact','procedure','pitfall','decision'])[1 + (o::int % 4)], t, b, 'trusted', 0.9, 'learn'
FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(t, b, o)`, f.ProjectID(), titles, bodies)
		if err != nil {
			return fmt.Errorf("seed knowledge: %w", err)
		}
		return nil
	})
}

// SeedMemory stores n memory entries of the project's host organisation with the default
// (builtin) embedder's vectors, as the embedding backlog would have left them. The HNSW
// indexes of memory_vector are dropped and built again once at the end: much faster than
// growing them row by row.
func SeedMemory(ctx context.Context, f Fixture, host, author string, n int) error {
	d, err := pg.Open(ctx, f.DatabaseURL, pg.Options{MaxConns: 2, OpsMaxConns: 2})
	if err != nil {
		return err
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(11, uint64(n)))
	ids, texts, vecs := make([]uuid.UUID, n), make([]string, n), make([]string, n)
	for i := range n {
		ids[i] = uuid.Must(uuid.NewV7())
		texts[i] = sentence(rng, 12+rng.IntN(14))
	}
	emb := embed.NewUSE()
	vs, err := embed.EmbedParallel(ctx, emb, texts, runtime.GOMAXPROCS(0))
	if err != nil {
		return fmt.Errorf("embed the seeded memory: %w", err)
	}
	for i, v := range vs {
		parts := make([]string, len(v))
		for j, x := range v {
			parts[j] = strconv.FormatFloat(float64(x), 'g', 7, 32)
		}
		vecs[i] = "[" + strings.Join(parts, ",") + "]"
	}
	org, agent := f.Result.Organisations[host].ID, f.Result.Agents[author].ID
	return d.Operator(ctx, func(tx *pg.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', '0', true), set_config('maintenance_work_mem', '256MB', true)"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memory_vector' AND indexdef ILIKE '%USING hnsw%'")
		if err != nil {
			return err
		}
		defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var p [2]string
			return p, r.Scan(&p[0], &p[1])
		})
		if err != nil {
			return fmt.Errorf("read the HNSW indexes: %w", err)
		}
		for _, p := range defs {
			if _, err := tx.Exec(ctx, "DROP INDEX "+pgx.Identifier{p[0]}.Sanitize()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memory_entry (project_id, id, org_id, agent_id, content)
SELECT $1, id, $2, $3, c FROM unnest($4::uuid[], $5::text[]) AS u(id, c)`, f.ProjectID(), org, agent, ids, texts); err != nil {
			return fmt.Errorf("seed memory: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memory_vector (project_id, memory_id, embedder, embedding)
SELECT $1, id, $2, v::vector FROM unnest($3::uuid[], $4::text[]) AS u(id, v)`, f.ProjectID(), emb.Name(), ids, vecs); err != nil {
			return fmt.Errorf("seed memory vectors: %w", err)
		}
		for _, p := range defs {
			if _, err := tx.Exec(ctx, p[1]); err != nil {
				return fmt.Errorf("rebuild %s: %w", p[0], err)
			}
		}
		return nil
	})
}

// Analyze refreshes the planner's statistics after seeding, as autovacuum would.
func Analyze(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "VACUUM (ANALYZE)")
	return err
}
