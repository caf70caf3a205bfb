package desk

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strconv"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Messages of the note refusals.
const (
	MsgNoteScale    = "Private notes through MCP need the Scale plan; on Growth, add the note in RelayDesk instead."
	MsgNoteConflict = "This idempotency_key was already used in the last 24 hours with different arguments; nothing was written. Review the intended note before issuing a new key."
	MsgNoteSecret   = "argument \"body\" looks like it contains a secret (%s); nothing was written. Remove the credential from the note."
)

// NoteInput is relaydesk_add_private_note's arguments.
type NoteInput struct {
	ConversationID string `json:"conversation_id"`
	Body           string `json:"body"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Note is a private note as written.
type Note struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Visibility     string `json:"visibility"`
	Body           string `json:"body"`
}

// NoteResult is relaydesk_add_private_note's structuredContent.
type NoteResult struct {
	Note     Note `json:"note"`
	Replayed bool `json:"replayed"`
}

// noteFingerprint identifies a note call's arguments apart from its key.
func noteFingerprint(conversation int64, body string) []byte {
	h := sha256.New()
	h.Write([]byte(strconv.FormatInt(conversation, 10)))
	h.Write([]byte{0})
	h.Write([]byte(body))
	return h.Sum(nil)
}

// AddPrivateNote appends an internal note to a conversation the member sees. It sends
// nothing, changes neither the status nor updated_at, and triggers nothing. The key is
// the member's in the workspace for NoteKeyRetention: the same arguments replay the
// first note with replayed true, other arguments are IDEMPOTENCY_CONFLICT, and two
// concurrent identical calls write one note.
func (s *Service) AddPrivateNote(ctx context.Context, sc tenancy.Scope, in NoteInput) (NoteResult, error) {
	c, err := s.admit(ctx, sc, ScopeNotesWrite, true)
	if err != nil {
		return NoteResult{}, err
	}
	switch n := len([]rune(in.Body)); {
	case n < 1 || n > MaxNoteBody:
		return NoteResult{}, invalid("argument \"body\" must hold 1 to %d characters", MaxNoteBody)
	}
	if n := len([]rune(in.IdempotencyKey)); n < MinIdempotencyKey || n > MaxIdempotencyKey {
		return NoteResult{}, invalid("argument \"idempotency_key\" must hold %d to %d characters", MinIdempotencyKey, MaxIdempotencyKey)
	}
	// A live key answers first, whatever the arguments say now: the same call replays
	// its note, and changed arguments (another conversation, one that is gone, a body
	// the secret scan refuses) are IDEMPOTENCY_CONFLICT, as the contract says, not an
	// error that would have the caller write the note again under a new key.
	conv, ok := parseID(PrefixConversation, in.ConversationID)
	now := s.clock()
	fp := noteFingerprint(conv, in.Body)
	var out NoteResult
	keyed := func(rec db.DeskNoteKeyGetRow) error {
		if subtle.ConstantTimeCompare(rec.Fingerprint, fp) != 1 || !ok {
			return apperr.New(apperr.Conflict, MsgNoteConflict).WithReason(ReasonIdempotencyConflict)
		}
		out = NoteResult{Note: Note{ID: publicID(PrefixNote, rec.MessageID), ConversationID: publicID(PrefixConversation, rec.ConversationID),
			Visibility: "internal", Body: rec.Body}, Replayed: true}
		return nil
	}
	err = s.db.InTenant(ctx, c.tenant(), func(tx *pg.Tx) error {
		rec, err := s.q.DeskNoteKeyGet(ctx, tx, db.DeskNoteKeyGetParams{OrgID: c.org, UserID: c.user, Key: in.IdempotencyKey, ExpiredBefore: now.Add(-NoteKeyRetention)})
		if err == nil {
			return keyed(rec)
		}
		if !pg.IsNoRows(err) {
			return fmt.Errorf("read note key: %w", err)
		}
		if !ok {
			return conversationNotFound()
		}
		if f := s.secrets.Scan(in.Body); len(f) > 0 {
			return invalid(MsgNoteSecret, f[0].Kind)
		}
		if _, err := s.q.DeskConversationGet(ctx, tx, db.DeskConversationGetParams{OrgID: c.org, ID: conv, SeesAll: c.seesAll(), UserID: c.user}); pg.IsNoRows(err) {
			return conversationNotFound()
		} else if err != nil {
			return fmt.Errorf("read conversation: %w", err)
		}
		id, err := s.q.DeskCounterTake(ctx, tx, db.DeskCounterTakeParams{OrgID: c.org, Kind: counterMessage, N: 1})
		if err != nil {
			return fmt.Errorf("number the note: %w", err)
		}
		created, err := s.q.DeskNoteClaim(ctx, tx, db.DeskNoteClaimParams{OrgID: c.org, UserID: c.user, Key: in.IdempotencyKey,
			Fingerprint: fp, MessageID: id, CreatedAt: stamp(now), ExpiredBefore: now.Add(-NoteKeyRetention), ConversationID: conv, Body: in.Body})
		if err != nil {
			return fmt.Errorf("add note: %w", err)
		}
		if created == 1 {
			out = NoteResult{Note: Note{ID: publicID(PrefixNote, id), ConversationID: publicID(PrefixConversation, conv), Visibility: "internal", Body: in.Body}}
			return nil
		}
		// A concurrent call claimed the key first (it committed while this one waited on
		// the key): the same call again replays its note, another is refused.
		rec, err = s.q.DeskNoteKeyGet(ctx, tx, db.DeskNoteKeyGetParams{OrgID: c.org, UserID: c.user, Key: in.IdempotencyKey, ExpiredBefore: now.Add(-NoteKeyRetention)})
		if err != nil {
			return fmt.Errorf("read note key: %w", err)
		}
		return keyed(rec)
	})
	if err != nil {
		return NoteResult{}, pg.Classify("desk: add private note", err)
	}
	return out, nil
}

// NoteKeyCleanupBatch bounds the keys one clean-up statement deletes.
const NoteKeyCleanupBatch = 1000

// DeleteExpiredNoteKeys deletes note keys older than NoteKeyRetention, across workspaces,
// in bounded batches (a periodic job; an expired key already counts as absent).
func (s *Service) DeleteExpiredNoteKeys(ctx context.Context) (int64, error) {
	return s.db.OperatorBatches(ctx, "desk: delete expired note keys", NoteKeyCleanupBatch, func(tx *pg.Tx) (int64, error) {
		return s.q.DeskNoteKeyDeleteExpired(ctx, tx, db.DeskNoteKeyDeleteExpiredParams{
			ExpiredBefore: s.clock().Add(-NoteKeyRetention), Batch: NoteKeyCleanupBatch})
	})
}
