package pg_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestUUIDParameters checks the binary encoding of uuid.UUID parameters (pg's
// registerUUID) wherever the statements pass them: a uuid, a uuid array, and a
// parameter of another type, which still gets the id's text.
func TestUUIDParameters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := pgtest.Open(t)
	a, b := uuid.New(), uuid.New()
	var one, text string
	var many []uuid.UUID
	var back uuid.UUID
	err := d.Operator(ctx, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, "SELECT $1::uuid::text, $2::uuid[], $3::text, $1::uuid", a, []uuid.UUID{a, b}, b).Scan(&one, &many, &text, &back)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a uuid parameter is the id", func(t *testing.T) {
		if one != a.String() || back != a {
			t.Fatalf("got %s and %s, want %s", one, back, a)
		}
	})
	t.Run("a uuid array parameter holds the ids in order", func(t *testing.T) {
		if len(many) != 2 || many[0] != a || many[1] != b {
			t.Fatalf("got %v, want [%s %s]", many, a, b)
		}
	})
	t.Run("a text parameter gets the id's text", func(t *testing.T) {
		if text != b.String() {
			t.Fatalf("got %q, want %q", text, b)
		}
	})
}
