package desk

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
)

// CSV import from the dashboard: a preview first (nothing written), then the import, with
// exactly the checks and the writing of `relayroom admin desk import` (ImportCSV).

// PreviewRow is a good row of a file as the preview shows it.
type PreviewRow struct {
	Line          int
	CustomerEmail string
	Subject       string
	Status        string
	CreatedAt     time.Time
}

// ImportPreview is what importing a file would do, before anything is written.
type ImportPreview struct {
	// Rows are the first ImportPreviewRows good rows; Good counts them all (a row
	// repeated in the file counts once, as the import stores it once).
	Rows []PreviewRow
	Good int
	// Problems are every bad row, by line: with any, the import writes nothing.
	Problems []RowProblem
}

// tooLarge is the problem of a file over MaxImportBytes.
func tooLarge() *ImportError {
	return &ImportError{Problems: []RowProblem{{Line: 0, Reason: fmt.Sprintf("the file is larger than %d MB", MaxImportBytes>>20)}}}
}

// PreviewCSV checks a file as ImportCSV does, writing nothing. An error is only a file
// that could not be read at all; a bad row is in Problems.
func PreviewCSV(file []byte, now time.Time) (ImportPreview, error) {
	if len(file) > MaxImportBytes {
		return ImportPreview{Problems: tooLarge().Problems}, nil
	}
	rows, err := parseImport(file, now)
	var bad *ImportError
	if err != nil && !errors.As(err, &bad) {
		return ImportPreview{}, err
	}
	p := ImportPreview{Good: len(rows)}
	if bad != nil {
		p.Problems = bad.Problems
	}
	for _, r := range rows[:min(len(rows), ImportPreviewRows)] {
		c := r.conv
		p.Rows = append(p.Rows, PreviewRow{Line: r.line, CustomerEmail: c.CustomerEmail, Subject: c.Subject, Status: c.Status, CreatedAt: c.CreatedAt})
	}
	return p, nil
}

// ImportAs imports a file into an inbox (its public id) for a person: owners and admins
// only; an inbox of another workspace, or none, is NotFound. The checks and the chunks are
// ImportCSV's: any bad row is an *ImportError and nothing is written; a row imported
// before creates nothing. Each chunk that creates conversations records, in its own
// transaction, an "imported" event on the inbox (its lines and how many it created).
// progress, when not nil, is called after every full chunk.
func (s *Service) ImportAs(ctx context.Context, m Member, inboxPublic string, file []byte, now time.Time, progress func(done, total int)) (ImportSummary, error) {
	if err := m.mayChange(); err != nil {
		return ImportSummary{}, err
	}
	var inbox int64
	err := s.db.InTenant(ctx, m.tenant(), func(tx *pg.Tx) (err error) {
		inbox, _, err = s.inbox(ctx, tx, m, inboxPublic)
		return err
	})
	if err != nil {
		return ImportSummary{}, pg.Classify("desk import inbox", err)
	}
	if len(file) > MaxImportBytes {
		return ImportSummary{}, tooLarge()
	}
	rows, err := parseImport(file, now)
	if err != nil {
		return ImportSummary{}, err
	}
	record := func(ctx context.Context, tx *pg.Tx, first, last, created int) error {
		return audit.Record(ctx, tx, m.event(audit.KindDeskInbox, inboxPublic, "imported", map[string]string{
			"lines": strconv.Itoa(first) + "-" + strconv.Itoa(last), "created": strconv.Itoa(created)}))
	}
	sum, err := importRows(ctx, s.db, s.q, m.OrgID, inbox, rows, progress, record)
	if err != nil {
		return sum, pg.Classify("desk import", err)
	}
	return sum, nil
}
