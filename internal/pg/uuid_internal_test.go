package pg

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// BenchmarkUUIDArrayEncoding encodes a 32-id uuid[] parameter as pgx does for a write's
// statement: through uuid.UUID's driver.Valuer (pgx's default) and as 16 bytes
// (registerUUID).
func BenchmarkUUIDArrayEncoding(b *testing.B) {
	ids := make([]uuid.UUID, 32)
	for i := range ids {
		ids[i] = uuid.New()
	}
	for _, c := range []struct {
		name     string
		register bool
	}{{"driver.Valuer", false}, {"binary", true}} {
		b.Run(c.name, func(b *testing.B) {
			m := pgtype.NewMap()
			if c.register {
				registerUUID(m)
			}
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
