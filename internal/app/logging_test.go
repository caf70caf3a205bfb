package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/testfix"
)

// credentialKinds are every credential prefix the service issues or reserves: agent keys,
// connect codes, CI tokens, OAuth access and refresh tokens.
var credentialKinds = []string{auth.AgentKeyPrefix, auth.ConnectCodePrefix, auth.CITokenPrefix, "qyt_at_", "qyt_rt_"}

var escape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

// decodeAll peels every layer of percent-encoding, as a reader of the log could.
func decodeAll(s string) string {
	for i := 0; i < 64; i++ {
		next := escape.ReplaceAllStringFunc(s, func(e string) string {
			v, _ := strconv.ParseUint(e[1:], 16, 8)
			return string([]byte{byte(v)})
		})
		if next == s {
			return s
		}
		s = next
	}
	return s
}

func encodeByte(c byte, layers int) string {
	s := string([]byte{c})
	for i := 0; i < layers; i++ {
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			fmt.Fprintf(&b, "%%%02X", s[j])
		}
		s = b.String()
	}
	return s
}

// encodedVariants are the ways a credential can be written so that a naive pattern on the
// raw text misses it.
func encodedVariants(cred, prefix string) map[string]string {
	each := func(layers func(i int) int, lower bool) string {
		var b strings.Builder
		for i := 0; i < len(cred); i++ {
			e := encodeByte(cred[i], layers(i))
			if lower {
				e = strings.ToLower(e)
			}
			b.WriteString(e)
		}
		return b.String()
	}
	sep := strings.LastIndexAny(prefix[:len(prefix)-1], "-_")
	return map[string]string{
		"raw":                      cred,
		"separators encoded":       strings.ReplaceAll(strings.ReplaceAll(cred[:len(prefix)], "_", "%5F"), "-", "%2D") + cred[len(prefix):],
		"first letter encoded":     encodeByte(cred[0], 1) + cred[1:],
		"last prefix sep encoded":  cred[:sep] + encodeByte(cred[sep], 1) + cred[sep+1:],
		"every byte encoded":       each(func(int) int { return 1 }, false),
		"every byte, lower hex":    each(func(int) int { return 1 }, true),
		"double encoded":           each(func(int) int { return 2 }, false),
		"mixed layers":             each(func(i int) int { return i % 3 }, false),
		"body byte triple encoded": cred[:len(prefix)+3] + encodeByte(cred[len(prefix)+3], 3) + cred[len(prefix)+4:],
		"upper-case prefix":        strings.ToUpper(cred[:len(prefix)]) + cred[len(prefix):],
		"upper-case, encoded":      encodeByte(cred[0]&^0x20, 2) + strings.ToUpper(cred[1:len(prefix)]) + cred[len(prefix):],
	}
}

// leaks reports whether any part of cred's secret survives in s, however decoded.
func leaks(s, cred, prefix string) bool {
	body := cred[len(prefix):]
	d := decodeAll(s)
	// The public id alone is not secret, but any 12 characters of the rest are.
	for i := 8; i+12 <= len(body); i++ {
		if strings.Contains(d, body[i:i+12]) {
			return true
		}
	}
	return false
}

func TestRedactCredentials(t *testing.T) {
	t.Parallel()
	for _, prefix := range credentialKinds {
		cred, _, err := auth.Generate(prefix)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range encodedVariants(cred, prefix) {
			for where, s := range map[string]string{
				"path":   "/mcp/" + v + "?part=architect",
				"query":  "/api/mcp?part=a%20b&code=" + v + "&x=1",
				"header": "Bearer " + v,
				"alone":  v,
			} {
				t.Run(prefix+"/"+name+"/"+where, func(t *testing.T) {
					t.Parallel()
					got := app.RedactCredentials(s)
					if leaks(got, cred, prefix) {
						t.Fatalf("RedactCredentials(%q) = %q: the credential survives", s, got)
					}
					if !strings.Contains(got, "[redacted]") {
						t.Fatalf("RedactCredentials(%q) = %q: no marker", s, got)
					}
					if where == "path" && (!strings.HasPrefix(got, "/mcp/") || !strings.HasSuffix(got, "?part=architect")) {
						t.Fatalf("RedactCredentials(%q) = %q: the rest of the path changed", s, got)
					}
					if where == "query" && (!strings.HasPrefix(got, "/api/mcp?part=a%20b&code=") || !strings.HasSuffix(got, "&x=1")) {
						t.Fatalf("RedactCredentials(%q) = %q: the rest of the query changed", s, got)
					}
				})
			}
		}
	}
	t.Run("text without credentials is kept byte for byte", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"/api/mcp?q=a%20b%2Fc", "/mcp/abc?part=architect", "100%", "%zz%4", "quality yields"} {
			if got := app.RedactCredentials(s); got != s {
				t.Errorf("RedactCredentials(%q) = %q", s, got)
			}
		}
	})
	t.Run("encoding deeper than any server decodes is not logged", func(t *testing.T) {
		t.Parallel()
		cred, _, _ := auth.Generate(auth.ConnectCodePrefix)
		deep := "/mcp/" + encodeByte(cred[0], 12) + cred[1:]
		got := app.RedactCredentials(deep)
		if leaks(got, cred, auth.ConnectCodePrefix) || strings.Contains(got, cred[7:]) {
			t.Fatalf("RedactCredentials(%q) = %q", deep, got)
		}
	})
}

// TestALineHasOneRequestID: a line whose caller passed the request id as well as the
// context carried it had the key twice, which strict JSON readers refuse.
func TestALineHasOneRequestID(t *testing.T) {
	t.Parallel()
	buf := &syncBuffer{}
	l := app.NewLogger(buf, "info")
	ctx := app.WithRequestID(context.Background(), "rid-1")
	l.InfoContext(ctx, "given", "request_id", "rid-1", "tool", "x")
	l.InfoContext(ctx, "from the context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%q", buf.String())
	}
	for _, line := range lines {
		if n := strings.Count(line, `"request_id"`); n != 1 {
			t.Errorf("request_id %d times in %s", n, line)
		}
	}
}

func TestLoggerRedactsEveryAttribute(t *testing.T) {
	t.Parallel()
	key, _, _ := auth.Generate(auth.AgentKeyPrefix)
	enc := strings.ReplaceAll(key, "-", "%2D")
	cases := map[string]func(l *slog.Logger){
		"message":       func(l *slog.Logger) { l.Info("got " + enc) },
		"string":        func(l *slog.Logger) { l.Info("m", "header", enc) },
		"error":         func(l *slog.Logger) { l.Info("m", "error", errors.New("bad key "+enc)) },
		"wrapped error": func(l *slog.Logger) { l.Info("m", "error", fmt.Errorf("auth: %w", errors.New(enc))) },
		"group":         func(l *slog.Logger) { l.Info("m", slog.Group("req", "path", "/x/"+enc)) },
		"with":          func(l *slog.Logger) { l.With("key", enc).Info("m") },
		"request id": func(l *slog.Logger) {
			l.InfoContext(app.WithRequestID(context.Background(), key), "m")
		},
		"request id given too": func(l *slog.Logger) {
			l.InfoContext(app.WithRequestID(context.Background(), key), "m", "request_id", key)
		},
	}
	for name, logIt := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			buf := &syncBuffer{}
			logIt(app.NewLogger(buf, "info"))
			out := buf.String()
			if out == "" || leaks(out, key, auth.AgentKeyPrefix) {
				t.Fatalf("logged %q", out)
			}
		})
	}
}

// TestRequestLogsNeverHoldCredentials sends credentials, encoded in the ways the review
// used and more, in the path, the query and the request id header of real requests, and
// reads every log line the server wrote.
func TestRequestLogsNeverHoldCredentials(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	code := s.res.Projects["escalations"].ConnectCode
	key := s.key("acme/architect")
	send := func(method, path string, header http.Header) {
		req, err := http.NewRequest(method, s.base+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, v := range encodedVariants(code, auth.ConnectCodePrefix) {
		send(http.MethodPost, "/mcp/"+v+"?part=architect", http.Header{"X-Agent-Key": {key}})
		send(http.MethodGet, "/mcp/x?part=architect&code="+v, http.Header{})
	}
	for _, v := range encodedVariants(key, auth.AgentKeyPrefix) {
		send(http.MethodGet, "/api/mcp?key="+v, http.Header{"X-Request-Id": {key}})
	}
	send(http.MethodGet, "/healthz?k="+key, http.Header{"X-Request-Id": {key}})
	// An attachment link's signature has no credential's prefix, and works as a key to
	// the file until it expires.
	const sig = "5f0c2d6b9a8e7f1c3b4a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2"
	send(http.MethodGet, "/api/rooms/"+s.res.Projects["escalations"].ID.String()+"/attachments/"+uuid.NewString()+"?exp=1999999999&sig="+sig, http.Header{})
	logs := s.logs.String()
	if !strings.Contains(logs, "[redacted]") {
		t.Fatal("no request was logged with a masked credential")
	}
	if leaks(logs, code, auth.ConnectCodePrefix) || leaks(logs, key, auth.AgentKeyPrefix) {
		t.Fatal("a credential reached the logs")
	}
	if strings.Contains(logs, sig) || !strings.Contains(logs, "sig=[redacted]") {
		t.Fatal("an attachment link's signature reached the logs")
	}
}

func TestLoggedURIMasksSignatures(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/api/rooms/p/attachments/a?exp=17&sig=abc123": "/api/rooms/p/attachments/a?exp=17&sig=[redacted]",
		// A malformed pair beside it: the handler still reads sig, so the log must not.
		"/api/rooms/p/attachments/a?exp=17&sig=abc123&x=%zz": "/api/rooms/p/attachments/a?exp=17&sig=[redacted]&x=%zz",
		"/api/rooms/p/attachments/a?%73IG=abc123&exp=17":     "/api/rooms/p/attachments/a?%73IG=[redacted]&exp=17",
		// Secrets without a credential's prefix, by their parameters' names.
		"/login?password=hunter2&email=a@b.c":                "/login?password=[redacted]&email=a@b.c",
		"/mcp/c?part=bot1&token=abc123secret&Access_Token=x": "/mcp/c?part=bot1&token=[redacted]&Access_Token=[redacted]",
		"/oauth/callback?code=abc&state=s":                   "/oauth/callback?code=[redacted]&state=s",
		"/x?api%5Fkey=abc&keys=1&a&b=":                       "/x?api%5Fkey=[redacted]&keys=1&a&b=",
		"/x?design=1":                                        "/x?design=1",
		"/api/mcp?part=a%20b":                                "/api/mcp?part=a%20b",
		"/healthz":                                           "/healthz",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := app.LoggedURI(u); got != want {
			t.Errorf("LoggedURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestALongURLIsLoggedCut: one anonymous request with a long URL wrote a log line of
// twice its size; the logged path is cut after its credentials are masked, and a request
// line past MaxHeaderBytes is refused before it is read.
func TestALongURLIsLoggedCut(t *testing.T) {
	skipThroughBalancer(t, "HAProxy answers a URL longer than its buffer (16 KiB) with its own 400 and never passes it on")
	t.Parallel()
	s := startServer(t)
	key := s.key("acme/architect")
	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	// The credential straddles the cut: masked whole, then cut.
	long := "/nope/" + strings.Repeat("a", 2030) + key + strings.Repeat("%2525qyt-a", 4000)
	if status := get(long); status != http.StatusNotFound {
		t.Fatalf("a long URL: %d", status)
	}
	logs := s.logs.String()
	if leaks(logs, key, auth.AgentKeyPrefix) {
		t.Fatal("a credential reached the logs")
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "/nope/") && (len(line) > 4<<10 || !strings.Contains(line, "bytes)")) {
			t.Fatalf("the request was logged in %d bytes: %.300s", len(line), line)
		}
	}
	// net/http reads 4 KiB past the bound before it refuses.
	if status := get("/nope/" + strings.Repeat("a", app.MaxHeaderBytes+8<<10)); status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a request line past the bound: %d", status)
	}
}

// TestProbesAreNotLogged: a balancer's /readyz every second of every replica filled its
// log (406 of 2,569 lines in nine minutes); the probes are counted in the metrics only.
func TestProbesAreNotLogged(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, _ := testfix.Get(t, http.DefaultClient, s.base+path); status != http.StatusOK {
			t.Fatalf("%s: %d", path, status)
		}
	}
	// A request after them, logged: the lines before it are written.
	if status, _ := testfix.Get(t, http.DefaultClient, s.base+"/nope"); status != http.StatusNotFound {
		t.Fatalf("/nope: %d", status)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, `"path":"/nope"`) {
		t.Fatalf("the request after the probes was not logged: %s", logs)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if strings.Contains(logs, `"path":"`+path+`"`) {
			t.Fatalf("%s was logged", path)
		}
	}
}

// TestAnAbandonedDownloadIsLoggedAsSuch: a client that reads part of a large download and
// goes away was logged as any served download (200 and its bytes), and nobody could tell
// from the log that the file never arrived.
func TestAnAbandonedDownloadIsLoggedAsSuch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	project := s.res.Projects["escalations"].ID
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, project)
	var sent struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(served(t, room, s.key("acme/architect"), "send_task", map[string]any{"to_agent_slug": "backend", "goal": "Read the dump"})), &sent); err != nil {
		t.Fatal(err)
	}
	// Larger than loopback's socket buffers can hold, and incompressible, so that the
	// server is still writing when the client goes.
	content := make([]byte, 24<<20)
	if _, err := rand.NewChaCha8([32]byte{1}).Read(content); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/rooms/%s/tasks/%s/attachments?filename=dump.bin", s.base, project, sent.TaskID), bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	setCredential(req.Header, s.key("acme/architect"))
	if status, _, body := testfix.Do(t, http.DefaultClient, req); status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	var inbox struct {
		Tasks []struct {
			Attachments []struct {
				DownloadURL string `json:"download_url"`
			} `json:"attachments"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(served(t, room, s.key("acme/backend"), "get_inbox", nil)), &inbox); err != nil || len(inbox.Tasks) != 1 || len(inbox.Tasks[0].Attachments) != 1 {
		t.Fatalf("the inbox: %+v, %v", inbox, err)
	}
	link, err := url.Parse(inbox.Tasks[0].Attachments[0].DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	conn := rawRequest(t, s.base, "GET "+link.RequestURI()+" HTTP/1.1\r\nHost: relay.test\r\n\r\n", "")
	if _, err := io.ReadFull(conn, make([]byte, 64<<10)); err != nil {
		t.Fatalf("the download's start: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(generous)
	for {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(line, "/attachments/") && strings.Contains(line, `"method":"GET"`) {
				if !strings.Contains(line, `"client_gone":true`) {
					t.Fatalf("the abandoned download was logged as served: %s", line)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the download was never logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTheOAuthLibrarysRefusalsAreNotWarnings: the OAuth library logs each request it
// refuses at WARN through slog's default; a client's mistake (a 4xx) now goes to DEBUG,
// so that anyone sending bad codes cannot fill the operator's log, while its server
// errors and other warnings still show at the default level.
func TestTheOAuthLibrarysRefusalsAreNotWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := app.LibraryLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		level slog.Level
		msg   string
		attrs []any
		shown bool
	}{
		{"a refused token request", slog.LevelWarn, "request error", []any{"oidc_error", "invalid_grant", "status_code", 400}, false},
		{"a refusal without a status (a redirect)", slog.LevelWarn, "request error", []any{"oidc_error", "invalid_request"}, false},
		{"a server error", slog.LevelError, "request error", []any{"oidc_error", "server_error", "status_code", 500}, true},
		{"another warning", slog.LevelWarn, "something else", nil, true},
		{"a route registered", slog.LevelInfo, "registered route", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			buf.Reset()
			log.Log(ctx, c.level, c.msg, c.attrs...)
			if shown := buf.Len() > 0; shown != c.shown {
				t.Fatalf("shown %v, want %v: %q", shown, c.shown, buf.String())
			}
		})
	}
}
