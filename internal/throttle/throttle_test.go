package throttle_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/throttle"
)

// clock is a settable time for the in-memory side (the database keeps its own now()).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newThrottle(d *pg.DB, l throttle.Limits, c *clock) *throttle.Throttle {
	var now func() time.Time
	if c != nil {
		now = c.now
	}
	return throttle.New(d, l, slog.New(slog.DiscardHandler), now)
}

// freshThrottle is a throttle of limits l (on clock c; nil: the real one) on a fresh
// database.
func freshThrottle(t *testing.T, l throttle.Limits, c *clock) (*pg.DB, *throttle.Throttle) {
	t.Helper()
	d, _ := pgtest.Open(t)
	return d, newThrottle(d, l, c)
}

// admittedCounting fails unless at is admitted and its address counts want failures.
func admittedCounting(t *testing.T, th *throttle.Throttle, d *pg.DB, at throttle.Attempt, want int, when string) {
	t.Helper()
	if err := th.Admit(context.Background(), at); err != nil {
		t.Fatalf("%s: refused: %v", when, err)
	}
	if n := failures(t, d, "addr:"+at.Address); n != want {
		t.Fatalf("%s: %d failures counted, want %d", when, n, want)
	}
}

// retryAfter returns the refusal's Retry-After seconds, failing unless err is a 429.
func retryAfter(t *testing.T, err error) int {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.RateLimited {
		t.Fatalf("want a rate_limited refusal, got %v", err)
	}
	secs, _ := e.Details["retry_after_seconds"].(int)
	if secs < 1 {
		t.Fatalf("retry_after_seconds = %v", e.Details["retry_after_seconds"])
	}
	return secs
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refuse := func(th *throttle.Throttle, at throttle.Attempt, n int) {
		for i := 0; i < n; i++ {
			th.Refused(ctx, at)
		}
	}
	abandon := func(th *throttle.Throttle, at throttle.Attempt, n int) {
		for i := 0; i < n; i++ {
			th.Abandoned(ctx, at)
		}
	}
	limits := throttle.Limits{Window: time.Minute, PerAddress: 3, PerKey: 2}

	t.Run("an address over its limit is refused with no database at all", func(t *testing.T) {
		t.Parallel()
		d, th := freshThrottle(t, limits, nil)
		at := throttle.Attempt{Address: "192.0.2.1"}
		for i := 0; i < limits.PerAddress; i++ {
			if err := th.Admit(ctx, at); err != nil {
				t.Fatalf("attempt %d refused before the limit: %v", i+1, err)
			}
			th.Refused(ctx, at)
		}
		d.Close() // from here on, any database work would fail
		if secs := retryAfter(t, th.Admit(ctx, at)); secs > 60 {
			t.Fatalf("Retry-After %d is past the window", secs)
		}
		if err := th.Admit(ctx, throttle.Attempt{Address: "192.0.2.2"}); err != nil {
			t.Fatalf("another address was refused: %v", err)
		}
	})

	t.Run("replicas share the count", func(t *testing.T) {
		t.Parallel()
		d, _ := pgtest.Open(t)
		a, b := newThrottle(d, limits, nil), newThrottle(d, limits, nil)
		at := throttle.Attempt{Address: "192.0.2.3", Credential: "a-guess"}
		a.Refused(ctx, at)
		a.Refused(ctx, at)
		if err := b.Admit(ctx, at); err != nil {
			t.Fatalf("refused before the limit: %v", err)
		}
		b.Refused(ctx, at) // the third across both replicas
		retryAfter(t, b.Admit(ctx, at))
		// Replica a has counted nothing since: it reads the block before checking anything.
		retryAfter(t, a.Admit(ctx, at))
	})

	t.Run("three replicas round robin check no more guesses than the limit", func(t *testing.T) {
		t.Parallel()
		d, _ := pgtest.Open(t)
		replicas := []*throttle.Throttle{newThrottle(d, limits, nil), newThrottle(d, limits, nil), newThrottle(d, limits, nil)}
		for _, tc := range []struct {
			name  string
			at    func(i int) throttle.Attempt
			limit int
		}{
			{"one address", func(i int) throttle.Attempt {
				return throttle.Attempt{Address: "192.0.2.4", Credential: fmt.Sprint("guess-", i)}
			}, limits.PerAddress},
			{"one key id from many addresses", func(i int) throttle.Attempt {
				return throttle.Attempt{Address: fmt.Sprint("192.0.2.", 100+i), KeyID: "KeyId009", Credential: fmt.Sprint("guess-", i)}
			}, limits.PerKey},
			{"registrations, with no credential", func(int) throttle.Attempt {
				return throttle.Attempt{Address: "register/192.0.2.5", Always: true}
			}, limits.PerAddress},
		} {
			t.Run(tc.name, func(t *testing.T) {
				checked := 0
				for i := range 4 * tc.limit {
					th := replicas[i%len(replicas)] // the balancer's round robin
					if err := th.Admit(ctx, tc.at(i)); err != nil {
						retryAfter(t, err)
						continue
					}
					checked++
					th.Refused(ctx, tc.at(i))
				}
				if checked != tc.limit {
					t.Fatalf("%d attempts were checked through 3 replicas, want the limit %d", checked, tc.limit)
				}
			})
		}
	})

	t.Run("a known credential reads nothing, an unknown one reads the shared count", func(t *testing.T) {
		t.Parallel()
		d, _ := pgtest.Open(t)
		var logged bytes.Buffer
		th := throttle.New(d, limits, slog.New(slog.NewTextHandler(&logged, nil)), nil)
		known := throttle.Attempt{Address: "192.0.2.6", Credential: "good"}
		th.Verified(ctx, known)
		d.Close() // any database work from here on fails, and the failure is logged
		if err := th.Admit(ctx, known); err != nil {
			t.Fatalf("a verified credential was refused: %v", err)
		}
		if err := th.Admit(ctx, throttle.Attempt{Address: "192.0.2.6"}); err != nil {
			t.Fatalf("a request with no credential was refused: %v", err)
		}
		if logged.Len() != 0 {
			t.Fatalf("a known credential or none touched the database: %s", logged.String())
		}
		// The read fails on the closed pool and admits: the credential check that follows
		// needs the same database.
		if err := th.Admit(ctx, throttle.Attempt{Address: "192.0.2.6", Credential: "unknown"}); err != nil {
			t.Fatalf("a failed read refused: %v", err)
		}
		if !strings.Contains(logged.String(), "read the shared counts") {
			t.Fatalf("an unknown credential did not read the shared count: %q", logged.String())
		}
	})

	t.Run("a key id is limited across addresses", func(t *testing.T) {
		t.Parallel()
		_, th := freshThrottle(t, limits, nil)
		th.Refused(ctx, throttle.Attempt{Address: "192.0.2.10", KeyID: "KeyId001", Credential: "guess-1"})
		th.Refused(ctx, throttle.Attempt{Address: "192.0.2.11", KeyID: "KeyId001", Credential: "guess-2"})
		retryAfter(t, th.Admit(ctx, throttle.Attempt{Address: "192.0.2.12", KeyID: "KeyId001", Credential: "guess-3"}))
		if err := th.Admit(ctx, throttle.Attempt{Address: "192.0.2.12", KeyID: "KeyId002"}); err != nil {
			t.Fatalf("another key id was refused: %v", err)
		}
	})

	t.Run("the key's own holder passes its key id's block, not its address's", func(t *testing.T) {
		t.Parallel()
		_, th := freshThrottle(t, limits, nil)
		holder := throttle.Attempt{Address: "192.0.2.20", KeyID: "KeyId003", Credential: "the-real-key"}
		th.Verified(ctx, holder)
		refuse(th, throttle.Attempt{Address: "192.0.2.21", KeyID: "KeyId003", Credential: "a-guess"}, limits.PerAddress) // blocks the key id, then the address
		retryAfter(t, th.Admit(ctx, throttle.Attempt{Address: "192.0.2.22", KeyID: "KeyId003", Credential: "another-guess"}))
		if err := th.Admit(ctx, holder); err != nil {
			t.Fatalf("the verified holder was refused: %v", err)
		}
		retryAfter(t, th.Admit(ctx, throttle.Attempt{Address: "192.0.2.21", KeyID: "KeyId003", Credential: "the-real-key"}))
	})

	t.Run("an agent key verified on one replica passes its key id's block on another; a password does not", func(t *testing.T) {
		t.Parallel()
		d, first := freshThrottle(t, limits, nil)
		second := newThrottle(d, limits, nil) // another replica on the same database
		holder := throttle.Attempt{Address: "192.0.2.50", KeyID: "KeyId009", Credential: "the-real-key", Random: true}
		first.Verified(ctx, holder)
		password := throttle.Attempt{Address: "192.0.2.51", KeyID: "account-1", Credential: "login-password"}
		first.Verified(ctx, password)
		for _, key := range []string{"KeyId009", "account-1"} {
			refuse(first, throttle.Attempt{Address: "192.0.2.52", KeyID: key, Credential: "a-guess"}, limits.PerKey)
		}
		retryAfter(t, second.Admit(ctx, throttle.Attempt{Address: "192.0.2.53", KeyID: "KeyId009", Credential: "another-guess"}))
		if err := second.Admit(ctx, holder); err != nil {
			t.Fatalf("the holder verified on the first replica was refused on the second: %v", err)
		}
		retryAfter(t, second.Admit(ctx, password))
		if err := first.Admit(ctx, password); err != nil {
			t.Fatalf("the password verified on the first replica lost its pass there: %v", err)
		}
		if stored := testfix.Scalar[int](t, d, "SELECT count(*) FROM auth_verified"); stored != 1 {
			t.Fatalf("%d verified credentials stored, want 1 (the agent key's; never a password's)", stored)
		}
	})

	t.Run("a credential refused after it was verified loses its pass", func(t *testing.T) {
		t.Parallel()
		_, th := freshThrottle(t, limits, nil)
		at := throttle.Attempt{Address: "192.0.2.30", KeyID: "KeyId004", Credential: "revoked-key"}
		th.Verified(ctx, at)
		refuse(th, throttle.Attempt{Address: "192.0.2.31", KeyID: "KeyId004", Credential: "revoked-key"}, limits.PerKey)
		retryAfter(t, th.Admit(ctx, at))
	})

	t.Run("hanging up counts, unless the credential is known", func(t *testing.T) {
		t.Parallel()
		_, th := freshThrottle(t, limits, nil)
		known := throttle.Attempt{Address: "192.0.2.80", KeyID: "KeyId007", Credential: "good"}
		th.Verified(ctx, known)
		abandon(th, known, 2*limits.PerAddress)
		if err := th.Admit(ctx, known); err != nil {
			t.Fatalf("a known client that cancels its calls was refused: %v", err)
		}
		unknown := throttle.Attempt{Address: "192.0.2.81", KeyID: "KeyId008", Credential: "guess"}
		abandon(th, unknown, limits.PerAddress)
		retryAfter(t, th.Admit(ctx, unknown))
	})

	t.Run("a block ends with its window", func(t *testing.T) {
		t.Parallel()
		d, _ := pgtest.Open(t)
		c := &clock{t: time.Now()}
		th := newThrottle(d, limits, c)
		at := throttle.Attempt{Address: "192.0.2.40"}
		refuse(th, at, limits.PerAddress)
		secs := retryAfter(t, th.Admit(ctx, at))
		c.add(time.Duration(secs) * time.Second)
		if err := th.Admit(ctx, at); err != nil {
			t.Fatalf("still refused after Retry-After: %v", err)
		}
		// The stored window ends too: the next refusal starts a new count at 1.
		endWindow(t, d, "addr:192.0.2.40")
		th.Refused(ctx, at)
		admittedCounting(t, th, d, at, 1, "a new window")
	})

	t.Run("a blocked caller waits for its refusal until it hangs up", func(t *testing.T) {
		t.Parallel()
		d, _ := pgtest.Open(t)
		slow := limits
		slow.BlockedDelay = time.Hour // longer than any test: only hanging up ends the wait
		th := newThrottle(d, slow, nil)
		at := throttle.Attempt{Address: "192.0.2.90"}
		if err := th.Admit(ctx, at); err != nil {
			t.Fatalf("refused before any failure: %v", err) // and not delayed: it would hang here
		}
		refuse(th, at, slow.PerAddress)
		gone, cancel := context.WithCancel(ctx)
		refused := make(chan error, 1)
		go func() { refused <- th.Admit(gone, at) }()
		cancel()
		retryAfter(t, <-refused)
	})

	t.Run("a limit of zero counts nothing", func(t *testing.T) {
		t.Parallel()
		d, th := freshThrottle(t, throttle.Limits{Window: time.Minute}, nil)
		at := throttle.Attempt{Address: "192.0.2.50", KeyID: "KeyId005", Credential: "x"}
		refuse(th, at, 5)
		admittedCounting(t, th, d, at, 0, "with the limits off")
	})

	t.Run("prune deletes ended windows only", func(t *testing.T) {
		t.Parallel()
		d, th := freshThrottle(t, limits, nil)
		th.Refused(ctx, throttle.Attempt{Address: "192.0.2.60"})
		th.Refused(ctx, throttle.Attempt{Address: "192.0.2.61"})
		endWindow(t, d, "addr:192.0.2.60")
		n, err := th.Prune(ctx)
		if err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1", n, err)
		}
		if failures(t, d, "addr:192.0.2.61") != 1 {
			t.Fatal("prune deleted a live window")
		}
	})

	t.Run("the request role sees only the subjects it names", func(t *testing.T) {
		t.Parallel()
		d, th := freshThrottle(t, limits, nil)
		th.Refused(ctx, throttle.Attempt{Address: "192.0.2.70", KeyID: "KeyId006", Credential: "x"})
		for lookup, want := range map[string]int{"": 0, "addr:192.0.2.70": 1, "key:KeyId006,addr:192.0.2.70": 2, "KeyId006": 0} {
			var n int
			err := d.InTenant(ctx, pg.Tenant{Lookup: lookup}, func(tx *pg.Tx) error {
				return tx.QueryRow(ctx, "SELECT count(*) FROM auth_throttle").Scan(&n)
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("lookup %q shows %d rows, want %d", lookup, n, want)
			}
		}
	})
}

// endWindow moves a subject's window into the past, as the owner.
func endWindow(t *testing.T, d *pg.DB, subject string) {
	t.Helper()
	testfix.Exec(t, d, "UPDATE auth_throttle SET window_start = now() - interval '1 hour' WHERE subject = $1", subject)
}

func failures(t *testing.T, d *pg.DB, subject string) int {
	t.Helper()
	return testfix.Scalar[int](t, d, "SELECT coalesce(sum(failures), 0) FROM auth_throttle WHERE subject = $1", subject)
}

func TestClientAddress(t *testing.T) {
	t.Parallel()
	proxies, err := throttle.ParseProxies("10.0.0.0/8, 192.0.2.9 ,2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, remote, xff string
		trusted           []netip.Prefix
		want              string
	}{
		{"the TCP peer by default", "198.51.100.7:5000", "", nil, "198.51.100.7"},
		{"X-Forwarded-For ignored when no proxy is trusted", "198.51.100.7:5000", "203.0.113.1", nil, "198.51.100.7"},
		{"X-Forwarded-For ignored from an untrusted peer", "198.51.100.7:5000", "203.0.113.1", proxies, "198.51.100.7"},
		{"the client a trusted proxy names", "10.1.2.3:5000", "203.0.113.1", proxies, "203.0.113.1"},
		{"the nearest untrusted hop, not what the client wrote", "10.1.2.3:5000", "1.1.1.1, 203.0.113.1, 10.9.9.9", proxies, "203.0.113.1"},
		{"a malformed hop stops the walk", "10.1.2.3:5000", "203.0.113.1, bogus", proxies, "10.1.2.3"},
		{"only trusted hops: the farthest", "192.0.2.9:1", "10.0.0.1", proxies, "10.0.0.1"},
		{"IPv6 counted per /64", "[2001:db8:1:2:3:4:5:6]:443", "", nil, "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:198.51.100.7]:443", "", nil, "198.51.100.7"},
		{"unreadable peer", "pipe", "", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
			if c.xff != "" {
				r.Header.Set("X-Forwarded-For", c.xff)
			}
			if got := throttle.ClientAddress(r, c.trusted); got != c.want {
				t.Fatalf("ClientAddress = %q, want %q", got, c.want)
			}
		})
	}
	if _, err := throttle.ParseProxies("10.0.0.0/33"); err == nil {
		t.Fatal("a bad prefix was accepted")
	}
}
