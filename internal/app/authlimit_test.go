package app_test

import (
	"bufio"
	"encoding/json"
	"hash/crc32"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/throttle"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// wrongKey returns an agent key with the given public id, a random secret and a valid
// checksum: it passes every check but the database's, as an attacker's guess would.
func wrongKey(t testing.TB, id string) string {
	t.Helper()
	_, p, err := auth.Generate(auth.AgentKeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if id == "" {
		id = p.ID
	}
	raw, _, _ := auth.Generate(auth.AgentKeyPrefix)
	body := id + raw[len(auth.AgentKeyPrefix)+8:len(auth.AgentKeyPrefix)+40]
	n := new(big.Int).SetUint64(uint64(crc32.ChecksumIEEE([]byte(auth.AgentKeyPrefix + body))))
	sum := make([]byte, 6)
	mod, radix := new(big.Int), big.NewInt(62)
	for i := 5; i >= 0; i-- {
		n.DivMod(n, radix, mod)
		sum[i] = base62[mod.Int64()]
	}
	key := auth.AgentKeyPrefix + body + string(sum)
	if _, err := auth.Parse(auth.AgentKeyPrefix, key); err != nil {
		t.Fatalf("forged key does not parse: %v", err)
	}
	return key
}

// clientFrom connects from a loopback address of its own, so the server sees a distinct
// client address without any proxy header.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

const whoamiCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`

func callWith(t testing.TB, c *http.Client, url string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(whoamiCall))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return testfix.Do(t, c, req)
}

func limitedServer(t *testing.T, l throttle.Limits, proxies string) *server {
	t.Helper()
	trusted, err := throttle.ParseProxies(proxies)
	if err != nil {
		t.Fatal(err)
	}
	return startServerOpts(t, serverOptions{tune: func(c *config.Config) {
		c.AuthFailures, c.TrustedProxies = l, trusted
	}})
}

func TestFailedAuthenticationIsLimited(t *testing.T) {
	t.Parallel()

	t.Run("the pager's routes and CI confirmation share the limits", func(t *testing.T) {
		t.Parallel()
		s := limitedServer(t, throttle.Limits{Window: time.Minute, PerAddress: 4, PerKey: 100}, "")
		attacker := clientFrom("127.0.0.23")
		pager := func(key string) int {
			st, _ := s.nextWake(t, attacker, key)
			return st
		}
		confirm := func(token string) int {
			req, err := http.NewRequest(http.MethodPost, s.base+"/api/projects/"+s.res.Projects["escalations"].ID.String()+"/knowledge/"+uuid.NewString()+"/confirm", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			st, _, _ := testfix.Do(t, attacker, req)
			return st
		}
		for i := 0; i < 2; i++ {
			if st := pager(wrongKey(t, "")); st != http.StatusUnauthorized {
				t.Fatalf("pager, wrong key %d: status %d, want 401", i+1, st)
			}
			if st := confirm("qyt_ci_" + strings.Repeat("x", 40)); st != http.StatusUnauthorized {
				t.Fatalf("confirm, wrong token %d: status %d, want 401", i+1, st)
			}
		}
		if st := pager(wrongKey(t, "")); st != http.StatusTooManyRequests {
			t.Fatalf("pager past the limit: status %d, want 429", st)
		}
		if st := pager(s.key("acme/backend")); st != http.StatusTooManyRequests {
			t.Fatalf("blocked address with a good key on the pager: status %d, want 429", st)
		}
	})
	t.Run("the desk ingest API and CI confirmation answer the limit's 429 in their coded format", func(t *testing.T) {
		// docs/desk.md and api/desk-ingest.openapi.json give every failure of these
		// routes as {"error":{"code","message"}}, 429 rate_limited included; the limit's
		// own 429 was {"error":"…","request_id":"…"}.
		t.Parallel()
		s := limitedServer(t, throttle.Limits{Window: time.Minute, PerAddress: 2, PerKey: 100}, "")
		attacker := clientFrom("127.0.0.24")
		send := func(url, token string) (int, string) {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			st, _, body := testfix.Do(t, attacker, req)
			return st, body
		}
		ingest := s.base + desk.RouteIngestConversations
		confirm := s.base + "/api/projects/" + s.res.Projects["escalations"].ID.String() + "/knowledge/" + uuid.NewString() + "/confirm"
		for i := 0; i < 2; i++ {
			if st, body := send(ingest, "qyt_pt_"+strings.Repeat("x", 40)); st != http.StatusUnauthorized {
				t.Fatalf("ingest, wrong token %d: %d %s, want 401", i+1, st, body)
			}
		}
		for name, url := range map[string]string{"ingest": ingest, "confirm": confirm} {
			st, body := send(url, "qyt_pt_"+strings.Repeat("y", 40))
			var coded httpapi.CodedError
			if st != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &coded) != nil || coded.Error.Code != string(apperr.RateLimited) || coded.Error.Message != throttle.MsgAddressBlocked {
				t.Fatalf("%s past the limit: %d %s; want 429 {\"error\":{\"code\":\"rate_limited\",…}}", name, st, body)
			}
		}
	})
	t.Run("wrong keys from one address get 429 with Retry-After past the limit", func(t *testing.T) {
		t.Parallel()
		s := limitedServer(t, throttle.Limits{Window: time.Minute, PerAddress: 5, PerKey: 100}, "")
		url, attacker := s.threadsURL("escalations", "architect"), clientFrom("127.0.0.21")
		for i := 0; i < 5; i++ {
			if st, _, _ := callWith(t, attacker, url, http.Header{"X-Agent-Key": {wrongKey(t, "")}}); st != http.StatusUnauthorized {
				t.Fatalf("wrong key %d: status %d, want 401", i+1, st)
			}
		}
		st, h, body := callWith(t, attacker, url, http.Header{"X-Agent-Key": {wrongKey(t, "")}})
		if st != http.StatusTooManyRequests {
			t.Fatalf("past the limit: status %d, want 429", st)
		}
		if secs, err := strconv.Atoi(h.Get("Retry-After")); err != nil || secs < 1 || secs > 60 {
			t.Fatalf("Retry-After %q", h.Get("Retry-After"))
		}
		var rpc struct {
			ID    int `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil || rpc.ID != 7 || rpc.Error.Code != -32001 || rpc.Error.Message != throttle.MsgAddressBlocked {
			t.Fatalf("429 body is not the endpoint's JSON-RPC error: %s", body)
		}
		// The blocked address is refused even with a good key; other addresses are not.
		if st, _, _ := callWith(t, attacker, url, http.Header{"X-Agent-Key": {s.key("acme/architect")}}); st != http.StatusTooManyRequests {
			t.Fatalf("blocked address with a good key: status %d, want 429", st)
		}
		if st, _, _ := callWith(t, clientFrom("127.0.0.22"), url, http.Header{"X-Agent-Key": {s.key("acme/architect")}}); st != http.StatusOK {
			t.Fatalf("another address: status %d, want 200", st)
		}
		// Every endpoint that takes a key shares the limit, the rooms HTTP API included.
		room := s.base + "/api/rooms/" + s.res.Projects["escalations"].ID.String()
		for _, u := range []string{s.base + "/api/mcp", s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String(), s.base + "/desk/mcp",
			room + "/tasks/x/attachments", room + "/tasks/x/accept"} {
			st, h, _ := callWith(t, attacker, u, http.Header{"X-Agent-Key": {wrongKey(t, "")}, "Authorization": {"Bearer x"}})
			if st != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
				t.Fatalf("%s: status %d, Retry-After %q; want 429 with Retry-After", u, st, h.Get("Retry-After"))
			}
		}
	})

	t.Run("a key id is limited across addresses, and its holder keeps working", func(t *testing.T) {
		t.Parallel()
		// Behind a trusted proxy (loopback), each X-Forwarded-For names another client.
		s := limitedServer(t, throttle.Limits{Window: time.Minute, PerAddress: 100, PerKey: 3}, "127.0.0.1")
		url, real := s.threadsURL("escalations", "architect"), s.key("acme/architect")
		id := real[len(auth.AgentKeyPrefix) : len(auth.AgentKeyPrefix)+8]
		from := func(addr string, key string) int {
			st, _, _ := callWith(t, http.DefaultClient, url, http.Header{"X-Agent-Key": {key}, "X-Forwarded-For": {addr}})
			return st
		}
		// The holder works through every replica (one call each, round robin) before
		// the guesses: its pass is each replica's verification (docs/auth-limits.md).
		for i := range testReplicas(t) {
			if st := from("203.0.113.1", real); st != http.StatusOK {
				t.Fatalf("holder, call %d: status %d", i+1, st)
			}
		}
		for i := 0; i < 3; i++ {
			if st := from("198.51.100."+strconv.Itoa(i+1), wrongKey(t, id)); st != http.StatusUnauthorized {
				t.Fatalf("guess %d: status %d, want 401", i+1, st)
			}
		}
		if st := from("198.51.100.9", wrongKey(t, id)); st != http.StatusTooManyRequests {
			t.Fatalf("guess past the key's limit from a new address: status %d, want 429", st)
		}
		if st := from("203.0.113.2", real); st != http.StatusOK {
			t.Fatalf("the key's holder under its key id's block: status %d, want 200", st)
		}
	})

	t.Run("a key's holder passes its key id's block on a replica it has not called", func(t *testing.T) {
		t.Parallel()
		l := throttle.Limits{Window: time.Minute, PerAddress: 100, PerKey: 3}
		s := limitedServer(t, l, "127.0.0.1")
		// A second replica on the same database, called directly: the holder never calls
		// it before its key id is blocked.
		cfg := testConfig(t, s.dbURL)
		cfg.AuthFailures, cfg.TrustedProxies = l, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		base, stop := startOne(t, cfg, s.logs)
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Errorf("stop the second replica: %v", err)
			}
		})
		other := &server{dbURL: s.dbURL, base: base, logs: s.logs, res: s.res, stop: stop}
		real := s.key("acme/architect")
		id := real[len(auth.AgentKeyPrefix) : len(auth.AgentKeyPrefix)+8]
		from := func(via *server, addr string, key string) int {
			st, _, _ := callWith(t, http.DefaultClient, via.threadsURL("escalations", "architect"),
				http.Header{"X-Agent-Key": {key}, "X-Forwarded-For": {addr}})
			return st
		}
		if st := from(s, "203.0.113.1", real); st != http.StatusOK {
			t.Fatalf("holder through the first replica: status %d", st)
		}
		for i := 0; i < 3; i++ {
			if st := from(s, "198.51.100."+strconv.Itoa(i+1), wrongKey(t, id)); st != http.StatusUnauthorized {
				t.Fatalf("guess %d: status %d, want 401", i+1, st)
			}
		}
		if st := from(other, "198.51.100.9", wrongKey(t, id)); st != http.StatusTooManyRequests {
			t.Fatalf("guess past the key's limit through the second replica: status %d, want 429", st)
		}
		if st := from(other, "203.0.113.2", real); st != http.StatusOK {
			t.Fatalf("the key's holder through the second replica, under its key id's block: status %d, want 200", st)
		}
	})

	t.Run("requests without a credential are not counted", func(t *testing.T) {
		t.Parallel()
		s := limitedServer(t, throttle.Limits{Window: time.Minute, PerAddress: 2, PerKey: 2}, "")
		for i := 0; i < 10; i++ {
			if st, _, _ := callWith(t, http.DefaultClient, s.threadsURL("escalations", "architect"), nil); st != http.StatusUnauthorized {
				t.Fatalf("request %d without a key: status %d, want 401", i+1, st)
			}
		}
	})
}

// TestRefusalsAreLoggedOncePerAddress floods wrong keys from one address and reads the
// log: one full line for the first refusal, one count for the rest, and the normal request
// lines of everyone else untouched.
func TestRefusalsAreLoggedOncePerAddress(t *testing.T) {
	t.Parallel()
	skipThroughBalancer(t, "a refusal is logged in full once per address per process, so once per replica")
	s := limitedServer(t, throttle.Limits{Window: time.Minute, PerAddress: 5, PerKey: 100}, "")
	url, attacker := s.threadsURL("escalations", "architect"), clientFrom("127.0.0.31")
	const flood = 40
	for i := 0; i < flood; i++ {
		callWith(t, attacker, url, http.Header{"X-Agent-Key": {wrongKey(t, "")}})
	}
	for i := 0; i < 3; i++ {
		if st, _, _ := callWith(t, clientFrom("127.0.0.32"), url, http.Header{"X-Agent-Key": {s.key("acme/architect")}}); st != http.StatusOK {
			t.Fatalf("legitimate call: status %d", st)
		}
	}
	if err := s.stop(); err != nil { // the summary of the interval is written on shutdown
		t.Fatal(err)
	}
	var full, ok, counted int
	sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		switch line["msg"] {
		case "request":
			switch st, _ := line["status"].(float64); st {
			case 401, 429:
				if line["address"] != "127.0.0.31" {
					t.Errorf("a refusal logged without its address: %v", line)
				}
				full++
			case 200:
				ok++
			}
		case "requests refused":
			if line["address"] == "127.0.0.31" {
				n, _ := line["count"].(float64)
				counted += int(n)
			}
		}
	}
	if full != 1 || counted != flood-1 {
		t.Fatalf("%d refusals logged as %d full lines and a count of %d; want 1 and %d", flood, full, counted, flood-1)
	}
	if ok != 3 {
		t.Fatalf("%d of 3 legitimate calls logged", ok)
	}
}
