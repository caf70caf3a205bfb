package rooms_test

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// The fixture: room "one" hosted by Acme with four guest companies, one per agreement
// state, and room "two" hosted by Initech where Acme's architect is a guest.
//
//go:embed testdata/fixture.yaml
var fixture string

type env struct {
	t      testing.TB
	b      *testfix.Bundle
	db     *pg.DB
	url    string // the test database's URL, for a connection of a test's own (LISTEN)
	h      http.Handler
	srv    *httptest.Server
	res    admin.Result
	svc    *rooms.Service // a second service on the same database (EmbedPending, direct calls)
	one    uuid.UUID
	two    uuid.UUID
	keys   map[string]string // agent slug → key
	nextID int
}

func sharedDetector(t testing.TB) *secrets.Detector { return testfix.Detector(t) }

func newEnv(t testing.TB) *env {
	return newEnvWith(t, func(*config.Config) {})
}

func newEnvWith(t testing.TB, tweak func(*config.Config)) *env {
	t.Helper()
	b := testfix.Seed(t, fixture)
	d, url, res := b.DB, b.URL, b.Result
	// The embedder gets far longer than in production: tests of semantic search assert what
	// the search finds, and a -race build on a busy machine can take seconds to embed. Tests
	// of the deferral set a short wait themselves.
	cfg := config.Config{DatabaseURL: url, MaxBodyBytes: 4 << 20, StatementTimeout: testfix.StatementTimeout(t), SigningKey: "test-signing-key-0123456789abcdef",
		AttachmentMaxBytes: 25 << 20, EmbedWait: 30 * time.Second}
	tweak(&cfg)
	e := &env{t: t, b: b, db: d, url: url, res: res, keys: map[string]string{}}
	e.srv = httptest.NewUnstartedServer(nil)
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), d, e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.h = a.Handler()
	e.srv.Config.Handler = e.h
	emb, _ := embed.New(embed.Config{Kind: cfg.Embedder})
	e.svc = rooms.New(rooms.Deps{DB: d, Resolver: b.Resolver, Embedder: emb,
		Secrets: sharedDetector(t), SigningKey: []byte(cfg.SigningKey), PublicURL: e.srv.URL, EmbedTimeout: cfg.EmbedWait})
	e.one, e.two = res.Projects["one"].ID, res.Projects["two"].ID
	for k, v := range res.Agents {
		e.keys[k[strings.Index(k, "/")+1:]] = v.Key
	}
	return e
}

// callResult is a rooms tool answer: the text block and isError.
type callResult struct {
	Text    string
	IsError bool
}

func (r callResult) obj(t testing.TB) map[string]any {
	t.Helper()
	if r.IsError {
		t.Fatalf("tool error: %s", r.Text)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Text), &m); err != nil {
		t.Fatalf("result is not a JSON object: %v: %s", err, r.Text)
	}
	return m
}

// rpc posts one JSON-RPC request and returns the HTTP status and decoded body.
func (e *env) rpc(path, key, method string, params any) (int, map[string]any) {
	e.t.Helper()
	e.nextID++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": e.nextID, "method": method, "params": params})
	w := e.post(path, key, "application/json", body)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		e.t.Fatalf("%s %s: not JSON (%d): %s", method, path, w.Code, w.Body.String())
	}
	return w.Code, m
}

// post serves one POST as the agent whose key is key ("": none), with the Content-Type
// ctype ("": none).
func (e *env) post(path, key, ctype string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if key != "" {
		req.Header.Set("X-Agent-Key", key)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	return w
}

// postRoute is post for the rooms HTTP routes: the status and the answer's JSON object
// (nil when the body is not one, which the caller's checks then report).
func (e *env) postRoute(path, key, ctype string, body []byte) (int, map[string]any) {
	w := e.post(path, key, ctype, body)
	var m map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	return w.Code, m
}

// call runs a tool on room's per-room address as agent (a slug of the fixture).
func (e *env) call(agent string, room uuid.UUID, tool string, args map[string]any) callResult {
	e.t.Helper()
	return e.callPath("/api/mcp/p/"+room.String(), e.keys[agent], tool, args)
}

// callAll runs a tool on the all-rooms address.
func (e *env) callAll(agent, tool string, args map[string]any) callResult {
	e.t.Helper()
	return e.callPath("/api/mcp", e.keys[agent], tool, args)
}

func (e *env) callPath(path, key, tool string, args map[string]any) callResult {
	e.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	code, m := e.rpc(path, key, "tools/call", map[string]any{"name": tool, "arguments": args})
	if code != http.StatusOK {
		e.t.Fatalf("%s on %s: HTTP %d: %v", tool, path, code, m)
	}
	res, ok := m["result"].(map[string]any)
	if !ok {
		e.t.Fatalf("%s: no result: %v", tool, m)
	}
	content := res["content"].([]any)
	if len(content) != 1 {
		e.t.Fatalf("%s: want one content block, got %v", tool, content)
	}
	if _, has := res["structuredContent"]; has {
		e.t.Fatalf("%s: rooms results carry no structuredContent", tool)
	}
	return callResult{Text: content[0].(map[string]any)["text"].(string), IsError: res["isError"].(bool)}
}

func wantError(t testing.TB, r callResult, text string) {
	t.Helper()
	if !r.IsError || r.Text != "Error: "+text {
		t.Fatalf("want %q, got isError=%v %q", "Error: "+text, r.IsError, r.Text)
	}
}

func wantErrorPrefix(t testing.TB, r callResult, prefix string) {
	t.Helper()
	if !r.IsError || !strings.HasPrefix(r.Text, "Error: "+prefix) {
		t.Fatalf("want an error starting %q, got isError=%v %q", "Error: "+prefix, r.IsError, r.Text)
	}
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	e.b.Exec(e.t, sql, args...)
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	return e.b.Count(e.t, sql, args...)
}

// scope resolves an agent's scope in a room (for direct service calls).
func (e *env) scope(agent string, room uuid.UUID) tenancy.Scope {
	e.t.Helper()
	sc, err := e.svc.Resolver.RoomByKey(context.Background(), e.keys[agent], room)
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func fmtJSON(v any) string { b, _ := json.Marshal(v); return fmt.Sprint(string(b)) }

// sendTask has the architect send peter a task of goal in room one, as the tool does, and
// returns its id.
func (e *env) sendTask(t testing.TB, goal string) string {
	t.Helper()
	return str(e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": goal}).obj(t), "task_id")
}

// insertTask stores a task in room one directly (even where an agreement would refuse
// send_task), for tests of the recipient's side.
func (e *env) insertTask(from, to, goal string) uuid.UUID {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7())
	e.exec(`INSERT INTO room_task (project_id, id, from_agent_id, from_org_id, to_member_id, to_agent_id, to_org_id, goal)
SELECT $1, $2, fa.id, fa.org_id, m.id, m.agent_id, m.org_id, $5
FROM agent fa, membership m WHERE fa.slug = $3 AND m.project_id = $1 AND m.part = $4`, e.one, id, from, to, goal)
	return id
}

func uuidOf(t testing.TB, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
