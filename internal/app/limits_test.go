package app_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// generous bounds every wait of these tests: a limit that does not hold makes the test
// wait this long and fail, never hang. Nothing is asserted about shorter durations.
const generous = 60 * time.Second

// rawRequest writes head and body on a fresh connection to the server and returns the
// connection, for clients that misbehave on purpose.
func rawRequest(t *testing.T, base, head, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatal(err)
	}
	return conn
}

func postHead(path, key string, contentLength int) string {
	h := "POST " + path + " HTTP/1.1\r\nHost: relay.test\r\nContent-Type: application/json\r\n"
	if key != "" {
		h += "X-Agent-Key: " + key + "\r\n"
	}
	if contentLength >= 0 {
		h += fmt.Sprintf("Content-Length: %d\r\n", contentLength)
	} else {
		h += "Transfer-Encoding: chunked\r\n"
	}
	return h + "\r\n"
}

// readUntilClosed reads the server's answer (if any) until it closes the connection. It
// fails when the server holds the connection open past the generous bound.
func readUntilClosed(t *testing.T, conn net.Conn) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(generous)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open (read so far: %q)", got)
	}
	return string(got)
}

func pathOf(u string) string {
	i := strings.Index(strings.TrimPrefix(u, "http://"), "/")
	return strings.TrimPrefix(u, "http://")[i:]
}

// TestSlowClientsAreCut checks that a client who never finishes its request loses its
// connection after the server's timeouts, whatever it has sent.
func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the client's connection is HAProxy's, which cuts a slow client with its own timeout http-request, not the service's read timeouts this test sets")
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) {
		c.ReadHeaderTimeout, c.ReadTimeout = 500*time.Millisecond, time.Second
	}})
	threads := pathOf(s.threadsURL("escalations", "architect"))
	key := s.key("acme/architect")

	t.Run("headers never finished", func(t *testing.T) {
		conn := rawRequest(t, s.base, "POST /api/mcp HTTP/1.1\r\nHost: relay.test\r\n", "")
		readUntilClosed(t, conn)
	})
	t.Run("authenticated body never finished", func(t *testing.T) {
		conn := rawRequest(t, s.base, postHead(threads, key, 100), "{")
		readUntilClosed(t, conn)
	})
	t.Run("unauthenticated body never finished", func(t *testing.T) {
		conn := rawRequest(t, s.base, postHead("/api/mcp", "", 100), "{")
		if got := readUntilClosed(t, conn); !strings.HasPrefix(got, "HTTP/1.1 401") {
			t.Fatalf("want the 401 before the body ends, got %q", got)
		}
	})
	t.Run("malformed chunked body", func(t *testing.T) {
		conn := rawRequest(t, s.base, postHead(threads, key, -1), "10\r\n{")
		readUntilClosed(t, conn)
	})
}

// TestABodyCutByTheReadTimeoutIsAnswered: with the read and write timeouts equal (their
// defaults are), a body that stops arriving failed its read when the write deadline had
// passed too, so the 400 the handler wrote reached nobody: the client saw the connection
// close without an answer (on the MCP endpoints it depended on which deadline came
// first), while docs/limits.md promises the MCP endpoints' 400 -32700.
func TestABodyCutByTheReadTimeoutIsAnswered(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the client's connection is HAProxy's, which cuts a slow client with its own timeout http-request, not the service's read timeouts this test sets")
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) {
		c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout = 500*time.Millisecond, time.Second, time.Second
	}})
	threads := pathOf(s.threadsURL("escalations", "architect"))
	key := s.key("acme/architect")
	for name, head := range map[string]string{
		"an MCP endpoint":        postHead(threads, key, -1),
		"client registration":    postHead("/register", "", -1),
		"a room's task's review": postHead(fmt.Sprintf("/api/rooms/%s/tasks/%s/accept", s.res.Projects["escalations"].ID, uuid.New()), key, -1),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn := rawRequest(t, s.base, head, "5\r\n{\"jso\r\n")
			if got := readUntilClosed(t, conn); !strings.HasPrefix(got, "HTTP/1.1 400") {
				t.Fatalf("want the 400 of a body cut short, got %q", got)
			}
		})
	}
}

// TestABodyARouteDoesNotReadHoldsItsAnswerASecondAtMost: a route that answers without
// reading the body (/token of a body that is no form) had its answer held by net/http,
// which reads what is left of a body before answering, until the read timeout; a body
// that never ended then got no answer at all (the write deadline had passed with it).
func TestABodyARouteDoesNotReadHoldsItsAnswerASecondAtMost(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the client's connection is HAProxy's, which buffers the request before the service sees it")
	s := startServer(t)
	conn := rawRequest(t, s.base, postHead("/token", "", -1), "5\r\n{\"jso\r\n")
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within 10 s (the read timeout is a minute): %v", err)
	}
	if body := testfix.Body(t, resp); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("%d %s, want 400", resp.StatusCode, body)
	}
}

// countingReader is a request body that records how much of it the server read.
type countingReader struct {
	left int
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.left)
	for i := range n {
		p[i] = ' '
	}
	c.left -= n
	c.read.Add(int64(n))
	return n, nil
}

// inProcess is an App on its own seeded database with pools of maxConns connections,
// served without a listener.
type inProcess struct {
	app *app.App
	db  *pg.DB
	url string
	res admin.Result
}

func newInProcess(t *testing.T, maxConns int32, statementTimeout time.Duration) *inProcess {
	t.Helper()
	return newInProcessWith(t, maxConns, statementTimeout, func(*config.Config) {})
}

// newInProcessWith is newInProcess with tune changing the configuration first.
func newInProcessWith(t *testing.T, maxConns int32, statementTimeout time.Duration, tune func(*config.Config)) *inProcess {
	t.Helper()
	// Seeded apart, with the test servers' budget: the demo's seeding under a second's
	// budget ran out on a loaded Citus coordinator ("load agents: canceling statement
	// due to statement timeout") before the test began.
	u, res := seedDemo(t, nil)
	d, err := pg.Open(context.Background(), u, pg.Options{MaxConns: maxConns, OpsMaxConns: 2, StatementTimeout: statementTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cfg := config.Config{DatabaseURL: u, StatementTimeout: statementTimeout, MaxConns: int(maxConns), MaxBodyBytes: 4 << 20}
	tune(&cfg)
	a, err := app.New(cfg, app.NewLogger(io.Discard, "error"), d, "http://relay.test")
	if err != nil {
		t.Fatal(err)
	}
	return &inProcess{app: a, db: d, url: u, res: res}
}

func (p *inProcess) threadsPath(part string) string {
	return pathOf(admin.ThreadsURL("http://relay.test", p.res.Projects["escalations"].ConnectCode, part))
}

// serve sends one request through the App's handler; it fails the test when no answer
// comes within the generous bound.
func (p *inProcess) serve(t *testing.T, method, target, key string, body io.Reader) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Agent-Key", key)
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { defer close(done); p.app.Handler().ServeHTTP(rec, req) }()
	select {
	case <-done:
	case <-time.After(generous):
		t.Fatalf("%s %s: no answer", method, target)
	}
	return rec
}

// TestUnauthenticatedBodyIsNotRead checks that a caller without a valid credential costs
// the server at most a small prefix of its body, however much it sends.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, 2, 5*time.Second)
	for _, key := range []string{"", "sk-qyt-not-a-real-key"} {
		t.Run("key "+key, func(t *testing.T) {
			body := &countingReader{left: 4 << 20}
			req := httptest.NewRequest(http.MethodPost, "/api/mcp", io.NopCloser(body))
			req.ContentLength = -1 // undeclared: the declared-size check cannot answer first
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("X-Agent-Key", key)
			}
			rec := httptest.NewRecorder()
			p.app.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", rec.Code, rec.Body)
			}
			if n := body.read.Load(); n > 1024 {
				t.Fatalf("the server read %d bytes of an unauthenticated body", n)
			}
		})
	}
}

// holdRequest starts an authenticated request whose body never ends, and waits until the
// server is reading it (it answers only when the connection is closed).
func holdRequest(t *testing.T, base, path, key string, contentLength int) net.Conn {
	t.Helper()
	return rawRequest(t, base, postHead(path, key, contentLength), "{")
}

// untilRefused repeats a request until a limit refuses it, while the held requests occupy
// what the limit bounds. The held requests reach the server asynchronously, so one of
// them can lose the race: a request of the test's own that is in flight when a held one
// arrives makes the limit refuse the held one (answered 429 at once, so it holds
// nothing), and closed held requests of an earlier round may still be counted while the
// server notices their end. A round in which a held request was answered is therefore
// not a verdict: the requests are held again after a pause and the round is repeated (a
// bounded number of times). A round in which every held request stood unanswered and no
// request was refused is the failure: the limit was not applied.
func untilRefused(t *testing.T, held []net.Conn, hold func() []net.Conn, do func() (int, http.Header, string)) (http.Header, string) {
	t.Helper()
	var lastStatus int
	var lastBody string
	var early []string
	time.Sleep(100 * time.Millisecond) // the held requests reach the server first
	for round := 0; ; round++ {
		for range 100 {
			status, h, body := do()
			if status == http.StatusTooManyRequests {
				return h, body
			}
			lastStatus, lastBody = status, body
			time.Sleep(20 * time.Millisecond)
		}
		early = early[:0]
		for _, c := range held {
			if a := answered(c); a != "" {
				early = append(early, a)
			}
		}
		if len(early) == 0 {
			t.Fatalf("never refused while %d held requests stood; the last answer: %d %.300s", len(held), lastStatus, lastBody)
		}
		if round == 9 {
			t.Fatalf("a held request was answered early in every round (the last: %.300q); the last answer: %d %.300s", early, lastStatus, lastBody)
		}
		for _, c := range held {
			_ = c.Close()
		}
		time.Sleep(300 * time.Millisecond) // the server ends the closed ones and frees what they held
		held = hold()
		time.Sleep(100 * time.Millisecond)
	}
}

// answered returns what the server already answered on a held request's connection, or
// "" while it still holds the request.
func answered(c net.Conn) string {
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		return err.Error()
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return "connection: " + err.Error()
	}
	return string(buf[:n])
}

type rpcErr struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func checkRefusal(t *testing.T, h http.Header, body string) {
	t.Helper()
	var e rpcErr
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != -32000 || string(e.ID) != "null" {
		t.Fatalf("429 body %q is not the JSON-RPC refusal", body)
	}
	if h.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", h)
	}
}

// TestRequestsPerAddressAreBounded checks that one address cannot hold more than its share
// of requests, and that health checks answer meanwhile.
func TestRequestsPerAddressAreBounded(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "requests in progress per address are bounded per replica (docs/limits.md); the cluster-wide cap belongs to the balancer")
	// A generous database budget: a held request whose credential check ran over it on a
	// busy machine would be answered early and hold nothing.
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) { c.MaxRequestsPerAddr = 2; c.StatementTimeout = time.Minute }})
	url := s.threadsURL("escalations", "architect")
	key := s.key("acme/architect")
	var held []net.Conn
	hold := func() []net.Conn {
		held = []net.Conn{holdRequest(t, s.base, pathOf(url), key, 100), holdRequest(t, s.base, pathOf(url), key, 100)}
		return held
	}
	hold()

	t.Run("MCP endpoint answers 429 with a JSON-RPC error", func(t *testing.T) {
		h, body := untilRefused(t, held, hold, func() (int, http.Header, string) {
			return post(t, url, key, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		})
		checkRefusal(t, h, body)
	})
	t.Run("other routes answer 429 with a JSON error", func(t *testing.T) {
		h, body := untilRefused(t, held, hold, func() (int, http.Header, string) {
			return post(t, s.base+"/api/wakes/00000000-0000-0000-0000-000000000000/ack", key, `{}`)
		})
		var e struct{ Error, Reason string }
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Reason != "too_many_requests_from_address" || h.Get("Retry-After") == "" {
			t.Fatalf("429: %v %q", h, body)
		}
	})
	t.Run("the desk's ingest API answers 429 in its coded format", func(t *testing.T) {
		// Its OpenAPI gives every failure as {"error": {"code", "message"}}: a client that
		// reads error.code found a string.
		h, body := untilRefused(t, held, hold, func() (int, http.Header, string) {
			return post(t, s.base+desk.RouteIngestConversations, "", `{}`)
		})
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != string(apperr.RateLimited) || e.Error.Message == "" || h.Get("Retry-After") == "" {
			t.Fatalf("429: %v %q", h, body)
		}
	})
	t.Run("health endpoints answer", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if status, body := testfix.Get(t, http.DefaultClient, s.base+path); status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, status, body)
			}
		}
	})
	t.Run("requests pass again once the held ones end", func(t *testing.T) {
		for _, c := range held {
			_ = c.Close()
		}
		for end := time.Now().Add(generous); ; time.Sleep(20 * time.Millisecond) {
			status, _, body := post(t, url, key, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if status == http.StatusOK {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("still refused: %d %s", status, body)
			}
		}
	})
}

// firstRead tells read when its body is first read (its request is then in progress).
type firstRead struct {
	r    io.Reader
	read chan<- struct{}
	once sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { f.read <- struct{}{} })
	return f.r.Read(p)
}

// TestRequestsPerAddressCountAnIPv6HostOnce: requests in progress are counted per client
// address and, for IPv6, per /64 as well (a host can send each request from another
// address of its /64; a subnet may hold many real clients): an address has its share, a
// /64 prefixShare (16) addresses' worth.
func TestRequestsPerAddressCountAnIPv6HostOnce(t *testing.T) {
	t.Parallel()
	const perAddr = 2
	p := newInProcessWith(t, 2, 5*time.Second, func(c *config.Config) { c.MaxRequestsPerAddr = perAddr })
	path, key := p.threadsPath("architect"), p.res.Agents["acme/architect"].Key
	request := func(remote string, body io.Reader) *http.Request {
		req := httptest.NewRequest(http.MethodPost, path, body)
		req.RemoteAddr = remote
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Agent-Key", key)
		return req
	}
	// hold keeps a request from remote in progress (its body never ends) until the test
	// ends, once the handler reads it.
	var held sync.WaitGroup
	var bodies []*io.PipeWriter
	defer func() {
		for _, w := range bodies {
			_ = w.Close()
		}
		held.Wait()
	}()
	hold := func(t *testing.T, remote string) {
		t.Helper()
		r, w := io.Pipe()
		bodies = append(bodies, w)
		reading := make(chan struct{}, 1)
		held.Add(1)
		go func() {
			defer held.Done()
			req := request(remote, &firstRead{r: r, read: reading})
			req.ContentLength = -1 // undeclared: read until the pipe closes
			p.app.Handler().ServeHTTP(httptest.NewRecorder(), req)
		}()
		select {
		case <-reading:
		case <-time.After(generous):
			t.Fatalf("the request from %s was not read", remote)
		}
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	call := func(remote string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		p.app.Handler().ServeHTTP(rec, request(remote, strings.NewReader(list)))
		return rec
	}
	t.Run("an address past its share is refused; another of its /64 is served", func(t *testing.T) {
		for range perAddr {
			hold(t, "[2001:db8:1:2::1]:40000")
		}
		if rec := call("[2001:db8:1:2::1]:40001"); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("%d %.200s", rec.Code, rec.Body)
		}
		if rec := call("[2001:db8:1:2::2]:40000"); rec.Code != http.StatusOK {
			t.Fatalf("%d %.200s", rec.Code, rec.Body)
		}
	})
	t.Run("a /64 past its share is refused, whichever of its addresses asks; another /64 is served", func(t *testing.T) {
		for i := perAddr; i < perAddr*16; i++ {
			hold(t, fmt.Sprintf("[2001:db8:1:2::%x]:40000", 0x100+i))
		}
		rec := call("[2001:db8:1:2::ffff]:40000")
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("%d %.200s", rec.Code, rec.Body)
		}
		checkRefusal(t, rec.Header(), rec.Body.String())
		if rec := call("[2001:db8:1:3::1]:40000"); rec.Code != http.StatusOK {
			t.Fatalf("%d %.200s", rec.Code, rec.Body)
		}
	})
}

// TestInflightBytesAreBounded checks the process-wide bound on request bytes in progress.
func TestInflightBytesAreBounded(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) { c.MaxInflightBytes = budget }})
	url := s.threadsURL("escalations", "architect")
	key := s.key("acme/architect")
	hold := func() []net.Conn { return []net.Conn{holdRequest(t, s.base, pathOf(url), key, budget-4096)} }
	held := hold()

	t.Run("a declared body over what is left is refused", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + strings.Repeat(" ", 8192)
		h, got := untilRefused(t, held, hold, func() (int, http.Header, string) { return post(t, url, key, body) })
		checkRefusal(t, h, got)
	})
	t.Run("a small body still fits", func(t *testing.T) {
		if status, _, body := post(t, url, key, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("an undeclared body is refused once it outgrows what is left", func(t *testing.T) {
		conn := rawRequest(t, s.base, postHead(pathOf(url), key, -1), "")
		chunk := strings.Repeat(" ", 16<<10)
		for range 8 {
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				break // the server answered and closed
			}
		}
		if err := conn.SetReadDeadline(time.Now().Add(generous)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := testfix.Body(t, resp)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%d %s", resp.StatusCode, got)
		}
		checkRefusal(t, resp.Header, got)
	})
}

// TestRefusedBodiesHoldLittleOfTheBudget: a request without a credential is refused
// without its body being read, but it waits up to a second for the body's first bytes (to
// echo its id): while it waits, it must not hold its whole declared size of the byte
// budget, or a few such requests from one address would refuse every body for a second
// at a time, over and over.
func TestRefusedBodiesHoldLittleOfTheBudget(t *testing.T) {
	t.Parallel()
	const budget = 256 << 10
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) { c.MaxInflightBytes = budget }})
	url, key := s.threadsURL("escalations", "architect"), s.key("acme/architect")
	for range 3 { // each declares 1 MiB, sends one byte and no credential
		rawRequest(t, s.base, postHead(pathOf(url), "", 1<<20), "{")
	}
	time.Sleep(100 * time.Millisecond) // the refused requests reach the server first
	if status, _, body := post(t, url, key, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusOK {
		t.Fatalf("a small body while three unauthenticated ones wait: %d %s", status, body)
	}
}

// lockTable holds an ACCESS EXCLUSIVE lock on table, from the owner's connection, until
// the test ends.
func lockTable(t *testing.T, url, table string) {
	t.Helper()
	tx := testfix.Holder(t, url)
	if _, err := tx.Exec(context.Background(), "LOCK TABLE "+pgx.Identifier{table}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
}

// checkUnavailable checks the HTTP-level "database unavailable" answer: 503, Retry-After,
// a JSON-RPC error naming the database.
func checkUnavailable(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	var e rpcErr
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error.Message, "database is unavailable") {
		t.Fatalf("want 503 with Retry-After and the database unavailable error, got %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

// TestDatabaseDeadlineHolds checks that a request behind a lock or behind an exhausted
// pool gets the retryable "database unavailable" answer instead of waiting.
func TestDatabaseDeadlineHolds(t *testing.T) {
	t.Parallel()
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

	t.Run("behind a lock the credential check waits on", func(t *testing.T) {
		t.Parallel()
		p := newInProcess(t, 2, time.Second)
		lockTable(t, p.url, "agent_key")
		rec := p.serve(t, http.MethodPost, p.threadsPath("architect"), p.res.Agents["acme/architect"].Key, strings.NewReader(list))
		checkUnavailable(t, rec)
	})
	t.Run("behind a lock a tool waits on", func(t *testing.T) {
		t.Parallel()
		// The test servers' budget, not a second: the credential check before the tool
		// must pass, and on a loaded Citus coordinator a second ran out there first (a
		// 503 before the tool was reached). The lock holds for any budget.
		p := newInProcess(t, 2, testfix.StatementTimeout(t))
		lockTable(t, p.url, "thread")
		// inbox's first statement reads thread: it is prepared with the transaction's
		// first batch, before the transaction's own statement timeout is set.
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"inbox","arguments":{}}}`
		rec := p.serve(t, http.MethodPost, p.threadsPath("architect"), p.res.Agents["acme/architect"].Key, strings.NewReader(call))
		var res struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Text string }
			} `json:"result"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || !res.Result.IsError || len(res.Result.Content) != 1 ||
			!strings.Contains(res.Result.Content[0].Text, `"code":"unavailable"`) {
			t.Fatalf("want the tool's unavailable error, got %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("behind an exhausted pool", func(t *testing.T) {
		t.Parallel()
		p := newInProcess(t, 2, time.Second)
		holdPool(t, p.db.App)
		rec := p.serve(t, http.MethodPost, p.threadsPath("architect"), p.res.Agents["acme/architect"].Key, strings.NewReader(list))
		checkUnavailable(t, rec)
	})
	t.Run("the pager's long poll, exempt from the request limits, says when to retry too", func(t *testing.T) {
		t.Parallel()
		p := newInProcess(t, 2, time.Second)
		holdPool(t, p.db.App)
		rec := p.serve(t, http.MethodGet, "/api/wakes/next?wait=0", p.res.Agents["acme/architect"].Key, nil)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
	})
}

// holdPool takes every connection of pool until the returned release runs (or the test
// ends).
func holdPool(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	done := false
	release = func() {
		if !done {
			done = true
			for _, c := range held {
				c.Release()
			}
		}
	}
	t.Cleanup(release)
	return release
}

// TestReadyzReportsPoolExhaustion checks that /readyz names the exhausted pool while
// requests wait for a connection, and is ready again after.
func TestReadyzReportsPoolExhaustion(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, 2, 30*time.Second)
	release := holdPool(t, p.db.App)
	waiting := make(chan struct{})
	go func() {
		defer close(waiting)
		req := httptest.NewRequest(http.MethodPost, "/api/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("X-Agent-Key", p.res.Agents["acme/architect"].Key)
		p.app.Handler().ServeHTTP(httptest.NewRecorder(), req)
	}()
	var last string
	for end := time.Now().Add(generous); !strings.Contains(last, "pool exhausted"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("/readyz never said the pool is exhausted: %s", last)
		}
		rec := p.serve(t, http.MethodGet, "/readyz", "", nil)
		last = fmt.Sprintf("%d %s", rec.Code, rec.Body)
		if strings.Contains(last, "pool exhausted") && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("pool exhausted with status %s", last)
		}
	}
	release()
	select {
	case <-waiting:
	case <-time.After(generous):
		t.Fatal("the waiting request never finished")
	}
	if rec := p.serve(t, http.MethodGet, "/readyz", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("not ready after the pool was released: %d %s", rec.Code, rec.Body)
	}
}

// TestConnectionCapMakesRoom checks that the server holds at most its connection cap: at
// the cap, a new connection (a health probe here) takes the place of the oldest one that
// has not sent its headers, and is answered.
func TestConnectionCapMakesRoom(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the connection cap is each process's own descriptors, and behind the balancer every connection a replica holds is HAProxy's")
	const connCap = 4
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) {
		c.MaxConnections = connCap
		c.ReadHeaderTimeout = time.Hour // only the cap may close the silent connections
	}})
	silent := make([]net.Conn, connCap)
	for i := range silent {
		silent[i] = rawRequest(t, s.base, "", "")
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: generous}
	for end := time.Now().Add(generous); ; time.Sleep(20 * time.Millisecond) {
		resp, err := client.Get(s.base + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(end) {
			t.Fatalf("/healthz never answered at the cap: %v", err)
		}
	}
	// The oldest silent connection made room for the probe; the newest is still open (the
	// header timeout did not close them all).
	readUntilClosed(t, silent[0])
	last := silent[connCap-1]
	if err := last.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := last.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the newest connection was closed too: %v", err)
	}
}

// TestAnUploadMayTakeLongerThanTheReadTimeout: the server's read timeout bounds a whole
// request, and a file near the attachment limit takes longer than that on a slow link: it
// was cut off on every try. An upload's read deadline grows with its declared size.
func TestAnUploadMayTakeLongerThanTheReadTimeout(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "the client's connection is HAProxy's, which applies its own timeout http-request, not the service's read timeout this test sets")
	s := startServerOpts(t, serverOptions{tune: func(c *config.Config) { c.ReadTimeout = time.Second }})
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	var sent struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(served(t, room, s.key("acme/architect"), "send_task", map[string]any{"to_agent_slug": "backend", "goal": "Read the dump"})), &sent); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/rooms/%s/tasks/%s/attachments?filename=dump.bin", s.res.Projects["escalations"].ID, sent.TaskID)
	const piece = 16 << 10
	head := "POST " + path + " HTTP/1.1\r\nHost: relay.test\r\nContent-Type: application/octet-stream\r\n" +
		"X-Agent-Key: " + s.key("acme/architect") + "\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", 4*piece)
	conn := rawRequest(t, s.base, head, "")
	for range 4 { // 1.6 s in all, past the 1 s read timeout
		time.Sleep(400 * time.Millisecond)
		if _, err := conn.Write(bytes.Repeat([]byte{0xfe}, piece)); err != nil {
			t.Fatalf("the server stopped reading: %v", err)
		}
	}
	if err := conn.SetReadDeadline(time.Now().Add(generous)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := testfix.Body(t, resp); resp.StatusCode != http.StatusCreated {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// TestACodedBodyIsRefused: no route decodes a Content-Encoding; a gzip-coded attachment
// was stored as its compressed bytes under the client's file name, and a coded JSON body
// was refused as JSON that is not valid. Both are refused as a coding the server does
// not apply (415, Accept-Encoding: identity).
func TestACodedBodyIsRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	architect := s.key("acme/architect")
	var sent struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(served(t, room, architect, "send_task", map[string]any{"to_agent_slug": "backend", "goal": "Read the report"})), &sent); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	send := func(url, ctype string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(gz.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("Accept", "application/json, text/event-stream")
		setCredential(req.Header, architect)
		return testfix.Do(t, http.DefaultClient, req)
	}
	t.Run("an attachment", func(t *testing.T) {
		upload := fmt.Sprintf("%s/api/rooms/%s/tasks/%s/attachments?filename=report.txt", s.base, s.res.Projects["escalations"].ID, sent.TaskID)
		status, h, body := send(upload, "text/plain")
		if status != http.StatusUnsupportedMediaType || h.Get("Accept-Encoding") != "identity" || !strings.Contains(body, "Content-Encoding") {
			t.Fatalf("%d %v %s", status, h, body)
		}
		if a := callTool(t, room, s.key("acme/backend"), "get_inbox", nil); strings.Contains(a.text, "report.txt") {
			t.Fatalf("the coded upload was stored: %s", a.text)
		}
	})
	t.Run("an MCP request", func(t *testing.T) {
		status, h, body := send(room, "application/json")
		var e rpcErr
		if status != http.StatusUnsupportedMediaType || h.Get("Accept-Encoding") != "identity" || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != -32600 {
			t.Fatalf("%d %v %s", status, h, body)
		}
	})
}
