package testfix

import (
	"context"
	"fmt"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

// Stmt is one SQL statement of a seeding and its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// Exec is Bundle.Exec on a database of the test's own seeding: one statement run as the
// operator, failing the test on error.
func Exec(t testing.TB, d *pg.DB, sql string, args ...any) {
	t.Helper()
	OpAll(t, d, Stmt{SQL: sql, Args: args})
}

// OpAll runs stmts in order in one operator transaction (the owner, outside any tenant),
// so a seeding lands whole or not at all; the test fails at the first error. The service's
// statement timeout is lifted: a seeding is not a request under test, and a 10,000-row
// seed outlasted the timeout on a machine at a load average of 30.
func OpAll(t testing.TB, d *pg.DB, stmts ...Stmt) {
	t.Helper()
	ctx := context.Background()
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return fmt.Errorf("lift the statement timeout for a seed: %w", err)
		}
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st.SQL, st.Args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
