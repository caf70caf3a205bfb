package desk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
)

// Bounds of a CSV import file.
const (
	MaxImportBytes = 10 << 20 // 10 MB
	MaxImportRows  = 5000
	// ImportProgressEvery is how many rows pass between two progress reports.
	ImportProgressEvery = 500
)

// ImportColumns are the columns an import file has, in any order, named in its header.
var ImportColumns = []string{"customer_email", "subject", "body", "created_at", "status"}

// RowProblem is a bad row of an import file: its line (1 is the header) and why.
type RowProblem struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// ImportError lists every bad row of a file; nothing of the file was imported.
type ImportError struct {
	Problems []RowProblem `json:"problems"`
}

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the file was not imported (%d problem(s)):", len(e.Problems))
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  line %d: %s", p.Line, p.Reason)
	}
	return b.String()
}

// ImportSummary is what an import did.
type ImportSummary struct {
	Rows    int `json:"rows"`
	Created int `json:"created"`
	// Existing counts rows imported before (by this file or another with the same row):
	// importing a file again creates nothing.
	Existing int `json:"existing"`
}

type importRow struct {
	line int
	conv NewConversation
	// repeats is the line of an earlier row of the file that is the same conversation
	// (0: none): it is counted, as existing, and not written twice.
	repeats int
}

// ImportCSV imports conversations into one inbox of a workspace from a CSV file: UTF-8,
// a header naming the columns customer_email, subject, body, created_at (RFC 3339),
// status (open, pending, resolved), at most MaxImportBytes and MaxImportRows rows. Each
// row is a conversation whose customer message is body. Every bad row is reported with
// its line and reason, and then nothing is imported; otherwise the rows are imported in
// chunks of ImportProgressEvery, a transaction each (owner's pool). A row's external id
// is the hash of its content, so importing the same rows again creates nothing. Imported history sends nothing and
// triggers nothing. progress, when not nil, is called every ImportProgressEvery rows.
func ImportCSV(ctx context.Context, d *pg.DB, orgID uuid.UUID, inboxSlug string, file io.Reader, now time.Time, progress func(done, total int)) (ImportSummary, error) {
	q := db.New()
	b, err := io.ReadAll(io.LimitReader(file, MaxImportBytes+1))
	if err != nil {
		return ImportSummary{}, fmt.Errorf("read the file: %w", err)
	}
	if len(b) > MaxImportBytes {
		return ImportSummary{}, &ImportError{Problems: []RowProblem{{Line: 0, Reason: fmt.Sprintf("the file is larger than %d MB", MaxImportBytes>>20)}}}
	}
	rows, err := parseImport(b, now)
	if err != nil {
		return ImportSummary{}, err
	}
	var inbox int64
	err = d.Operator(ctx, func(tx *pg.Tx) (err error) {
		inbox, err = q.DeskInboxGetBySlug(ctx, tx, db.DeskInboxGetBySlugParams{OrgID: orgID, Slug: inboxSlug})
		return err
	})
	if pg.IsNoRows(err) {
		return ImportSummary{}, fmt.Errorf("no inbox %q in this workspace", inboxSlug)
	} else if err != nil {
		return ImportSummary{}, fmt.Errorf("find inbox: %w", err)
	}
	// Each chunk in the workspace's history, as the dashboard's import (the operator's
	// name when ctx carries it: audit.AsOperator).
	inboxPublic := publicID(PrefixInbox, inbox)
	record := func(ctx context.Context, tx *pg.Tx, first, last, created int) error {
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: orgID, Kind: audit.KindDeskInbox, ObjectID: inboxPublic, Action: "imported",
			Detail: map[string]string{"lines": strconv.Itoa(first) + "-" + strconv.Itoa(last), "created": strconv.Itoa(created)}})
	}
	return importRows(ctx, d, q, orgID, inbox, rows, progress, record)
}

// chunkRecorder, when an import has one, records in a chunk's transaction what the chunk
// created (lines first to last), so a chunk and its audit event commit together.
type chunkRecorder func(ctx context.Context, tx *pg.Tx, first, last, created int) error

// importRows writes checked rows into an inbox in chunks of ImportProgressEvery.
func importRows(ctx context.Context, d *pg.DB, q *db.Queries, orgID uuid.UUID, inbox int64, rows []importRow, progress func(done, total int), record chunkRecorder) (ImportSummary, error) {
	sum := ImportSummary{Rows: len(rows)}
	rows = slices.DeleteFunc(slices.Clone(rows), func(r importRow) bool { return r.repeats != 0 })
	repeats := sum.Rows - len(rows)
	sum.Existing = repeats
	for start := 0; start < len(rows); start += ImportProgressEvery {
		chunk := rows[start:min(start+ImportProgressEvery, len(rows))]
		created, err := importChunk(ctx, d, q, orgID, inbox, chunk, record)
		if err != nil {
			return ImportSummary{}, fmt.Errorf("lines %d-%d (lines before them are imported; importing the file again adds the rest): %w",
				chunk[0].line, chunk[len(chunk)-1].line, err)
		}
		sum.Created += created
		sum.Existing += len(chunk) - created
		if progress != nil && len(chunk) == ImportProgressEvery {
			// In the file's lines, as the summary counts them: the repeats are done already.
			progress(repeats+start+len(chunk), sum.Rows)
		}
	}
	return sum, nil
}

// importChunk writes a chunk of checked rows in its own transaction, in four statements
// whatever its size: which rows are known already, numbers for the new ones, and one
// statement inserting their conversations and messages. A transaction per chunk holds
// the workspace's counter rows (which the ingest API and notes also take) for a chunk's
// time, not the whole file's; a chunk is all or nothing, and a file imported again adds
// only what is missing.
func importChunk(ctx context.Context, d *pg.DB, q *db.Queries, orgID uuid.UUID, inbox int64, chunk []importRow, record chunkRecorder) (created int, err error) {
	ext := make([]string, len(chunk))
	for i, r := range chunk {
		ext[i] = r.conv.ExternalID
	}
	err = d.Operator(ctx, func(tx *pg.Tx) error {
		known, err := q.DeskConversationsKnown(ctx, tx, db.DeskConversationsKnownParams{OrgID: orgID, ExternalIds: ext})
		if err != nil {
			return fmt.Errorf("find known rows: %w", err)
		}
		have := make(map[string]bool, len(known))
		for _, k := range known {
			have[k] = true
		}
		fresh := slices.DeleteFunc(slices.Clone(chunk), func(r importRow) bool { return have[r.conv.ExternalID] })
		if len(fresh) == 0 {
			return nil
		}
		n := int64(len(fresh))
		lastConv, err := q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: orgID, Kind: counterConversation, N: n})
		if err != nil {
			return fmt.Errorf("number the conversations: %w", err)
		}
		lastMsg, err := q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: orgID, Kind: counterMessage, N: n})
		if err != nil {
			return fmt.Errorf("number the messages: %w", err)
		}
		p := db.DeskImportChunkParams{OrgID: orgID, InboxID: inbox}
		for i, r := range fresh {
			c := r.conv
			p.ConversationIds = append(p.ConversationIds, lastConv-n+1+int64(i))
			p.MessageIds = append(p.MessageIds, lastMsg-n+1+int64(i))
			p.ExternalIds = append(p.ExternalIds, c.ExternalID)
			p.Subjects = append(p.Subjects, c.Subject)
			p.Statuses = append(p.Statuses, c.Status)
			p.CustomerEmails = append(p.CustomerEmails, c.CustomerEmail)
			p.Bodies = append(p.Bodies, c.Messages[0].Body)
			p.CreatedAts = append(p.CreatedAts, stamp(c.CreatedAt))
		}
		row, err := q.DeskImportChunk(ctx, tx, p)
		if err != nil {
			return fmt.Errorf("store the rows: %w", err)
		}
		created = int(row.Conversations)
		if record != nil && created > 0 {
			return record(ctx, tx, chunk[0].line, chunk[len(chunk)-1].line, created)
		}
		return nil
	})
	return created, err
}

// MaxImportProblems bounds the problems a refused file lists (then how many more): a 10 MB
// file of bytes that are not UTF-8 listed one problem a line, five million, in a 394 MB
// preview page.
const MaxImportProblems = 100

// parseImport reads and checks every row; any problem fails the whole file (the rows
// that passed come back with the *ImportError, for a preview).
func parseImport(b []byte, now time.Time) ([]importRow, error) {
	var problems []RowProblem
	unlisted := 0 // problems past MaxImportProblems, counted
	bad := func(line int, format string, args ...any) {
		if len(problems) >= MaxImportProblems {
			unlisted++
			return
		}
		problems = append(problems, RowProblem{Line: line, Reason: fmt.Sprintf(format, args...)})
	}
	refused := func() *ImportError {
		if unlisted > 0 {
			problems = append(problems, RowProblem{Line: 0, Reason: fmt.Sprintf("and %d more problem(s) not listed: fix these first", unlisted)})
		}
		return &ImportError{Problems: problems}
	}
	b = bytes.TrimPrefix(b, []byte("\uFEFF")) // a byte-order mark is UTF-8's, not a column
	if !utf8.Valid(b) {
		// Name the lines: a person fixes a file line by line.
		for i, l := range bytes.Split(b, []byte("\n")) {
			if !utf8.Valid(l) {
				bad(i+1, "not valid UTF-8 (save the file as UTF-8)")
			}
		}
		return nil, refused()
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return nil, &ImportError{Problems: []RowProblem{{Line: 1, Reason: "no header row: the first line names the columns " + strings.Join(ImportColumns, ", ")}}}
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if !slices.Contains(ImportColumns, h) {
			bad(1, "unknown column %q (the columns are %s)", h, strings.Join(ImportColumns, ", "))
		} else if _, dup := col[h]; dup {
			bad(1, "column %q appears twice", h)
		}
		col[h] = i
	}
	for _, c := range ImportColumns {
		if _, ok := col[c]; !ok {
			bad(1, "missing column %q", c)
		}
	}
	if len(problems) > 0 {
		return nil, refused()
	}
	var rows []importRow
	seen := map[string]importRow{} // by external id: the first row of each conversation
	records := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// FieldPos describes only a record that was read: after a parse error it
			// may hold no fields and panics, so the error's own line is used.
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				bad(pe.StartLine, "%v", pe.Err)
				if pe.Err == csv.ErrQuote || pe.Err == csv.ErrBareQuote {
					return nil, refused() // the rest cannot be read reliably
				}
				continue
			}
			return nil, fmt.Errorf("read the file: %w", err)
		}
		line, _ := r.FieldPos(0)
		if records++; records > MaxImportRows {
			bad(line, "more than %d rows: split the file", MaxImportRows)
			break
		}
		if len(rec) != len(header) {
			bad(line, "%d fields, the header has %d", len(rec), len(header))
			continue
		}
		get := func(c string) string { return strings.TrimSpace(rec[col[c]]) }
		row := importRow{line: line}
		c := &row.conv
		var reasons []string
		email := strings.ToLower(get("customer_email"))
		if a, err := mail.ParseAddress(email); err != nil || a.Address != email || len(email) > 320 {
			reasons = append(reasons, fmt.Sprintf("customer_email %q is not an email address", email))
		}
		subject, body := get("subject"), get("body")
		if n := utf8.RuneCountInString(subject); n < 1 || n > 1000 {
			reasons = append(reasons, "subject must hold 1 to 1000 characters")
		}
		if n := utf8.RuneCountInString(body); n < 1 || n > 100000 {
			reasons = append(reasons, "body must hold 1 to 100000 characters")
		}
		if strings.ContainsRune(subject+body, 0) {
			reasons = append(reasons, "subject and body must not contain the NUL character")
		}
		created, err := time.Parse(time.RFC3339, get("created_at"))
		switch {
		case err != nil:
			reasons = append(reasons, fmt.Sprintf("created_at %q is not an ISO 8601 timestamp with a time zone (2026-11-06T17:00:00Z)", get("created_at")))
		case created.After(now):
			reasons = append(reasons, "created_at is in the future")
		case created.Before(earliest()):
			reasons = append(reasons, fmt.Sprintf("created_at is before %s (a zero time sent for a missing one?)", earliest().Format(time.DateOnly)))
		}
		status := strings.ToLower(get("status"))
		if status != StatusOpen && status != StatusPending && status != StatusResolved {
			reasons = append(reasons, fmt.Sprintf("status %q must be open, pending or resolved", get("status")))
		}
		if len(reasons) > 0 {
			bad(line, "%s", strings.Join(reasons, "; "))
			continue
		}
		// The row's content is its identity: the same row imported again is the same
		// conversation, whichever file or line it comes from.
		h := sha256.Sum256([]byte(strings.Join([]string{email, subject, body, created.UTC().Format(time.RFC3339Nano)}, "\x00")))
		c.ExternalID = "csv:" + hex.EncodeToString(h[:16])
		c.Subject, c.Status, c.CustomerEmail, c.CreatedAt = subject, status, email, created.UTC()
		if first, ok := seen[c.ExternalID]; ok {
			// The same conversation twice. With the same status it is counted once
			// imported; with another, which one is meant is the file's to say.
			if first.conv.Status != status {
				bad(line, "the same conversation as line %d with another status (%s, not %s): keep one of the two lines", first.line, status, first.conv.Status)
				continue
			}
			rows = append(rows, importRow{line: line, conv: first.conv, repeats: first.line})
			continue
		}
		c.Messages = []NewMessage{{Type: TypeCustomer, Body: body, CreatedAt: created.UTC()}}
		rows = append(rows, row)
		seen[c.ExternalID] = row
	}
	if len(problems) > 0 {
		return rows, refused()
	}
	return rows, nil
}
