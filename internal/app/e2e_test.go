package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

// connectSDK connects go-sdk's client. version "" takes the client's default path, which
// probes server/discover (2026-07-28) first; a handshake version uses initialize.
func connectSDK(t *testing.T, endpoint, key, version string) (*sdk.ClientSession, error) {
	t.Helper()
	h := http.Header{}
	setCredential(h, key)
	return testfix.ConnectSDK(t, endpoint, h, version)
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if a := tl.Annotations; a == nil || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint == nil {
			t.Errorf("%s: annotations must state every hint with openWorldHint false: %+v", tl.Name, a)
		}
	}
	return names
}

func callJSON(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, text := testfix.CallTool(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s failed: %s", name, text)
	}
	var obj map[string]any
	if b, err := json.Marshal(res.StructuredContent); err == nil && res.StructuredContent != nil {
		_ = json.Unmarshal(b, &obj)
	}
	return obj, text
}

// TestGoSDKClientDrivesEveryEndpoint connects the real go-sdk client to a server started by
// app.Run, over HTTP, in both protocol eras, and uses the foundation's tools.
func TestGoSDKClientDrivesEveryEndpoint(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, version := range []string{"", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		t.Run("version="+version, func(t *testing.T) {
			cs, err := connectSDK(t, s.threadsURL("escalations", "architect"), s.key("acme/architect"), version)
			if err != nil {
				t.Fatalf("connect threads: %v", err)
			}
			if got := cs.InitializeResult().ServerInfo.Name; got != "relayroom-threads" {
				t.Errorf("serverInfo.name %q", got)
			}
			if names := toolNames(t, cs); !slices.Contains(names, "whoami") || !slices.Contains(names, "roster") {
				t.Fatalf("threads tools %v", names)
			}
			who, text := callJSON(t, cs, "whoami", nil)
			if who["part"] != "architect" || who["project"] != "Escalations" || who["isMain"] != true {
				t.Fatalf("whoami: %v", who)
			}
			var mirror map[string]any
			if err := json.Unmarshal([]byte(text), &mirror); err != nil || mirror["part"] != "architect" {
				t.Fatalf("whoami text mirror: %q", text)
			}
			roster, _ := callJSON(t, cs, "roster", nil)
			parts, _ := roster["parts"].([]any)
			if len(parts) != 3 {
				t.Fatalf("roster: %v", roster)
			}
			for _, p := range parts {
				e := p.(map[string]any)
				if (e["part"] == "architect") != (e["you"] == true) {
					t.Errorf("roster marks the wrong part as you: %v", e)
				}
				if e["part"] == "architect" && e["online"] != true {
					t.Errorf("the caller is not online in its own roster: %v", e)
				}
			}

			guest, err := connectSDK(t, s.base+"/api/mcp", s.key("globex/qa-lead"), version)
			if err != nil {
				t.Fatalf("connect all rooms: %v", err)
			}
			if names := toolNames(t, guest); !slices.Contains(names, "list_rooms") {
				t.Fatalf("all-rooms tools %v", names)
			}
			_, text = callJSON(t, guest, "list_rooms", nil)
			var rooms struct {
				Rooms []struct{ ID, Name, HostCompany, Role string } `json:"rooms"`
				Count int                                            `json:"count"`
			}
			if err := json.Unmarshal([]byte(text), &rooms); err != nil {
				t.Fatal(err)
			}
			if rooms.Count != 1 || rooms.Rooms[0].ID != s.res.Projects["escalations"].ID.String() || rooms.Rooms[0].Role != "guest" {
				t.Fatalf("list_rooms for the guest: %s", text)
			}
			if !strings.Contains(text, `"host_company":"Acme Corp"`) {
				t.Fatalf("list_rooms must name the host company: %s", text)
			}

			room, err := connectSDK(t, fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID), s.key("acme/backend"), version)
			if err != nil {
				t.Fatalf("connect room: %v", err)
			}
			toolNames(t, room)

			if _, err := connectSDK(t, s.threadsURL("escalations", "architect"), "", version); err == nil {
				t.Fatal("the client connected to the threads endpoint without a key")
			}
			if _, err := connectSDK(t, s.base+"/desk/mcp", "", version); err == nil {
				t.Fatal("the client connected to the desk endpoint without a credential")
			}
		})
	}
}

var resourceMetadata = regexp.MustCompile(`^Bearer resource_metadata="([^"]+)", scope="([^"]+)"(, error="invalid_token")?$`)

// TestMissingCredentialsGet401WithTheEndpointsOwnMetadata checks every endpoint's 401: a
// JSON-RPC -32001 body and a WWW-Authenticate header naming a metadata document that is
// served where it says and whose resource is the endpoint's URL byte for byte.
func TestMissingCredentialsGet401WithTheEndpointsOwnMetadata(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	cases := []struct{ url, key, scope string }{
		{s.threadsURL("escalations", "backend"), "", "threads"},
		{s.threadsURL("escalations", "backend"), "sk-qyt-not-a-real-key", "threads"},
		{room, "", "rooms"},
		{s.base + "/api/mcp", "", "rooms"},
		{s.base + "/desk/mcp", "", "conversations:read inboxes:read saved_replies:read reports:read notes:write"},
	}
	for _, c := range cases {
		status, h, body := post(t, c.url, c.key, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
		if status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401 (%s)", c.url, status, body)
		}
		var rpc struct {
			ID    int                `json:"id"`
			Error struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil || rpc.Error.Code != -32001 || rpc.ID != 7 {
			t.Fatalf("%s: body %s", c.url, body)
		}
		m := resourceMetadata.FindStringSubmatch(h.Get("WWW-Authenticate"))
		if m == nil || m[2] != c.scope || m[3] != "" {
			t.Fatalf("%s: WWW-Authenticate %q (no bearer credential was sent: no error)", c.url, h.Get("WWW-Authenticate"))
		}
		u, _ := url.Parse(c.url)
		// The resource is the endpoint URL without query (the threads part is chosen at consent).
		if want := s.base + "/.well-known/oauth-protected-resource" + u.EscapedPath(); m[1] != want {
			t.Fatalf("metadata URL %q, want %q", m[1], want)
		}
		status, doc := testfix.Get(t, http.DefaultClient, m[1])
		var md struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
		}
		if status != 200 || json.Unmarshal([]byte(doc), &md) != nil {
			t.Fatalf("metadata %s: %d %s", m[1], status, doc)
		}
		if want := strings.SplitN(c.url, "?", 2)[0]; md.Resource != want || len(md.AuthorizationServers) != 1 || strings.Join(md.Scopes, " ") != c.scope {
			t.Fatalf("metadata for %s: %s", c.url, doc)
		}
	}
	// A member of another room is refused on the per-room address with 403 and the spec's text.
	status, h, body := post(t, room, s.key("initech/peter"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusForbidden || !strings.Contains(body, "Agent is not a participant in this room") || !strings.Contains(body, "-32001") {
		t.Fatalf("non-member: %d %s", status, body)
	}
	if h.Get("WWW-Authenticate") != "" {
		t.Errorf("a 403 should not ask to sign in again: %q", h.Get("WWW-Authenticate"))
	}
	// A part's URL opened with another agent's key is refused: a part only acts as itself.
	status, _, body = post(t, s.threadsURL("escalations", "architect"), s.key("acme/backend"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusForbidden {
		t.Fatalf("impersonation: %d %s", status, body)
	}
	// Another project's connect code does not reach this project's parts.
	other := s.threadsURL("other", "architect")
	status, _, body = post(t, other, s.key("acme/architect"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != http.StatusForbidden {
		t.Fatalf("another project's connect code: %d %s", status, body)
	}
	// Unknown metadata paths are not invented.
	if status, _ := testfix.Get(t, http.DefaultClient, s.base+"/.well-known/oauth-protected-resource/nope"); status != 404 {
		t.Fatalf("metadata for an unknown resource: %d", status)
	}
}

// TestOperationsEndpointsAndLogs checks health, readiness, metrics, and that logs carry a
// request id on every request line and never a credential.
func TestOperationsEndpointsAndLogs(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "metrics and logs are each replica's own: a call counted by one replica is not in the next scrape, which reaches another")
	s := startServer(t)
	if status, body := testfix.Get(t, http.DefaultClient, s.base+"/healthz"); status != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz: %d %s", status, body)
	}
	if status, body := testfix.Get(t, http.DefaultClient, s.base+"/readyz"); status != 200 || !strings.Contains(body, `"current"`) {
		t.Fatalf("readyz: %d %s", status, body)
	}
	key, threads := s.key("acme/architect"), s.threadsURL("escalations", "architect")
	status, _, body := post(t, threads, key, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)
	if status != 200 || !strings.Contains(body, `"part\":\"architect\"`) && !strings.Contains(body, `"part":"architect"`) {
		t.Fatalf("whoami over raw HTTP: %d %s", status, body)
	}
	post(t, threads, key, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{"x":1}}}`)
	post(t, threads, testfix.Mistype(key), `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	// Methods of the caller's own invention are counted as "other", not one series each.
	for _, m := range []string{"M1X2Y3", "M4X5Y6"} {
		req, err := http.NewRequest(m, s.base+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		testfix.Do(t, http.DefaultClient, req)
	}

	status, metrics := testfix.Get(t, http.DefaultClient, s.base+"/metrics")
	if status != 200 {
		t.Fatalf("metrics: %d", status)
	}
	if strings.Contains(metrics, "M1X2Y3") || !strings.Contains(metrics, `method="other"`) {
		t.Fatal("a request's invented method became a metric label of its own")
	}
	testfix.CheckContains(t, "metrics", metrics,
		`relayroom_tool_calls_total{endpoint="threads",outcome="ok",tool="whoami"} 1`,
		`relayroom_tool_calls_total{endpoint="threads",outcome="invalid",tool="whoami"} 1`,
		`relayroom_tool_call_duration_seconds_bucket{endpoint="threads",tool="whoami"`,
		`relayroom_http_requests_total{method="POST",route="/mcp/:code",status="401"} 1`,
		`relayroom_db_pool_connections{pool="app",state="idle"}`,
		`relayroom_db_pool_max_connections{pool="app"} 8`,
	)

	logs := s.logs.String()
	code := s.res.Projects["escalations"].ConnectCode
	for _, secret := range []string{key, code, key[7:], code[7:]} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a credential reached the logs")
		}
	}
	requests := 0
	tools := map[string]bool{} // outcome: the line named the caller and its client address
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if line["msg"] == "request" {
			requests++
			// Who called which tool, from where, with what outcome: a tool's failure is
			// answered with HTTP 200, so the status alone hides it.
			if tool, _ := line["tool"].(string); tool == "whoami" {
				outcome, _ := line["outcome"].(string)
				tools[outcome] = line["client"] == "127.0.0.1" && strings.HasPrefix(fmt.Sprint(line["caller"]), "agent:") && line["org"] != nil
			}
			if id, _ := line["request_id"].(string); len(id) < 8 {
				t.Errorf("request log line without a request id: %v", line)
			}
			if p, _ := line["path"].(string); strings.HasPrefix(p, "/mcp/") && !strings.Contains(p, "qyt_cc_[redacted]") {
				t.Errorf("connect code not masked in %q", p)
			}
		}
	}
	if requests < 4 { // readyz and the three calls (healthz and metrics are not logged)
		t.Fatalf("only %d request lines logged", requests)
	}
	if !tools["ok"] || !tools["invalid"] {
		t.Fatalf("the tool calls' request lines do not name the caller, client, tool and outcome: %v", tools)
	}
}

// TestReadinessReportsTheListeners: a replica whose LISTEN connection is lost still
// serves every request, but its long polls and live pages hear of news late; readiness
// and the metrics say which listener is reconnecting, and when it is back.
func TestReadinessReportsTheListeners(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "listeners are each replica's own")
	s := startServer(t)
	ready := func() (int, map[string]string) {
		t.Helper()
		status, body := testfix.Get(t, http.DefaultClient, s.base+"/readyz")
		var r struct{ Listeners map[string]string }
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("readyz: %d %s", status, body)
		}
		return status, r.Listeners
	}
	// until polls readiness until the wake listener is in state (or fails after 30 s).
	until := func(state string, every time.Duration) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(every) {
			status, l := ready()
			if status != http.StatusOK {
				t.Fatalf("readyz: %d with listeners %v: a listener must not make the replica unready", status, l)
			}
			if l["wake"] == state {
				return
			}
		}
		t.Fatalf("the wake listener never said %q", state)
	}

	t.Run("both listeners are listening once started", func(t *testing.T) {
		until("listening", 50*time.Millisecond)
		if _, l := ready(); len(l) != 2 || l["dashboard"] == "" {
			t.Fatalf("listeners: %v", l)
		}
		_, metrics := testfix.Get(t, http.DefaultClient, s.base+"/metrics")
		testfix.CheckContains(t, "metrics", metrics, `relayroom_listener_up{listener="wake"} 1`)
	})
	t.Run("a lost connection is reported, still ready, until it is back", func(t *testing.T) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE '%' || $1`, wake.ListenerName).Scan(&n); err != nil || n != 1 {
			t.Fatalf("terminated %d wake listeners: %v", n, err)
		}
		// The listener waits half a second before it reconnects: polled every few
		// milliseconds, readiness shows the gap.
		until("reconnecting", 5*time.Millisecond)
		until("listening", 50*time.Millisecond)
	})
}

// TestMetricsOnTheirOwnListener: with RELAYROOM_METRICS_ADDR the operator scrapes an
// address clients cannot reach, and the public listener has no /metrics to guard.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the metrics listener is each replica's own")
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) { c.MetricsAddr = "127.0.0.1:0" }})
	var ops string
	sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
	for sc.Scan() {
		var line struct{ Msg, Addr string }
		if err := json.Unmarshal(sc.Bytes(), &line); err == nil && line.Msg == "serving metrics" {
			ops = "http://" + line.Addr
		}
	}
	if ops == "" {
		t.Fatal(`no "serving metrics" line with the listener's address`)
	}
	post(t, s.threadsURL("escalations", "architect"), s.key("acme/architect"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`)

	t.Run("the metrics leave the public listener", func(t *testing.T) {
		if status, _ := testfix.Get(t, http.DefaultClient, s.base+"/metrics"); status != http.StatusNotFound {
			t.Fatalf("public /metrics: %d, want 404", status)
		}
	})
	t.Run("the metrics listener counts the public listener's calls", func(t *testing.T) {
		status, body := testfix.Get(t, http.DefaultClient, ops+"/metrics")
		if status != http.StatusOK {
			t.Fatalf("/metrics: %d", status)
		}
		testfix.CheckContains(t, "metrics", body, `relayroom_tool_calls_total{endpoint="threads",outcome="ok",tool="whoami"} 1`)
	})
	t.Run("health and readiness answer there too", func(t *testing.T) {
		for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"current"`} {
			if status, body := testfix.Get(t, http.DefaultClient, ops+path); status != http.StatusOK || !strings.Contains(body, want) {
				t.Fatalf("%s: %d %s", path, status, body)
			}
		}
	})
	t.Run("nothing else does", func(t *testing.T) {
		for _, path := range []string{"/", "/mcp/threads", "/app/"} {
			if status, _ := testfix.Get(t, http.DefaultClient, ops+path); status != http.StatusNotFound {
				t.Fatalf("%s on the metrics listener: %d, want 404", path, status)
			}
		}
	})
	t.Run("the public listener keeps its health routes", func(t *testing.T) {
		if status, _ := testfix.Get(t, http.DefaultClient, s.base+"/readyz"); status != http.StatusOK {
			t.Fatalf("public /readyz: %d", status)
		}
	})
	t.Run("a metrics address taken stops the start, naming the setting", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		cfg := testConfig(t, s.dbURL)
		cfg.MetricsAddr = taken.Addr().String()
		// Bounded: a bind that succeeded would serve until the context ends.
		ctx, cancel := context.WithTimeout(context.Background(), serverStartBound)
		defer cancel()
		err = app.Run(ctx, cfg, app.NewLogger(io.Discard, "error"), nil)
		if err == nil || !strings.Contains(err.Error(), "RELAYROOM_METRICS_ADDR") {
			t.Fatalf("want a start error naming RELAYROOM_METRICS_ADDR, got %v", err)
		}
	})
}

// TestGracefulShutdownFinishesInFlightCalls starts a request, begins shutdown while its
// body is still arriving, then completes it: the call must be answered in full, and Run
// must return cleanly.
func TestGracefulShutdownFinishesInFlightCalls(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	u, _ := url.Parse(s.threadsURL("escalations", "architect"))
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Agent-Key: %s\r\nContent-Length: %d\r\n\r\n",
		u.RequestURI(), u.Host, s.key("acme/architect"), len(body))
	if _, err := conn.Write([]byte(head + body[:10])); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server has the request line: it is in flight
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("the server stopped before its in-flight call finished: %v", err)
	default:
	}
	if _, err := conn.Write([]byte(body[10:])); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight call lost: %v", err)
	}
	var out strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&out)
	if resp.StatusCode != 200 || !strings.Contains(out.String(), "architect") {
		t.Fatalf("in-flight call: %d %s", resp.StatusCode, out.String())
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run after shutdown: %v", err)
	}
	if _, err := http.Get(s.base + "/healthz"); err == nil {
		t.Fatal("the server still accepts connections after shutdown")
	}
}

// TestAStopIsAnnouncedBeforeItRefuses: with RELAYROOM_SHUTDOWN_DELAY, a stopping server
// answers /readyz 503 and still serves calls for the delay, so a balancer takes it out
// before connections are refused; and a drain past its timeout cuts what is open and
// still ends cleanly (it returned an error, which exited 1).
func TestAStopIsAnnouncedBeforeItRefuses(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the test stops one replica and asks that replica")
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) {
		// Long enough that a loaded machine still asks within it.
		c.ShutdownDelay = 10 * time.Second
		c.ShutdownTimeout = 500 * time.Millisecond
	}})
	// An authenticated call whose body never comes holds the drain past its timeout.
	key, threads := s.key("acme/architect"), s.threadsURL("escalations", "architect")
	u, _ := url.Parse(threads)
	held, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := fmt.Fprintf(held, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Agent-Key: %s\r\nContent-Length: 100\r\n\r\n{",
		u.RequestURI(), u.Host, key); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server has the request: it is in flight
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	deadline := time.Now().Add(8 * time.Second)
	for {
		status, body := testfix.Get(t, http.DefaultClient, s.base+"/readyz")
		if status == http.StatusServiceUnavailable && strings.Contains(body, "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never said it was shutting down: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, _, body := post(t, threads, key, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`); status != 200 || !strings.Contains(body, "architect") {
		t.Fatalf("a call while stopping: %d %s", status, body)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("a drain past its timeout ended with an error: %v", err)
	}
	if !strings.Contains(s.logs.String(), "shutdown timeout reached") {
		t.Fatal("the cut connections were not logged")
	}
}

// TestTheStartSaysWhatWouldFailLater: a server that does not migrate, on a schema that is
// not its build's, answered /readyz 503 without a word at start; pools larger than the
// database's max_connections failed only once they filled.
func TestTheStartSaysWhatWouldFailLater(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the warnings are one replica's log")
	s := startServerOpts(t, serverOptions{
		before: func(ctx context.Context, d *pg.DB, _ admin.Result) {
			if err := d.Operator(ctx, func(tx *pg.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE schema_migrations SET version = version - 1")
				return err
			}); err != nil {
				t.Fatal(err)
			}
		},
		tune: func(c *config.Config) { c.MaxConns = 100000 },
	})
	logs := s.logs.String()
	for _, want := range []string{`"msg":"the schema is not this build's`, `"msg":"the pools may open more connections than the database allows"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %s line in:\n%s", want, logs)
		}
	}
	if status, body := testfix.Get(t, http.DefaultClient, s.base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Fatalf("readyz: %d %s", status, body)
	}
}

// TestPlainGETDescribesTheRoomEndpoint: opening a room's connection string in a browser
// tells whether it is right, without a credential, as the rooms spec describes.
func TestPlainGETDescribesTheRoomEndpoint(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	id := s.res.Projects["escalations"].ID.String()
	status, body := testfix.Get(t, http.DefaultClient, s.base+"/api/mcp/p/"+id)
	var d struct {
		Status    string   `json:"status"`
		Service   string   `json:"service"`
		ProjectID string   `json:"project_id"`
		Methods   []string `json:"methods"`
		Tools     []string `json:"tools"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("GET: %d %s", status, body)
	}
	want := []string{"read_memory", "write_memory", "get_inbox", "send_task", "respond_to_task", "post_message", "get_messages"}
	if d.Status != "ok" || d.Service != "quayutec-mcp" || d.ProjectID != id || !slices.Equal(sortedCopy(d.Tools), sortedCopy(want)) ||
		!slices.Contains(d.Methods, "tools/call") {
		t.Fatalf("description: %s", body)
	}
	req, err := http.NewRequest(http.MethodGet, s.base+"/api/mcp/p/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET for an event stream: %d, want 405", resp.StatusCode)
	}
}

// TestPlainGETOfANonRoomAnswersLikeAnUnseenRoom: the description never says "ok" for an
// address that is not a room; such an address answers exactly like a room the caller
// cannot see (an agent's GET of a room it is not in), so a GET tells nothing more than a
// POST would. A credentialed GET of a room the agent is in still gets the description.
func TestPlainGETOfANonRoomAnswersLikeAnUnseenRoom(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	room := s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String()
	getAs := func(t *testing.T, url, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("X-Agent-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	unseenStatus, unseenBody := getAs(t, room, s.key("initech/peter"))
	t.Run("an agent's GET of a room it is not in is refused as its POST is", func(t *testing.T) {
		if unseenStatus != http.StatusForbidden || !strings.Contains(unseenBody, "Agent is not a participant in this room") || strings.Contains(unseenBody, `"ok"`) {
			t.Fatalf("GET of an unseen room: %d %s", unseenStatus, unseenBody)
		}
	})
	for _, c := range []struct{ name, key string }{{"without a credential", ""}, {"with a member's key", s.key("initech/peter")}} {
		t.Run("an address that is not a room, "+c.name+", answers the same", func(t *testing.T) {
			status, body := getAs(t, s.base+"/api/mcp/p/not-a-room", c.key)
			if status != unseenStatus || body != unseenBody {
				t.Fatalf("GET of a non-room: %d %s, want %d %s", status, body, unseenStatus, unseenBody)
			}
		})
	}
	t.Run("a member's GET of its room still describes it", func(t *testing.T) {
		status, body := getAs(t, room, s.key("acme/backend"))
		if status != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
			t.Fatalf("member's GET: %d %s", status, body)
		}
	})
}

// TestPlainGETOfAMistypedThreadsURL: the threads description said "ok" for a connect
// code whose checksum fails (mistyped) and for any ?part=, NUL included, while a POST to
// the same URL is refused: the description is how a person checks the URL given to them.
func TestPlainGETOfAMistypedThreadsURL(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	good := s.threadsURL("escalations", "architect")
	code := good[strings.Index(good, "/mcp/")+len("/mcp/") : strings.Index(good, "?")]
	for _, c := range []struct {
		name, url string
		status    int
		says      string
	}{
		{"a code whose checksum fails", s.base + "/mcp/" + testfix.Mistype(code) + "?part=architect", http.StatusUnauthorized, "unknown connect code"},
		{"a ?part= with a NUL", s.base + "/mcp/" + code + "?part=a%00b", http.StatusBadRequest, "NUL"},
		{"no ?part=", s.base + "/mcp/" + code, http.StatusForbidden, "the URL needs ?part="},
		{"the right URL", good, http.StatusOK, `"status":"ok"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := testfix.Get(t, http.DefaultClient, c.url)
			if status != c.status || !strings.Contains(body, c.says) || (c.status != http.StatusOK && strings.Contains(body, `"ok"`)) {
				t.Fatalf("%d %s", status, body)
			}
		})
	}
}
