package pg

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUIDEncoding has pgx send a uuid.UUID as the 16 bytes it is. Without it pgx
// finds uuid.UUID's driver.Valuer, formats the id as text and parses the text back
// before encoding it: a tenth of the server's CPU under the write tools (their rows and
// arrays carry many ids), measured with pprof (docs/performance.md, "Writes").
func registerUUIDEncoding(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUIDEncodePlan}, m.TryWrapEncodePlanFuncs...)
}

// tryWrapUUIDEncodePlan offers a uuid.UUID to the next plan as a pgtype.UUID (a
// UUIDValuer, which the uuid codec encodes directly). For a parameter that is not a uuid
// the next plan is not found, and pgx goes on to its other ways (the driver.Valuer's text).
func tryWrapUUIDEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &wrapUUIDEncodePlan{}, pgtype.UUID{Bytes: u, Valid: true}, true
	}
	return nil, nil, false
}

type wrapUUIDEncodePlan struct{ next pgtype.EncodePlan }

func (p *wrapUUIDEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *wrapUUIDEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(pgtype.UUID{Bytes: value.(uuid.UUID), Valid: true}, buf)
}
