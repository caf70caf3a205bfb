package testfix

import (
	"os"
	"testing"
	"time"
)

// StatementTimeoutEnv gives the test servers' database time per request
// (config.StatementTimeout; 5 s unset). A Citus coordinator pays more round trips per
// request than plain PostgreSQL (docs/scale.md), and on a loaded machine 5 s is spent
// before a request is refused: a longer budget tells the machine's load from a refusal.
// make test-citus sets it. A test that is about the deadline sets its own.
const StatementTimeoutEnv = "RELAYROOM_TEST_STATEMENT_TIMEOUT"

// StatementTimeout is the database budget a test server is given: StatementTimeoutEnv,
// or 5 s.
func StatementTimeout(t testing.TB) time.Duration {
	t.Helper()
	v := os.Getenv(StatementTimeoutEnv)
	if v == "" {
		return 5 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", StatementTimeoutEnv, v)
	}
	return d
}
