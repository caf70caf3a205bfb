package pg_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

func TestUUIDs(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	ctx := context.Background()
	a, b := uuid.New(), uuid.New()

	t.Run("ids travel both ways unchanged, NULL included", func(t *testing.T) {
		t.Parallel()
		var (
			gotA, gotFromPtr    uuid.UUID
			gotNil, gotNull     *uuid.UUID
			gotPtr              *uuid.UUID
			gotList, gotNilList []uuid.UUID
			textA, textList     string
			keepsOnNull         = b
			nilPtr              *uuid.UUID
			emptyList           []uuid.UUID
		)
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			return tx.QueryRow(ctx, `SELECT $1::uuid, $2::uuid, $3::uuid, $2::uuid, $4::uuid[], $5::uuid[], $1::uuid::text, $4::uuid[]::text, NULL::uuid, NULL::uuid`,
				a, &b, nilPtr, []uuid.UUID{a, b}, emptyList).
				Scan(&gotA, &gotFromPtr, &gotNil, &gotPtr, &gotList, &gotNilList, &textA, &textList, &gotNull, &keepsOnNull)
		})
		if err != nil {
			t.Fatal(err)
		}
		if gotA != a || gotFromPtr != b || gotNil != nil || gotPtr == nil || *gotPtr != b {
			t.Errorf("scalars: %v %v %v %v, want %v %v nil &%v", gotA, gotFromPtr, gotNil, gotPtr, a, b, b)
		}
		if len(gotList) != 2 || gotList[0] != a || gotList[1] != b || gotNilList != nil {
			t.Errorf("lists: %v %v, want [%v %v] and nil", gotList, gotNilList, a, b)
		}
		if textA != a.String() || textList != "{"+a.String()+","+b.String()+"}" {
			t.Errorf("as the server reads them: %s %s", textA, textList)
		}
		// uuid.UUID.Scan(nil) left its target as it was; so does the codec.
		if gotNull != nil || keepsOnNull != b {
			t.Errorf("NULL: %v into *uuid.UUID, %v into uuid.UUID (want nil, %v)", gotNull, keepsOnNull, b)
		}
	})

	t.Run("the text format writes and reads the canonical form", func(t *testing.T) {
		t.Parallel()
		m := pgtype.NewMap()
		pg.RegisterUUIDForTest(m)
		buf, err := m.Encode(pgtype.UUIDOID, pgtype.TextFormatCode, a, nil)
		if err != nil || string(buf) != a.String() {
			t.Fatalf("text %q, %v; want %s", buf, err, a)
		}
		var back uuid.UUID
		if err := m.Scan(pgtype.UUIDOID, pgtype.TextFormatCode, buf, &back); err != nil || back != a {
			t.Fatalf("scanned %v, %v; want %v", back, err, a)
		}
	})
}

// TestUUIDArgumentsDoNotAllocate runs alone: testing.AllocsPerRun refuses a parallel test.
// Before the codec, each uuid argument was formatted as text, refused by the binary
// encoder with an error built by fmt, scanned back and encoded again: ~10 allocations an
// id, a tenth of the server's CPU on a read tool's call.
func TestUUIDArgumentsDoNotAllocate(t *testing.T) {
	d, _ := pgtest.Open(t)
	ctx := context.Background()
	a := uuid.New()
	c, err := d.App.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	m := c.Conn().TypeMap()
	buf := make([]byte, 0, 64)
	for _, v := range []any{a, &a} {
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 0 {
			t.Errorf("encoding a %T allocates %v times", v, allocs)
		}
	}
	var out uuid.UUID
	src := a[:]
	if allocs := testing.AllocsPerRun(50, func() {
		if err := m.Scan(pgtype.UUIDOID, pgtype.BinaryFormatCode, src, &out); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0 || out != a {
		t.Errorf("scanning a uuid allocates %v times (got %v)", allocs, out)
	}
}
