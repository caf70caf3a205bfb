package rooms_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

const (
	b62  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	a2z7 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b64  = b62 + "+/"
	dig  = "0123456789"
	hexa = "0123456789abcdef"
)

// secretSamples are fake but well-formed credentials, at least one of every kind the
// spec and the issue list, generated (seeded) so no real-looking key is stored here.
func secretSamples() map[string]string {
	rng := rand.New(rand.NewPCG(7, 11))
	p := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	enc := base64.RawURLEncoding
	jwt := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(`{"sub":"`+p(b62, 12)+`","iat":1767225600}`)) + "." + enc.EncodeToString([]byte(p(b62, 32)))
	var pem strings.Builder
	for range 6 {
		pem.WriteString(p(b64, 64) + "\n")
	}
	return map[string]string{
		"openai key":       "Use OPENAI_API_KEY sk-proj-" + p(b62+"-_", 156) + " for the batch job.",
		"anthropic key":    "anthropic: sk-ant-api03-" + p(b62+"-_", 93) + "AA",
		"stripe key":       "Stripe secret sk_live_" + p(b62, 24) + " leaked",
		"google key":       "maps key=AIza" + p(b62+"-_", 35),
		"aws access key":   "aws_access_key_id = AKIA" + p(a2z7, 16),
		"aws secret key":   "aws_secret_access_key = " + p(b64, 40),
		"github token":     "push with ghp_" + p(b62, 36),
		"slack token":      "SLACK_BOT_TOKEN=xoxb-" + p(dig, 12) + "-" + p(dig, 13) + "-" + p(b62, 24),
		"jwt":              "Authorization: Bearer " + jwt,
		"pem private key":  "-----BEGIN RSA PRIVATE KEY-----\n" + pem.String() + "-----END RSA PRIVATE KEY-----",
		"KEY= line":        "SOMETHING_KEY=k3y/with+sym!bols_" + p(b62, 8),
		"SECRET= line":     "export SESSION_SECRET='" + p(b62, 12) + "$%^&*()-+=" + p(b62, 4) + "'",
		"TOKEN= line":      "API_TOKEN=" + p(hexa, 40),
		"relayroom key":    "my key is sk-qyt-" + p(b62, 46),
		"relayroom token":  "token qyt_at_" + p(b62, 46),
		"url with secret":  "DATABASE_URL=postgres://app:S3cr3t-" + p(b62, 10) + "@db.internal:5432/app",
		"slack webhook":    "post to https://hooks.slack.com/services/T" + p("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 8) + "/B" + p("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 10) + "/" + p(b62, 24),
		"password in yaml": "DB_PASSWORD=p@ss-W0rd!" + p(dig, 4) + "#x",
	}
}

func TestWriteMemoryRefusesSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for kind, text := range secretSamples() {
		r := e.call("architect", e.one, "write_memory", map[string]any{"content": text})
		if !r.IsError || r.Text != "Error: "+rooms.MsgSecret {
			t.Errorf("%s: not refused: %s", kind, r.Text)
		}
	}
	if n := e.count("SELECT count(*) FROM memory_entry"); n != 0 {
		t.Fatalf("%d refused entries were stored", n)
	}
	if n := e.count("SELECT count(*) FROM room_message"); n != 0 {
		t.Fatalf("refused writes left %d cards", n)
	}
	prose := []string{
		"Rotate the API token every 90 days; the secret manager holds it, never the room.",
		"Decision: the session token lifetime is 15 minutes and the refresh token lasts 30 days.",
		"Keep secrets out of memory. The KEY= lines in .env.example are placeholders like API_KEY=your-key-here.",
		"The JWT library validates the token signature before reading claims.",
		"Our GitHub token policy: fine-grained tokens only, scoped to one repository.",
	}
	for _, text := range prose {
		if r := e.call("architect", e.one, "write_memory", map[string]any{"content": text}); r.IsError {
			t.Errorf("prose refused: %q: %s", text, r.Text)
		}
	}
}

// TestTheSameWriteAgainAnswersTheStoredEntry: a write that repeats one already stored (a
// client's retry without an Idempotency-Key) answers that entry and stores nothing; any
// difference is an entry of its own.
func TestTheSameWriteAgainAnswersTheStoredEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	content := "Decision: escalations time out at 72h and expire, not auto-approve."
	args := func(extra map[string]any) map[string]any {
		a := map[string]any{"content": content, "tags": []any{"architecture"}, "category": "decision"}
		for k, v := range extra {
			if v == nil {
				delete(a, k)
				continue
			}
			a[k] = v
		}
		return a
	}
	write := func(part string, a map[string]any) map[string]any {
		t.Helper()
		r := e.call(part, e.one, "write_memory", a)
		if r.IsError {
			t.Fatalf("write_memory: %s", r.Text)
		}
		return r.obj(t)
	}
	first := write("architect", args(nil))
	t.Run("the same write answers the first entry, with no copy and no card", func(t *testing.T) {
		again := write("architect", args(nil))
		if again["memory_id"] != first["memory_id"] || again["already_stored"] != true || again["timestamp"] != first["timestamp"] ||
			again["written_by"] != first["written_by"] || again["category"] != "decision" {
			t.Fatalf("first %v, again %v", first, again)
		}
		if _, ok := first["already_stored"]; ok {
			t.Fatalf("a new entry says already_stored: %v", first)
		}
		if n := e.count("SELECT count(*) FROM memory_entry"); n != 1 {
			t.Fatalf("%d entries", n)
		}
		if n := e.count("SELECT count(*) FROM room_message"); n != 1 {
			t.Fatalf("%d cards", n)
		}
	})
	t.Run("another member's same write answers it too", func(t *testing.T) {
		if again := write("qa-lead", args(nil)); again["memory_id"] != first["memory_id"] || again["written_by"] != first["written_by"] {
			t.Fatalf("first %v, qa-lead's %v", first, again)
		}
	})
	t.Run("other tags, category or visibility are an entry of their own", func(t *testing.T) {
		for name, extra := range map[string]map[string]any{
			"no tags":     {"tags": []any{}},
			"no category": {"category": nil},
			"no decision": {"category": "note"},
			"private":     {"is_private": true},
			"other text":  {"content": content + "!"},
		} {
			if got := write("architect", args(extra)); got["memory_id"] == first["memory_id"] || got["already_stored"] == true {
				t.Errorf("%s: answered the first entry: %v", name, got)
			}
		}
	})
	t.Run("a deprecated entry is written again", func(t *testing.T) {
		e.exec("UPDATE memory_entry SET deprecated_at = now() WHERE id = $1", uuidOf(t, str(first, "memory_id")))
		if got := write("architect", args(nil)); got["memory_id"] == first["memory_id"] || got["already_stored"] == true {
			t.Fatalf("answered the deprecated entry: %v", got)
		}
	})
}

func TestReadMemoryHybridSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	write := func(agent, content string, extra map[string]any) string {
		args := map[string]any{"content": content}
		for k, v := range extra {
			args[k] = v
		}
		return str(e.call(agent, e.one, "write_memory", args).obj(t), "memory_id")
	}
	decision := write("architect", "Escalations expire after three days rather than being approved automatically.", map[string]any{"is_decision": true, "category": "decision", "tags": []string{"architecture"}})
	write("architect", "The restaurant near the office serves excellent pasta on Fridays.", nil)
	code := write("peter", "Build ZX-4471-QQ failed on the integration runner; rerun with a clean cache.", map[string]any{"tags": []string{"ci"}})
	private := write("architect", "Acme internal: the escalation budget for the guest team is capped.", map[string]any{"is_private": true})
	deprecated := write("architect", "Escalations expire after one day.", nil)
	e.exec("UPDATE memory_entry SET deprecated_at = now() WHERE id = $1", uuidOf(t, deprecated))

	// Semantic: a paraphrase with no shared keyword finds the decision, with relevance.
	r := e.call("peter", e.one, "read_memory", map[string]any{"query": "how long until an escalation lapses instead of auto approval?"}).obj(t)
	entries := r["entries"].([]any)
	if len(entries) == 0 || str(entries[0].(map[string]any), "id") != decision {
		t.Fatalf("decision not found first: %s", fmtJSON(r))
	}
	first := entries[0].(map[string]any)
	if rel := str(first, "relevance"); !strings.HasSuffix(rel, "%") {
		t.Fatalf("relevance missing after a semantic search: %v", first)
	}
	if first["written_by"] != "Architect (Acme Corp)" || first["model"] != "claude-opus-4" || first["is_decision"] != true ||
		first["category"] != "decision" || r["found"].(float64) != float64(len(entries)) {
		t.Fatalf("entry fields: %v", first)
	}
	for _, x := range entries {
		id := str(x.(map[string]any), "id")
		if id == deprecated || id == private {
			t.Fatalf("guest got a deprecated or the host's private entry: %s", fmtJSON(x))
		}
	}
	// Lexical: an exact build id the embedder does not know.
	r = e.call("architect", e.one, "read_memory", map[string]any{"query": "ZX-4471-QQ"}).obj(t)
	if entries := r["entries"].([]any); len(entries) != 1 || str(entries[0].(map[string]any), "id") != code {
		t.Fatalf("exact id not found: %s", fmtJSON(r))
	}
	// The writer's own organisation reads its private entry; the guest never does.
	r = e.call("architect", e.one, "read_memory", map[string]any{"query": "escalation budget guest team"}).obj(t)
	if !strings.Contains(fmtJSON(r), private) {
		t.Fatalf("own private entry not found: %s", fmtJSON(r))
	}
	r = e.call("peter", e.one, "read_memory", map[string]any{"query": "escalation budget guest team"}).obj(t)
	if strings.Contains(fmtJSON(r), private) {
		t.Fatalf("guest read the host's private entry: %s", fmtJSON(r))
	}
	// Filters.
	r = e.call("peter", e.one, "read_memory", map[string]any{"query": "escalations", "tags": []string{"ci"}}).obj(t)
	if strings.Contains(fmtJSON(r), decision) {
		t.Fatalf("tag filter ignored: %s", fmtJSON(r))
	}
	r = e.call("peter", e.one, "read_memory", map[string]any{"query": "escalations", "category": "decision"}).obj(t)
	if es := r["entries"].([]any); len(es) != 1 || str(es[0].(map[string]any), "id") != decision {
		t.Fatalf("category filter: %s", fmtJSON(r))
	}
	// In any case, as "Decision" is the decision category: "Decision" and "CI" found
	// nothing, by both halves of the search (the build id is found lexically only).
	r = e.call("peter", e.one, "read_memory", map[string]any{"query": "escalations", "category": "Decision"}).obj(t)
	if es := r["entries"].([]any); len(es) != 1 || str(es[0].(map[string]any), "id") != decision {
		t.Fatalf("category filter in another case: %s", fmtJSON(r))
	}
	r = e.call("architect", e.one, "read_memory", map[string]any{"query": "ZX-4471-QQ", "tags": []string{"CI"}}).obj(t)
	if es := r["entries"].([]any); len(es) != 1 || str(es[0].(map[string]any), "id") != code {
		t.Fatalf("tag filter in another case: %s", fmtJSON(r))
	}
	// Nothing relevant: the spec's message, not an error.
	r = e.call("peter", e.one, "read_memory", map[string]any{"query": "zqxj wvpk"}).obj(t)
	if r["message"] != rooms.MsgNoMemory || len(r["entries"].([]any)) != 0 || r["found"] != nil {
		t.Fatalf("empty result: %s", fmtJSON(r))
	}
	// A query of stop words is about nothing: "the" is in most entries, and matched them
	// as exactly as an id ("the" is also inside "other" and "there").
	for _, q := range []string{"the", "The and"} {
		r = e.call("peter", e.one, "read_memory", map[string]any{"query": q}).obj(t)
		if r["message"] != rooms.MsgNoMemory {
			t.Fatalf("%q: %s", q, fmtJSON(r))
		}
	}
	// Room two's memory is not room one's.
	r = e.call("architect", e.two, "read_memory", map[string]any{"query": "escalations expire"}).obj(t)
	if r["message"] != rooms.MsgNoMemory {
		t.Fatalf("room two sees room one's memory: %s", fmtJSON(r))
	}
	// The memory cards are in the conversation, in order, and the private one hides its content.
	msgs := e.call("architect", e.one, "get_messages", map[string]any{"limit": 100}).obj(t)["messages"].([]any)
	if len(msgs) != 5 || !strings.HasPrefix(str(msgs[0].(map[string]any), "content"), "[memory] Wrote a decision") {
		t.Fatalf("memory cards: %s", fmtJSON(msgs))
	}
	if c := str(msgs[3].(map[string]any), "content"); strings.Contains(c, "budget") {
		t.Fatalf("a private entry's card shows its content: %s", c)
	}
}

// TestSemanticSearchUsesTheIndex: the semantic half's statement, explained as the request
// role, is an index scan of the USE embedder's HNSW index (migration 000045): its ORDER
// BY must be the indexed expression, cast to the index's type, or the planner sorts the
// room's vectors instead. The room holds 2,000 random vectors, enough for a sequential
// scan and a sort to cost more than the index.
func TestSemanticSearchUsesTheIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acme, arch := e.res.Organisations["acme"].ID, e.res.Agents["acme/architect"].ID
	rng := rand.New(rand.NewPCG(7, 8))
	ids, vecs := make([]uuid.UUID, 2000), make([]string, 2000)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
		v := make([]string, embed.USEDim)
		for j := range v {
			v[j] = strconv.FormatFloat(rng.Float64()-0.5, 'f', 4, 64)
		}
		vecs[i] = "[" + strings.Join(v, ",") + "]"
	}
	e.exec(`INSERT INTO memory_entry (project_id, id, org_id, agent_id, content)
SELECT $1, id, $2, $3, 'entry ' || id FROM unnest($4::uuid[]) AS u(id)`, e.one, acme, arch, ids)
	e.exec(`INSERT INTO memory_vector (project_id, memory_id, embedder, embedding)
SELECT $1, id, $2, v::vector FROM unnest($3::uuid[], $4::text[]) AS u(id, v)`, e.one, embed.USEName, ids, vecs)
	e.exec("ANALYZE memory_entry")
	e.exec("ANALYZE memory_vector")
	plan, err := e.svc.SemanticPlan(context.Background(), e.scope("peter", e.one), "how long until an escalation lapses", 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the plan scans memory_vector_use_hnsw", func(t *testing.T) {
		if !strings.Contains(plan, "Index Scan using memory_vector_use_hnsw") {
			t.Fatalf("the semantic search does not use the HNSW index:\n%s", plan)
		}
	})
}

// TestReadMemoryBoundsItsQuery: the service bounds the query as the tool's schema does,
// for callers that do not go through the schema (the dashboard's search box).
func TestReadMemoryBoundsItsQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sc := e.scope("architect", e.one)
	_, err := e.svc.ReadMemory(context.Background(), sc, rooms.ReadMemoryInput{Query: strings.Repeat("é", rooms.MaxMemoryQuery+1)})
	if ae, ok := apperr.As(err); !ok || ae.Code != apperr.Invalid || !strings.Contains(ae.Message, "at most 1000 characters") {
		t.Fatalf("a query of %d characters: %v", rooms.MaxMemoryQuery+1, err)
	}
	if _, err := e.svc.ReadMemory(context.Background(), sc, rooms.ReadMemoryInput{Query: strings.Repeat("é", rooms.MaxMemoryQuery)}); err != nil {
		t.Fatalf("a query of %d characters: %v", rooms.MaxMemoryQuery, err)
	}
}

func TestReadMemoryWithoutEmbedderIsLexicalWithoutRelevance(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *config.Config) { c.Embedder = "none" })
	e.call("architect", e.one, "write_memory", map[string]any{"content": "Escalations expire after three days."}).obj(t)
	r := e.call("architect", e.one, "read_memory", map[string]any{"query": "when do escalations expire"}).obj(t)
	entries := r["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("lexical search found nothing: %s", fmtJSON(r))
	}
	if _, has := entries[0].(map[string]any)["relevance"]; has {
		t.Fatalf("relevance reported without a semantic search: %s", fmtJSON(r))
	}
	if n := e.count("SELECT count(*) FROM memory_vector"); n != 0 {
		t.Fatalf("none stored %d vectors", n)
	}
}

// hashEmbedder is a small deterministic embedder with a switchable failure mode.
type hashEmbedder struct {
	name  string
	mode  atomic.Int32 // 0 works, 1 fails, 2 hangs until the context ends
	calls atomic.Int32
	// refuse, when set, makes the whole request fail with a 400 when one of its texts
	// contains it, as an OpenAI-compatible server refuses a batch with a text too long.
	refuse atomic.Pointer[string]
	// fail, when set, makes the whole request fail with a 500 when one of its texts
	// contains it, as a server fails on a text it cannot embed without saying so.
	fail atomic.Pointer[string]
}

func (h *hashEmbedder) Name() string { return h.name }
func (h *hashEmbedder) Dim() int     { return 16 }
func (h *hashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	h.calls.Add(1)
	switch h.mode.Load() {
	case 1:
		return nil, errors.New("embedding server down")
	case 2:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	for _, t := range texts {
		if w := h.refuse.Load(); w != nil && strings.Contains(t, *w) {
			return nil, &embed.HTTPError{URL: "http://embedder.test/v1/embeddings", StatusCode: http.StatusBadRequest,
				Status: "400 Bad Request", Body: "input is longer than the model's context"}
		}
		if w := h.fail.Load(); w != nil && strings.Contains(t, *w) {
			return nil, &embed.HTTPError{URL: "http://embedder.test/v1/embeddings", StatusCode: http.StatusInternalServerError,
				Status: "500 Internal Server Error", Body: "json: unsupported value: NaN"}
		}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 16)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			f := fnv.New32a()
			f.Write([]byte(strings.Trim(w, ".,?!")))
			v[f.Sum32()%16]++
		}
		var n float64
		for _, x := range v {
			n += float64(x * x)
		}
		if n > 0 {
			for j := range v {
				v[j] /= float32(math.Sqrt(n))
			}
		}
		out[i] = v
	}
	return out, nil
}

var _ embed.Embedder = (*hashEmbedder)(nil)

// hashEmbedding puts a hash embedder on e's service, which a write waits for 100 ms at
// most (an embedder that fails or hangs costs the test no more), and returns it.
func hashEmbedding(e *env) *hashEmbedder {
	h := &hashEmbedder{name: "hash-v1"}
	e.svc.Embedder, e.svc.EmbedTimeout = h, 100*time.Millisecond
	return h
}

// writeBacklog writes first, then 20 escalation notes, as sc while h is down: all of them
// wait in the backlog, first's the oldest. h is up again on return.
func writeBacklog(t *testing.T, e *env, h *hashEmbedder, sc tenancy.Scope, first ...string) {
	t.Helper()
	h.mode.Store(1)
	for i := range 20 {
		first = append(first, fmt.Sprintf("Escalation note number %d for the billing team", i))
	}
	for _, c := range first {
		if _, err := e.svc.WriteMemory(context.Background(), sc, rooms.WriteMemoryInput{Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	h.mode.Store(0)
}

// poisoned is n parts of a document whose word "poisoned" a test's embedder fails on.
func poisoned(n int) []string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("The poisoned design document part %d", i)
	}
	return parts
}

func TestWriteNeverFailsBecauseOfTheEmbedder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	h := hashEmbedding(e)
	sc := e.scope("architect", e.one)

	h.mode.Store(1) // down
	if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: "alpha escalation policy"}); err != nil {
		t.Fatalf("write failed with the embedder down: %v", err)
	}
	h.mode.Store(2) // slow
	start := time.Now()
	if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: "beta escalation policy"}); err != nil {
		t.Fatalf("write failed with the embedder slow: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("write waited %v for a hanging embedder", d)
	}
	if n := e.count("SELECT count(*) FROM memory_vector"); n != 0 {
		t.Fatalf("%d vectors stored while the embedder failed", n)
	}
	// Reads still work (lexically, without relevance) while the embedder is away.
	res, err := e.svc.ReadMemory(ctx, sc, rooms.ReadMemoryInput{Query: "escalation policy"})
	if err != nil || len(res.Entries) != 2 || res.Semantic || res.Entries[0].Relevance != nil {
		t.Fatalf("read during outage: %+v %v", res, err)
	}
	h.mode.Store(0)
	n, err := e.svc.EmbedPending(ctx, 10)
	if err != nil || n != 2 {
		t.Fatalf("EmbedPending = %d, %v; want 2", n, err)
	}
	if n, err := e.svc.EmbedPending(ctx, 10); err != nil || n != 0 {
		t.Fatalf("second EmbedPending = %d, %v; want 0", n, err)
	}
	res, err = e.svc.ReadMemory(ctx, sc, rooms.ReadMemoryInput{Query: "alpha escalation policy"})
	if err != nil || !res.Semantic || len(res.Entries) == 0 || res.Entries[0].Relevance == nil || res.Entries[0].Content != "alpha escalation policy" {
		t.Fatalf("semantic read after catching up: %+v %v", res, err)
	}
}

// TestEmbedBacklogGoesPastAnEntryTheEmbedderRefuses: an entry the embeddings server refuses
// (too long for its model: a 400 for the whole request it is in) does not hold up the
// backlog behind it; it is kept without a vector and still found by its words. A server
// that refuses every entry is taken for misconfigured: nothing is marked, the error stands.
func TestEmbedBacklogGoesPastAnEntryTheEmbedderRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	h := hashEmbedding(e)
	sc := e.scope("architect", e.one)
	writeBacklog(t, e, h, sc, "The oversized runbook for the quarterly failover drill")
	poison := "oversized"
	h.refuse.Store(&poison)
	t.Run("the entries behind the refused one are embedded", func(t *testing.T) {
		n, err := e.svc.EmbedPending(ctx, 100)
		if err != nil || n != 21 {
			t.Fatalf("EmbedPending = %d, %v; want 21 finished (20 embedded, 1 refused) and no error", n, err)
		}
		if v := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NOT NULL"); v != 20 {
			t.Fatalf("%d vectors, want 20", v)
		}
		if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 0 {
			t.Fatalf("the next tick: %d, %v; want nothing left", n, err)
		}
	})
	t.Run("the refused entry is still found by its words", func(t *testing.T) {
		res, err := e.svc.ReadMemory(ctx, sc, rooms.ReadMemoryInput{Query: "quarterly failover runbook"})
		if err != nil || len(res.Entries) == 0 || !strings.Contains(res.Entries[0].Content, "failover drill") {
			t.Fatalf("read: %+v %v", res, err)
		}
	})
	t.Run("a server refusing every entry marks none", func(t *testing.T) {
		h.mode.Store(1)
		for i := range 3 {
			if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: fmt.Sprintf("Another oversized appendix %d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		h.mode.Store(0)
		everything := "" // every text holds it: a wrong model name, say
		h.refuse.Store(&everything)
		defer h.refuse.Store(&poison)
		if n, err := e.svc.EmbedPending(ctx, 100); err == nil || n != 0 {
			t.Fatalf("EmbedPending = %d, %v; want 0 and the refusal", n, err)
		}
		if v := e.count("SELECT count(*) FROM memory_vector"); v != 21 {
			t.Fatalf("%d vector rows, want the 21 of before", v)
		}
	})
}

// TestEmbedBacklogIsNotHeldBackByOneChunk: the backlog lists its oldest entries first, so
// a chunk of them that always fails must not keep the entries behind it, of every room,
// from ever being embedded.
func TestEmbedBacklogIsNotHeldBackByOneChunk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		poison func(h *hashEmbedder, word *string)
		bad    int // the oldest entries, the server fails on each
		left   int // of them, still without a vector row after the ticks (parked)
	}{
		{"a whole chunk the server refuses entry by entry", func(h *hashEmbedder, w *string) { h.refuse.Store(w) }, 16, 0},
		{"a whole chunk the server fails on without saying it refuses", func(h *hashEmbedder, w *string) { h.fail.Store(w) }, 16, 16},
		{"entries the server fails on at the head of a chunk of good ones", func(h *hashEmbedder, w *string) { h.fail.Store(w) }, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			h := hashEmbedding(e)
			writeBacklog(t, e, h, e.scope("architect", e.one), poisoned(c.bad)...)
			word := "poisoned"
			c.poison(h, &word)
			// The first tick embeds the entries behind the chunk; the next finds only what
			// is left of the chunk.
			if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n < 20 {
				t.Fatalf("the first tick: %d, %v", n, err)
			}
			// What the server fails on while it works is parked, not an error of the tick.
			if n, err := e.svc.EmbedPending(ctx, 100); n != 0 || err != nil {
				t.Fatalf("the next tick: %d, %v", n, err)
			}
			if v := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NOT NULL"); v != 20 {
				t.Fatalf("%d of the 20 entries behind the failing chunk embedded", v)
			}
			if left := e.count("SELECT count(*) FROM memory_entry m WHERE NOT EXISTS (SELECT 1 FROM memory_vector v WHERE v.project_id = m.project_id AND v.memory_id = m.id)"); left != c.left {
				t.Fatalf("%d entries without a vector row, want %d", left, c.left)
			}
		})
	}
}

// TestEmbedBacklogParksWhatTheServerFailsOn: entries the server fails on, each time and
// alone, while it embeds other texts are left out of the backlog for a while, so that
// even more of them than one listing holds, at its head, do not keep the entries behind
// them from their vectors; they are tried again later, and in the end kept without a
// vector. A server that is down fails every text alike: nothing is parked, and the whole
// backlog is embedded as soon as it is back.
func TestEmbedBacklogParksWhatTheServerFailsOn(t *testing.T) {
	t.Parallel()
	const listing = 100
	setup := func(t *testing.T, bad int) (*env, *hashEmbedder, *atomic.Pointer[time.Time], func() int) {
		e := newEnv(t)
		h := hashEmbedding(e)
		var clock atomic.Pointer[time.Time]
		now := time.Now()
		clock.Store(&now)
		e.svc.Now = func() time.Time { return *clock.Load() }
		writeBacklog(t, e, h, e.scope("architect", e.one), poisoned(bad)...)
		good := func() int {
			return e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NOT NULL")
		}
		return e, h, &clock, good
	}
	t.Run("more failing entries than a listing holds do not hold back the rest", func(t *testing.T) {
		t.Parallel()
		e, h, clock, good := setup(t, listing+20)
		word := "poisoned"
		h.fail.Store(&word)
		ctx := context.Background()
		var errs []error
		for tick := 0; tick < 5 && good() < 20; tick++ {
			if _, err := e.svc.EmbedPending(ctx, listing); err != nil {
				errs = append(errs, err)
			}
		}
		if g := good(); g != 20 {
			t.Fatalf("%d of the 20 entries behind the failing ones embedded after 5 ticks (errors: %v)", g, errs)
		}
		if len(errs) > 0 {
			t.Fatalf("the server works, yet the ticks failed: %v", errs)
		}
		t.Run("parked entries are tried again, and in the end kept without a vector", func(t *testing.T) {
			left := func() int {
				return e.count("SELECT count(*) FROM memory_entry m WHERE NOT EXISTS (SELECT 1 FROM memory_vector v WHERE v.project_id = m.project_id AND v.memory_id = m.id)")
			}
			calls := h.calls.Load()
			for tick := 0; tick < 100 && left() > 0; tick++ {
				later := clock.Load().Add(2 * time.Hour)
				clock.Store(&later)
				if _, err := e.svc.EmbedPending(ctx, listing); err != nil {
					t.Fatalf("tick %d: %v", tick, err)
				}
			}
			if l := left(); l != 0 {
				t.Fatalf("%d failing entries still without a vector row after 100 ticks two hours apart", l)
			}
			if h.calls.Load() == calls {
				t.Fatal("the parked entries were never tried again")
			}
			if n := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1' AND embedding IS NULL"); n != listing+20 {
				t.Fatalf("%d entries kept without a vector, want %d", n, listing+20)
			}
		})
	})
	t.Run("a listing's worth of entries refused or failed, and nothing else, does not hold back the rest", func(t *testing.T) {
		t.Parallel()
		// Refusals and failures only: nothing was embedded, and the refusal was taken for
		// the server's configuration before the failed ones were parked: the same entries
		// were listed on every tick.
		e, h, _, _ := setup(t, 0)
		ctx := context.Background()
		sc := e.scope("architect", e.one)
		newer := func() int {
			return e.count(`SELECT count(*) FROM memory_vector v JOIN memory_entry m ON m.project_id = v.project_id AND m.id = v.memory_id
				WHERE v.embedding IS NOT NULL AND m.content LIKE 'A newer good note%'`)
		}
		if _, err := e.svc.EmbedPending(ctx, listing); err != nil { // setup's own entries
			t.Fatal(err)
		}
		h.mode.Store(1)
		for i := range listing {
			word := "refusedword"
			if i%2 == 1 {
				word = "failedword"
			}
			if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: fmt.Sprintf("An old %s entry %d", word, i)}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: fmt.Sprintf("A newer good note %d for the team", i)}); err != nil {
				t.Fatal(err)
			}
		}
		h.mode.Store(0)
		refused, failed := "refusedword", "failedword"
		h.refuse.Store(&refused)
		h.fail.Store(&failed)
		for tick := 0; tick < 5 && newer() < 20; tick++ {
			if _, err := e.svc.EmbedPending(ctx, listing); err != nil {
				t.Fatalf("tick %d: %v", tick, err)
			}
		}
		if g := newer(); g != 20 {
			t.Fatalf("%d of the 20 newer entries embedded after 5 ticks", g)
		}
	})
	t.Run("an entry that works when tried again is embedded", func(t *testing.T) {
		t.Parallel()
		e, h, clock, good := setup(t, 3)
		word := "poisoned"
		h.fail.Store(&word)
		ctx := context.Background()
		if _, err := e.svc.EmbedPending(ctx, listing); err != nil || good() != 20 {
			t.Fatalf("the first tick: %v, %d embedded", err, good())
		}
		h.fail.Store(nil)
		if n, err := e.svc.EmbedPending(ctx, listing); n != 0 || err != nil {
			t.Fatalf("a tick before they are due: %d, %v; want them left out", n, err)
		}
		later := clock.Load().Add(2 * time.Hour)
		clock.Store(&later)
		if n, err := e.svc.EmbedPending(ctx, listing); n != 3 || err != nil || good() != 23 {
			t.Fatalf("a tick once they are due: %d, %v, %d embedded; want the 3 embedded", n, err, good())
		}
	})
	t.Run("a parked entry embedded elsewhere or deleted is forgotten", func(t *testing.T) {
		t.Parallel()
		e, h, clock, _ := setup(t, 3)
		word := "poisoned"
		h.fail.Store(&word)
		ctx := context.Background()
		if _, err := e.svc.EmbedPending(ctx, listing); err != nil || e.svc.Parked("hash-v1") != 3 {
			t.Fatalf("the first tick: %v, %d parked; want the 3 failing entries parked", err, e.svc.Parked("hash-v1"))
		}
		// Another replica embeds one; a person deletes another.
		e.exec(`INSERT INTO memory_vector (project_id, memory_id, embedder, embedding)
			SELECT project_id, id, 'hash-v1', NULL FROM memory_entry WHERE content = 'The poisoned design document part 0'`)
		e.exec(`DELETE FROM memory_entry WHERE content = 'The poisoned design document part 1'`)
		later := clock.Load().Add(2 * time.Hour)
		clock.Store(&later)
		if _, err := e.svc.EmbedPending(ctx, listing); err != nil {
			t.Fatal(err)
		}
		// Left parked, they would hold the backlog's listings at their creation for good.
		if n := e.svc.Parked("hash-v1"); n != 1 {
			t.Fatalf("%d entries parked, want the 1 still failing", n)
		}
	})
	t.Run("a server that is down parks nothing", func(t *testing.T) {
		t.Parallel()
		e, h, _, good := setup(t, 0)
		ctx := context.Background()
		h.mode.Store(1)
		if n, err := e.svc.EmbedPending(ctx, listing); n != 0 || err == nil {
			t.Fatalf("a tick while down: %d, %v; want the failure", n, err)
		}
		h.mode.Store(0)
		if n, err := e.svc.EmbedPending(ctx, listing); n != 20 || err != nil || good() != 20 {
			t.Fatalf("the tick after: %d, %v, %d embedded; want all 20 at once", n, err, good())
		}
	})
}

// TestEmbedBacklogListsFromWhereItLeftOff: a tick of the backlog reads on from where the
// last left off, not every entry again, and still embeds an entry that commits late (dated
// by its transaction's start) and, within the hour, one that lost its vector row.
func TestEmbedBacklogListsFromWhereItLeftOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	h := &hashEmbedder{name: "hash-v1"}
	var clock atomic.Pointer[time.Time]
	now := time.Now()
	clock.Store(&now)
	e.svc.Embedder, e.svc.Now = h, func() time.Time { return *clock.Load() }
	acme, arch := e.res.Organisations["acme"].ID, e.res.Agents["acme/architect"].ID
	insert := func(t *testing.T, content string, age time.Duration) uuid.UUID {
		t.Helper()
		id := uuid.Must(uuid.NewV7())
		e.exec(`INSERT INTO memory_entry (project_id, id, org_id, agent_id, content, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			e.one, id, acme, arch, content, clock.Load().Add(-age))
		return id
	}
	hasVector := func(id uuid.UUID) bool {
		return e.count(`SELECT count(*) FROM memory_vector WHERE memory_id = $1 AND embedder = 'hash-v1'`, id) == 1
	}
	old := insert(t, "An entry of last year", 365*24*time.Hour)
	if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 1 || !hasVector(old) {
		t.Fatalf("the first tick: %d, %v", n, err)
	}
	t.Run("an entry committed late, dated minutes back, is embedded", func(t *testing.T) {
		late := insert(t, "An entry whose transaction started ten minutes ago", 10*time.Minute)
		if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 1 || !hasVector(late) {
			t.Fatalf("%d, %v", n, err)
		}
	})
	t.Run("an old entry that lost its vector is embedded at the hourly pass", func(t *testing.T) {
		e.exec(`DELETE FROM memory_vector WHERE memory_id = $1`, old)
		if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 0 {
			t.Fatalf("a tick within the hour read the old entries again: %d, %v", n, err)
		}
		later := clock.Load().Add(time.Hour)
		clock.Store(&later)
		if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 1 || !hasVector(old) {
			t.Fatalf("the hourly pass: %d, %v", n, err)
		}
	})
}

func TestChangingEmbedderReEmbedsAndNeverMixesSpaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	sc := e.scope("architect", e.one)
	// Written with the builtin embedder.
	for _, c := range []string{"The doctor prescribed medicine for the fever", "Backups must be encrypted before upload"} {
		if _, err := e.svc.WriteMemory(ctx, sc, rooms.WriteMemoryInput{Content: c}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count("SELECT count(*) FROM memory_vector WHERE embedder = $1", embed.USEName); n != 2 {
		t.Fatalf("builtin vectors: %d", n)
	}
	// Switch to another embedder: its query is never compared with builtin vectors, so
	// until re-embedding the search is lexical (no relevance) — and still answers.
	h := &hashEmbedder{name: "hash-v1"}
	e.svc.Embedder = h
	res, err := e.svc.ReadMemory(ctx, sc, rooms.ReadMemoryInput{Query: "encrypted backups"})
	if err != nil || len(res.Entries) != 1 || res.Entries[0].Relevance != nil {
		t.Fatalf("read before re-embedding: %+v %v", res, err)
	}
	if n, err := e.svc.EmbedPending(ctx, 100); err != nil || n != 2 {
		t.Fatalf("re-embedding: %d %v", n, err)
	}
	if n := e.count("SELECT count(*) FROM memory_vector WHERE embedder = 'hash-v1'"); n != 2 {
		t.Fatalf("hash vectors: %d", n)
	}
	res, err = e.svc.ReadMemory(ctx, sc, rooms.ReadMemoryInput{Query: "backups must be encrypted"})
	if err != nil || len(res.Entries) == 0 || res.Entries[0].Relevance == nil {
		t.Fatalf("read after re-embedding: %+v %v", res, err)
	}
	// Both spaces are kept (switching back needs no work) and nothing compares them.
	if n := e.count("SELECT count(*) FROM memory_vector"); n != 4 {
		t.Fatalf("vectors: %d", n)
	}
}

// TestLexicalFunctionAppliesTheTenant: rr_memory_lexical runs as the table owner, so it
// must apply the tenant itself — from the transaction's settings, never its arguments.
func TestLexicalFunctionAppliesTheTenant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.call("architect", e.one, "write_memory", map[string]any{"content": "Quarterly zebra audit shared"}).obj(t)
	e.call("architect", e.one, "write_memory", map[string]any{"content": "Quarterly zebra audit private", "is_private": true}).obj(t)
	count := func(tn pg.Tenant) int {
		var n int
		err := e.db.InTenant(context.Background(), tn, func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), "SELECT count(*) FROM rr_memory_lexical('quarterly zebra audit', NULL, NULL, '{}', 50)").Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	host, guest := e.scope("architect", e.one), e.scope("peter", e.one)
	if n := count(host.Tenant()); n != 2 {
		t.Fatalf("host sees %d entries, want 2", n)
	}
	if n := count(guest.Tenant()); n != 1 {
		t.Fatalf("guest sees %d entries, want 1 (the private one is the host's)", n)
	}
	if n := count(pg.Tenant{}); n != 0 {
		t.Fatalf("no tenant sees %d entries", n)
	}
	if n := count(pg.Tenant{ProjectID: e.one}); n != 0 {
		t.Fatalf("a project without an organisation sees %d entries", n)
	}
	if n := count(e.scope("peter", e.two).Tenant()); n != 0 {
		t.Fatalf("room two sees %d of room one's entries", n)
	}
}

// TestDecisionCategoryMarksADecision: the contract's example writes category "decision"
// without is_decision and reads the entry back with is_decision true.
func TestDecisionCategoryMarksADecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.call("architect", e.one, "write_memory", map[string]any{"content": "Decision: escalations time out at 72h and expire, not auto-approve.", "tags": []string{"architecture"}, "category": "Decision"})
	r := e.call("architect", e.one, "read_memory", map[string]any{"query": "escalations time out"}).obj(t)
	entries, _ := r["entries"].([]any)
	if len(entries) != 1 || entries[0].(map[string]any)["is_decision"] != true {
		t.Fatalf("category decision did not mark a decision: %s", fmtJSON(r))
	}
}

// TestReadMemoryIsBoundedByBytes: 50 entries of 20,000 control characters (six bytes each
// once written) made a 7 MB read_memory answer. An answer holds at most
// rooms.MaxMemoryBytes of content as JSON writes it, the best-ranked first, and says so
// with truncated.
func TestReadMemoryIsBoundedByBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	filler := strings.Repeat("\x01", rooms.MaxMemoryContent-100)
	n := rooms.MaxMemoryBytes/text.JSONSize(filler) + 3
	for i := range n {
		if r := e.call("architect", e.one, "write_memory", map[string]any{"content": fmt.Sprintf("zebra crossing %d %s", i, filler)}); r.IsError {
			t.Fatal(r.Text)
		}
	}
	got := e.call("architect", e.one, "read_memory", map[string]any{"query": "zebra crossing", "limit": rooms.MaxMemoryLimit}).obj(t)
	entries := got["entries"].([]any)
	t.Run("the answer holds at most MaxMemoryBytes", func(t *testing.T) {
		size := 0
		for _, x := range entries {
			size += text.JSONSize(str(x.(map[string]any), "content"))
		}
		if len(entries) == 0 || len(entries) >= n || size > rooms.MaxMemoryBytes || got["found"] != float64(len(entries)) {
			t.Fatalf("%d of %d entries (found %v), %d bytes of content", len(entries), n, got["found"], size)
		}
	})
	t.Run("the cut answer says truncated", func(t *testing.T) {
		if got["truncated"] != true {
			t.Fatalf("%d of %d entries and no truncated: %v", len(entries), n, got["truncated"])
		}
	})
	t.Run("a whole answer has no truncated", func(t *testing.T) {
		few := e.call("architect", e.one, "read_memory", map[string]any{"query": "zebra crossing", "limit": 2}).obj(t)
		if _, ok := few["truncated"]; ok || few["found"] != float64(2) {
			t.Fatalf("two entries, which fit: found %v, truncated %v", few["found"], few["truncated"])
		}
	})
}
