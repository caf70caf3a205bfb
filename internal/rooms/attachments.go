package rooms

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// Attachment limits of get_inbox (spec).
const (
	InlineMax      = 64 << 10  // a text file inlines only up to this size
	InlineBudget   = 256 << 10 // inlined text per get_inbox answer
	LinkTTLSeconds = 60
	// MaxAttachmentsPerTask bounds a task's files: get_inbox lists every file of up to
	// MaxInbox tasks, each with its own link, in one answer a model reads.
	MaxAttachmentsPerTask = 100
)

// maxInlineRead bounds the bytes get_inbox reads to find the text it inlines: files it
// cannot inline (binary ones) leave the budget unspent, so it may read on past them, but
// never more than this, however many small files the tasks hold.
const maxInlineRead = 2 * InlineBudget

// Attachment is a task's file as get_inbox shows it.
type Attachment struct {
	ID              string  `json:"id"`
	UploadedByOrgID string  `json:"uploaded_by_org_id"`
	Filename        string  `json:"filename"`
	ContentType     string  `json:"content_type"`
	SizeBytes       int64   `json:"size_bytes"`
	Sha256          string  `json:"sha256"`
	Text            *string `json:"text,omitempty"`
	DownloadURL     string  `json:"download_url,omitempty"`
	ExpiresIn       int     `json:"expires_in_seconds,omitempty"`
}

// attachInline adds attachments to the inbox's tasks: valid UTF-8 text of at most 64 KB
// inline while the 256 KB budget lasts, anything else as a signed 60-second link. Binary
// content (NUL bytes, invalid UTF-8) is never inlined.
//
// Only the bytes of files that may be inlined are read, a budget's worth at a time (at
// most maxInlineRead): reading every small file's bytes to inline four of them read
// megabytes per call from a task with many files.
func (s *Service) attachInline(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, ids []uuid.UUID, tasks []InboxTask) error {
	rows, err := s.Q.AttachmentListByTask(ctx, tx, db.AttachmentListByTaskParams{ProjectID: sc.ProjectID, TaskIds: ids})
	if err != nil || len(rows) == 0 {
		return err
	}
	idx := map[string]int{}
	for i, t := range tasks {
		idx[t.TaskID] = i
	}
	budget, read := InlineBudget, 0
	content, fetched := map[uuid.UUID][]byte{}, map[uuid.UUID]bool{}
	exp := s.now().Add(LinkTTLSeconds * time.Second)
	for i, r := range rows {
		a := Attachment{ID: r.ID.String(), UploadedByOrgID: r.UploadedByOrgID.String(), Filename: r.Filename,
			ContentType: r.ContentType, SizeBytes: r.SizeBytes, Sha256: r.Sha256}
		fits := r.SizeBytes <= InlineMax && r.SizeBytes <= int64(budget)
		if fits && !fetched[r.ID] && read < maxInlineRead {
			// This file and the next ones that could still fit the budget.
			var batch []uuid.UUID
			sum := int64(0)
			for _, n := range rows[i:] {
				if n.SizeBytes <= InlineMax && sum+n.SizeBytes <= int64(budget) && read+int(sum+n.SizeBytes) <= maxInlineRead && !fetched[n.ID] {
					batch, sum = append(batch, n.ID), sum+n.SizeBytes
					fetched[n.ID] = true
				}
			}
			got, err := s.Q.AttachmentListContent(ctx, tx, db.AttachmentListContentParams{ProjectID: sc.ProjectID, Ids: batch})
			if err != nil {
				return err
			}
			for _, g := range got {
				content[g.ID] = g.Content
			}
			read += int(sum)
		}
		if c, ok := content[r.ID]; fits && ok && isText(c) {
			t := string(c)
			a.Text = &t
			budget -= len(c)
		} else {
			a.DownloadURL = s.downloadURL(sc.ProjectID, r.ID, exp)
			a.ExpiresIn = LinkTTLSeconds
		}
		delete(content, r.ID)
		i := idx[r.TaskID.String()]
		tasks[i].Attachments = append(tasks[i].Attachments, a)
	}
	return nil
}

func isText(b []byte) bool {
	return text.Check(string(b)) == nil
}

func (s *Service) sign(project, id uuid.UUID, exp int64) string {
	m := hmac.New(sha256.New, s.SigningKey)
	fmt.Fprintf(m, "attachment\x00%s\x00%s\x00%d", project, id, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// DownloadPath is the route of a signed attachment download.
func DownloadPath(project, id uuid.UUID) string {
	return fmt.Sprintf("/api/rooms/%s/attachments/%s", project, id)
}

func (s *Service) downloadURL(project, id uuid.UUID, exp time.Time) string {
	e := exp.Unix()
	return fmt.Sprintf("%s%s?exp=%d&sig=%s", strings.TrimRight(s.PublicURL, "/"), DownloadPath(project, id), e, s.sign(project, id, e))
}

// File is an attachment being downloaded: an io.ReadSeeker over its content, which it
// reads from the database DownloadChunk bytes at a time, each in a transaction of its own,
// so that a download holds one chunk in memory and no connection while it is sent.
type File struct {
	Filename    string
	ContentType string
	Size        int64

	ctx         context.Context
	s           *Service
	project, id uuid.UUID
	off         int64  // where the next Read starts
	chunk       []byte // the content from chunkOff
	chunkOff    int64
	release     func() // gives the download's share of the budget back
}

// Read reads the content from the current offset.
func (f *File) Read(p []byte) (int, error) {
	if f.off >= f.Size {
		return 0, io.EOF
	}
	if f.off < f.chunkOff || f.off >= f.chunkOff+int64(len(f.chunk)) {
		n := min(DownloadChunk, f.Size-f.off)
		var chunk []byte
		err := f.s.DB.InTenant(f.ctx, pg.Tenant{ProjectID: f.project}, func(tx *pg.Tx) error {
			var err error
			chunk, err = f.s.Q.AttachmentGetChunk(f.ctx, tx, db.AttachmentGetChunkParams{ProjectID: f.project, ID: f.id, OffsetBytes: int32(f.off), Length: int32(n)})
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("read attachment at %d: %w", f.off, err)
		}
		if len(chunk) == 0 {
			return 0, io.ErrUnexpectedEOF // removed (its room deleted) while it was sent
		}
		f.chunk, f.chunkOff = chunk, f.off
	}
	n := copy(p, f.chunk[f.off-f.chunkOff:])
	f.off += int64(n)
	return n, nil
}

// Seek sets the offset of the next Read (for ranges of the content).
func (f *File) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.Size
	}
	if offset < 0 {
		return 0, errors.New("seek before the start of the attachment")
	}
	f.off = offset
	return offset, nil
}

// Close ends a download: its share of the download budget is given back.
func (f *File) Close() {
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// DownloadChunk is how much of an attachment a download reads from the database at a
// time, and what it holds of the download budget.
const DownloadChunk = 1 << 20

// MaxDownloadBytes bounds the attachment bytes a process holds for downloads being sent:
// a download holds one chunk of its content at a time (DownloadChunk), so a reader that
// does not read holds no more than that. Before, a download read its content whole: 30
// parallel downloads of one 25 MB file took the server from 160 MB to 875 MB, and a few
// clients that never read held the whole budget until the write timeout. A download past
// it is refused (429, to retry shortly).
const MaxDownloadBytes = 256 << 20

// MsgDownloadsBusy refuses a download past MaxDownloadBytes.
const MsgDownloadsBusy = "The server is sending too many downloads at once; retry shortly"

// Download serves a signed link: refused when expired, tampered with, or for another room.
// The File reads the content as it is sent (ctx is the request's); Close it.
func (s *Service) Download(ctx context.Context, projectID, attachmentID, exp, sig string) (*File, error) {
	gone := apperr.New(apperr.Forbidden, "This download link is invalid or has expired; call get_inbox for a new one")
	if len(s.SigningKey) == 0 {
		return nil, gone
	}
	p, err1 := uuid.Parse(projectID)
	id, err2 := uuid.Parse(attachmentID)
	e, err3 := strconv.ParseInt(exp, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, gone
	}
	want := s.sign(p, id, e)
	if !hmac.Equal([]byte(want), []byte(sig)) || s.now().Unix() > e {
		return nil, gone
	}
	var head db.AttachmentGetHeadRow
	err := s.DB.InTenant(ctx, pg.Tenant{ProjectID: p}, func(tx *pg.Tx) error {
		var err error
		head, err = s.Q.AttachmentGetHead(ctx, tx, db.AttachmentGetHeadParams{ProjectID: p, ID: id})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "Attachment not found")
		}
		return err
	})
	if err != nil {
		return nil, pg.Classify("download attachment", err)
	}
	held := max(min(head.SizeBytes, DownloadChunk), 1)
	if !s.downloads.TryAcquire(held) {
		// 429 like the process's other byte budget (the request bodies'), with when to
		// retry; a refusal that is no failure of the service.
		e := apperr.New(apperr.RateLimited, "%s", MsgDownloadsBusy)
		e.Details = map[string]any{httpapi.RetryAfterDetail: 2}
		return nil, e
	}
	return &File{Filename: head.Filename, ContentType: head.ContentType, Size: head.SizeBytes,
		ctx: ctx, s: s, project: p, id: id, release: func() { s.downloads.Release(held) }}, nil
}

// UploadResult is the HTTP answer of an upload.
type UploadResult struct {
	ID              string `json:"id"`
	TaskID          string `json:"task_id"`
	UploadedByOrgID string `json:"uploaded_by_org_id"`
	Filename        string `json:"filename"`
	ContentType     string `json:"content_type"`
	SizeBytes       int64  `json:"size_bytes"`
	Sha256          string `json:"sha256"`
}

// TooLarge is the error of an upload over the limit.
func (s *Service) TooLarge() error {
	n := s.MaxAttachment()
	if n >= 1<<20 {
		return apperr.New(apperr.Invalid, "Attachment is larger than the limit of %s (%d bytes)", human(n), n)
	}
	return apperr.New(apperr.Invalid, "Attachment is larger than the limit of %d bytes", n)
}

func human(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// CanAttach checks, before an upload's bytes are read, that the task exists in the room
// and that the caller's company may attach files to it (Upload checks again).
func (s *Service) CanAttach(ctx context.Context, sc tenancy.Scope, taskID string) error {
	if err := requireAgreement(sc); err != nil {
		return err
	}
	id, err := uuid.Parse(taskID)
	if err != nil {
		return taskNotFound(taskID)
	}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		return s.checkAttacher(ctx, tx, sc, id, taskID)
	})
	return pg.Classify("check attachment", err)
}

// checkAttacher finds the task (a missing one when the caller's company is not party to
// it) and refuses the recipient's company, which sees the task but may not attach.
func (s *Service) checkAttacher(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, id uuid.UUID, taskID string) error {
	t, err := s.Q.TaskGetForAttach(ctx, tx, db.TaskGetForAttachParams{ProjectID: sc.ProjectID, ID: id})
	if pg.IsNoRows(err) || (err == nil && t.FromOrgID != sc.OrgID && t.ToOrgID != sc.OrgID && !sc.IsHost()) {
		return taskNotFound(taskID)
	}
	if err != nil {
		return err
	}
	if t.FromOrgID != sc.OrgID && !sc.IsHost() {
		return errNotAttacher()
	}
	return nil
}

// DefaultMaxRoomAttachmentBytes is the bytes of attachments one room holds by default:
// they are stored in Postgres, and without a bound one agent could fill the disk every
// tenant shares (100 files of 25 MB a task, tasks without end).
const DefaultMaxRoomAttachmentBytes = 2 << 30

// MaxRoomAttachments is the bytes of attachments one room may hold.
func (s *Service) MaxRoomAttachments() int64 {
	if s.MaxRoomAttachmentBytes > 0 {
		return s.MaxRoomAttachmentBytes
	}
	return DefaultMaxRoomAttachmentBytes
}

// fits refuses an upload of size bytes to a room whose other attachments hold held bytes
// when both together pass the room's bound.
func (s *Service) fits(held, size int64) error {
	if held+size <= s.MaxRoomAttachments() {
		return nil
	}
	return invalid("This room's attachments hold %s of the %s it may hold: this file does not fit. Link to the file elsewhere instead",
		megabytes(held), megabytes(s.MaxRoomAttachments()))
}

// megabytes writes n bytes for people: whole megabytes (1,000,000 bytes), or bytes when
// fewer.
func megabytes(n int64) string {
	if n < 1_000_000 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d MB", n/1_000_000)
}

func errTooManyAttachments() error {
	return invalid("A task holds at most %d attachments; send the rest as one archive, or in a new task", MaxAttachmentsPerTask)
}

func errNotAttacher() error {
	return apperr.New(apperr.Forbidden, "Only the company that sent the task, or the room's host, can attach files to it")
}

// MaxContentTypeBytes bounds an upload's Content-Type, which is stored and served back
// with every download: a real media type with its parameters is far shorter.
const MaxContentTypeBytes = 255

// MaxFilenameBytes bounds an attachment's name: the column holds at most 255 characters,
// and 255 bytes never exceed that.
const MaxFilenameBytes = 255

// CleanFilename trims an upload's name and refuses one the store cannot hold (a NUL,
// invalid UTF-8: from a query parameter such as filename=%ff%fe.txt or a multipart
// header), one that could name a path (a slash, "." or ".."), and one whose characters
// would show other than they are: a control character, or a format character such as
// the right-to-left override that shows "invoice\u202Etxt.exe" as "invoiceexe.txt".
func CleanFilename(name string) (string, error) {
	name = strings.TrimSpace(name)
	if err := text.CheckShown(name); err != nil {
		return "", invalid("filename %v", err)
	}
	if name == "" || len(name) > MaxFilenameBytes || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", invalid("filename is required: 1-%d characters, no slashes, not . or ..", MaxFilenameBytes)
	}
	return name, nil
}

// minStoreRate is the slowest a busy database is allowed to store an attachment's bytes
// before the upload gives up: 25 MB at 2 MiB/s is about 12 s on top of the request's
// usual budget.
const minStoreRate = 2 << 20

// storeBudget is the database time an upload of n bytes may take: a request's budget (the
// statement timeout, sized for calls of a few rows) plus the time its bytes take at
// minStoreRate. With the bare budget a file of the largest size allowed, stored while the
// database was busy, ran past it and was answered "the database is unavailable".
func (s *Service) storeBudget(n int) time.Duration {
	return s.DB.StatementTimeout + time.Duration(n/minStoreRate)*time.Second
}

// Upload stores a file on a task. Only the company that sent the task, or the room's
// host, may attach files; the sha256 is computed here, from the bytes.
func (s *Service) Upload(ctx context.Context, sc tenancy.Scope, taskID, filename, contentType string, content []byte) (UploadResult, error) {
	ctx = pg.WithBudget(ctx, s.storeBudget(len(content)))
	if err := requireAgreement(sc); err != nil {
		return UploadResult{}, err
	}
	if len(content) == 0 {
		return UploadResult{}, invalid("the file is empty")
	}
	if int64(len(content)) > s.MaxAttachment() {
		return UploadResult{}, s.TooLarge()
	}
	filename, err := CleanFilename(filename)
	if err != nil {
		return UploadResult{}, err
	}
	if err := text.Check(contentType); err != nil {
		return UploadResult{}, invalid("the upload's Content-Type %v", err)
	}
	if len(contentType) > MaxContentTypeBytes {
		return UploadResult{}, invalid("the upload's Content-Type is longer than %d bytes", MaxContentTypeBytes)
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	id, err := uuid.Parse(taskID)
	if err != nil {
		return UploadResult{}, taskNotFound(taskID)
	}
	sum := sha256.Sum256(content)
	res := UploadResult{ID: newID().String(), TaskID: id.String(), UploadedByOrgID: sc.OrgID.String(), Filename: filename,
		ContentType: contentType, SizeBytes: int64(len(content)), Sha256: hex.EncodeToString(sum[:])}
	// A person (the dashboard) uploads for their company with no agent.
	var agent *uuid.UUID
	if sc.AgentID != uuid.Nil {
		agent = &sc.AgentID
	}
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		if err := s.checkAttacher(ctx, tx, sc, id, taskID); err != nil {
			return err
		}
		// The same file again from the same company (a retry whose answer was lost)
		// answers the stored attachment: nothing is stored or audited twice.
		if err := s.Q.AttachmentLockTask(ctx, tx, id); err != nil {
			return err
		}
		prev, err := s.Q.AttachmentGetSame(ctx, tx, db.AttachmentGetSameParams{ProjectID: sc.ProjectID, TaskID: id, OrgID: sc.OrgID,
			Filename: filename, Sha256: res.Sha256})
		if err == nil {
			res.ID, res.ContentType = prev.ID.String(), prev.ContentType
			return nil
		}
		if !pg.IsNoRows(err) {
			return err
		}
		n, err := s.Q.AttachmentCountByTask(ctx, tx, db.AttachmentCountByTaskParams{ProjectID: sc.ProjectID, TaskID: id})
		if err != nil {
			return err
		}
		if n >= MaxAttachmentsPerTask {
			return errTooManyAttachments()
		}
		// Counted first to refuse a file that does not fit before its bytes are stored;
		// counted again, in the room's turn, once they are (fits).
		held, err := s.Q.AttachmentBytesByProject(ctx, tx, sc.ProjectID)
		if err != nil {
			return err
		}
		if err := s.fits(held, res.SizeBytes); err != nil {
			return err
		}
		err = s.Q.AttachmentInsert(ctx, tx, db.AttachmentInsertParams{ProjectID: sc.ProjectID, ID: uuid.MustParse(res.ID), TaskID: id,
			UploadedByOrgID: sc.OrgID, UploadedByAgent: agent, Filename: filename, ContentType: contentType,
			SizeBytes: res.SizeBytes, Sha256: res.Sha256, Content: content})
		if err != nil {
			return err
		}
		// Uploads to two tasks of one room could both pass the first count: each counts
		// again in the room's turn, its own row included, and the later one sees the
		// earlier's once it committed.
		if err := s.Q.AttachmentLockRoom(ctx, tx, sc.ProjectID); err != nil {
			return err
		}
		if held, err = s.Q.AttachmentBytesByProject(ctx, tx, sc.ProjectID); err != nil {
			return err
		}
		if err := s.fits(held-res.SizeBytes, res.SizeBytes); err != nil { // held counts this upload's row
			return err
		}
		return audit.RecordIntended(ctx, tx)
	})
	if err != nil {
		return UploadResult{}, pg.Classify("upload attachment", err)
	}
	return res, nil
}
