package pg

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidCodec is pgx's uuid codec taught github.com/google/uuid.UUID, the id type of every
// query. pgx knows that type only as a driver.Valuer and a sql.Scanner: each uuid argument
// was turned into its 36-character text, refused by the binary encoder (an error built
// with fmt, %#v of the 16 bytes), then scanned back and encoded again; each uuid column
// was formatted as text and parsed back by uuid.UUID.Scan. A read tool passes and scans
// dozens of ids a call, and that was a tenth of the server's CPU under load
// (docs/performance.md, "Read tools: ids, show's round trips, previews"). The bytes on
// the wire are the same (binary uuid), and every other type goes to pgx's own codec.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(*uuid.UUID); ok {
		// A nil pointer never gets here: Map.Encode sends NULL for it first.
		if format == pgtype.BinaryFormatCode {
			return encodeUUIDBinary{}
		}
		if next := c.PlanEncode(m, oid, format, uuid.UUID{}); next != nil {
			return encodeUUIDPointer{next: next}
		}
	}
	if _, ok := value.(uuid.UUID); ok {
		if format == pgtype.BinaryFormatCode {
			return encodeUUIDBinary{}
		}
		// Text: pgx's own plan for its UUID type writes the same canonical form.
		if next := c.UUIDCodec.PlanEncode(m, oid, format, pgtype.UUID{}); next != nil {
			return encodeUUIDVia{next: next}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		if format == pgtype.BinaryFormatCode {
			return scanUUIDBinary{}
		}
		if next := c.UUIDCodec.PlanScan(m, oid, format, &pgtype.UUID{}); next != nil {
			return scanUUIDVia{next: next}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	if p, ok := value.(*uuid.UUID); ok {
		return append(buf, p[:]...), nil
	}
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type encodeUUIDPointer struct{ next pgtype.EncodePlan }

func (p encodeUUIDPointer) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(*value.(*uuid.UUID), buf)
}

type encodeUUIDVia struct{ next pgtype.EncodePlan }

func (p encodeUUIDVia) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(pgtype.UUID{Bytes: value.(uuid.UUID), Valid: true}, buf)
}

// NULL leaves the target as it was, as uuid.UUID.Scan(nil) did: nullable columns are
// scanned into *uuid.UUID fields (pgx sets those to nil before this plan runs).
type scanUUIDBinary struct{}

func (scanUUIDBinary) Scan(src []byte, dst any) error {
	if src == nil {
		return nil
	}
	if len(src) != len(uuid.UUID{}) {
		return fmt.Errorf("pg: a binary uuid of %d bytes", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}

type scanUUIDVia struct{ next pgtype.ScanPlan }

func (p scanUUIDVia) Scan(src []byte, dst any) error {
	if src == nil {
		return nil
	}
	var v pgtype.UUID
	if err := p.next.Scan(src, &v); err != nil {
		return err
	}
	*dst.(*uuid.UUID) = v.Bytes
	return nil
}

// registerUUID puts uuidCodec behind the uuid type and the element of uuid[] (whose codec
// holds its element type, so it is registered again with the new one).
func registerUUID(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}
