package chaos

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/loadtest"
)

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := WriteTable(&b, []Finding{
		{Attack: "(a) slow clients", Did: "300 connections", Measured: "0 of 300 open", Target: "all closed", Held: true},
		{Attack: "(b) big bodies", Did: "200 posts", Measured: "answers 200 × 401 | peak 1 GB\nafter", Target: "peak < 128 MB"},
		{Attack: "(c) flood", Skipped: "127.0.0.2 not bindable"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Run("a held attack says yes", func(t *testing.T) {
		if !strings.Contains(out, "| (a) slow clients | 300 connections | 0 of 300 open | all closed | yes |") {
			t.Fatal(out)
		}
	})
	t.Run("pipes and newlines in a cell keep the row on one line", func(t *testing.T) {
		if !strings.Contains(out, "| answers 200 × 401 \\| peak 1 GB after | peak < 128 MB | no |") {
			t.Fatal(out)
		}
	})
	t.Run("a skipped attack says why", func(t *testing.T) {
		if !strings.Contains(out, "| skipped: 127.0.0.2 not bindable |") {
			t.Fatal(out)
		}
	})
	t.Run("one header, one separator and one line per finding", func(t *testing.T) {
		if n := strings.Count(out, "\n"); n != 5 {
			t.Fatalf("%d lines:\n%s", n, out)
		}
	})
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"success", nil, "ok"},
		{"a JSON-RPC error with Retry-After", &loadtest.CallError{Status: 503, Code: -32603, Msg: "the database is unavailable; retry shortly", RetryAfter: "1"},
			"HTTP 503 -32603 “the database is unavailable; retry shortly” Retry-After 1"},
		{"a tool error keeps its first six words", &loadtest.CallError{Status: 200, Msg: "Error: one two three four five six seven"},
			"HTTP 200 “Error: one two three four five …”"},
		{"a wrapped call error is still read", fmt.Errorf("call: %w", &loadtest.CallError{Status: 429}), "HTTP 429"},
		{"anything else is a transport error", errors.New("connection reset by peer"), "transport error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := describe(c.err); got != c.want {
				t.Fatalf("describe = %q, want %q", got, c.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	t.Run("an answer that is an error is refused, not retried", func(t *testing.T) {
		t.Parallel()
		if s, _ := classify(&loadtest.CallError{Status: 409}); s != refused {
			t.Fatalf("state %v", s)
		}
	})
	t.Run("no answer at all is unanswered, to retry", func(t *testing.T) {
		t.Parallel()
		if s, _ := classify(errors.New("EOF")); s != unanswered {
			t.Fatalf("state %v", s)
		}
	})
	t.Run("a balancer's gateway error is an answer lost, to retry", func(t *testing.T) {
		t.Parallel()
		for _, status := range []int{502, 503, 504} {
			if s, _ := classify(&loadtest.CallError{Status: status, Msg: "<html><body><h1>502 Bad Gateway</h1>"}); s != unanswered {
				t.Fatalf("HTTP %d from HAProxy: state %v", status, s)
			}
		}
	})
	t.Run("the server's own 503 is an answer", func(t *testing.T) {
		t.Parallel()
		if s, _ := classify(&loadtest.CallError{Status: 503, Code: -32603, Msg: "the database is unavailable; retry shortly"}); s != refused {
			t.Fatalf("state %v", s)
		}
	})
	t.Run("success is acknowledged", func(t *testing.T) {
		t.Parallel()
		if s, _ := classify(nil); s != acked {
			t.Fatalf("state %v", s)
		}
	})
}

func TestCounts(t *testing.T) {
	t.Parallel()
	t.Run("largest first, then by name", func(t *testing.T) {
		t.Parallel()
		if got := counts(map[string]int{"b": 2, "a": 2, "c": 5}); got != "5 × c, 2 × a, 2 × b" {
			t.Fatal(got)
		}
	})
	t.Run("empty says none", func(t *testing.T) {
		t.Parallel()
		if got := counts(nil); got != "none" {
			t.Fatal(got)
		}
	})
}

func TestEveryWriteToolHasItsTable(t *testing.T) {
	t.Parallel()
	env, err := loadtest.NewEnv(nil, "http://127.0.0.1:1", fixtureWithParts())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range writeTools(env) {
		if _, ok := storedIn[w.Name]; !ok {
			t.Errorf("write tool %q has no table to count its markers in", w.Name)
		}
	}
}

// fixtureWithParts is a fixture with the parts the load calls use and made-up keys: enough
// to build calls without a database.
func fixtureWithParts() loadtest.Fixture {
	res := admin.Result{
		Organisations: map[string]admin.ID{loadtest.HostOrg: {}},
		Agents:        map[string]admin.AgentOut{},
		Projects:      map[string]admin.ProjectOut{"p": {}},
	}
	parts := map[string]string{}
	for _, p := range []string{loadtest.CallerPart, loadtest.RecipientPart, loadtest.GuestPart} {
		parts[p] = "org/" + p
		res.Agents["org/"+p] = admin.AgentOut{Key: "key-of-" + p}
	}
	return loadtest.Fixture{Result: res, Project: "p", PartAgents: parts}
}
