package testfix

import (
	"context"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

// Stmt is one SQL statement of a seeding and its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// OpAll runs stmts in order in one operator transaction (the owner, outside any tenant),
// so a seeding lands whole or not at all; the test fails at the first error.
func OpAll(t testing.TB, d *pg.DB, stmts ...Stmt) {
	t.Helper()
	ctx := context.Background()
	err := d.Operator(ctx, func(tx *pg.Tx) error {
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
