package desk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
)

// A cursor is the position after a page, signed: base64url(JSON payload) "." base64url(
// HMAC-SHA256). It binds the tool, the member, the workspace and the call's arguments
// except cursor, and carries when it was issued. Nothing is stored on the server. The
// payload is readable by whoever holds the cursor, so the member and the workspace are
// bound by a keyed hash, never by their account ids: those would tie a person's
// unrelated usr_ ids of two workspaces together.
type cursorPayload struct {
	Tool   string `json:"t"`
	Holder string `json:"h"` // holderOf: the workspace and the member, keyed-hashed
	Args   string `json:"a"` // base64url SHA-256 of the canonical arguments without cursor
	Issued int64  `json:"i"` // unix milliseconds
	// The keyset: the last row of the page.
	Time *time.Time `json:"ts,omitempty"`
	Text *string    `json:"s,omitempty"`
	ID   int64      `json:"id"`
}

// Messages of the cursor refusals.
const (
	msgCursorInvalid = "cursor is not valid: it was changed or was not issued by this server; restart pagination without a cursor."
	msgCursorArgs    = "cursor was issued for other arguments: reuse it with the original arguments, or restart pagination without a cursor."
	msgCursorExpired = "cursor expired (cursors last 15 minutes): restart pagination using the original filters and no cursor."
)

// argsHash is the SHA-256 of a call's arguments, defaults applied, with its cursor
// cleared by the caller (an input struct: its encoding is canonical).
func argsHash(args any) string {
	b, _ := json.Marshal(args) // the tools' input structs always encode
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// holderOf binds a cursor to the workspace and the member without naming either.
func (s *Service) holderOf(c caller) string {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write([]byte("holder\x00"))
	m.Write(c.org[:])
	m.Write(c.user[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

func (s *Service) sign(b []byte) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(b)
	return m.Sum(nil)
}

// issueCursor encodes the position after a page.
func (s *Service) issueCursor(tool string, c caller, args any, at cursorPayload) string {
	at.Tool, at.Holder, at.Args, at.Issued = tool, s.holderOf(c), argsHash(args), s.clock().UnixMilli()
	b, _ := json.Marshal(at) // a struct of strings, numbers and times always encodes
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(s.sign(b))
}

// readCursor checks a cursor: signed by us, for this tool, member, workspace and these
// arguments, and younger than CursorTTL.
func (s *Service) readCursor(tool string, c caller, args any, raw string) (cursorPayload, error) {
	var p cursorPayload
	body, mac, ok := strings.Cut(raw, ".")
	if !ok {
		return p, invalid(msgCursorInvalid)
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	sig, err2 := base64.RawURLEncoding.DecodeString(mac)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, s.sign(b)) {
		return p, invalid(msgCursorInvalid)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, invalid(msgCursorInvalid)
	}
	if p.Tool != tool || !hmac.Equal([]byte(p.Holder), []byte(s.holderOf(c))) {
		// Signed by us, but for another tool or another person: not theirs to use.
		return p, invalid(msgCursorInvalid)
	}
	if p.Args != argsHash(args) {
		return p, invalid(msgCursorArgs)
	}
	if s.clock().Sub(time.UnixMilli(p.Issued)) > CursorTTL {
		return p, apperr.New(apperr.Invalid, msgCursorExpired).WithReason(ReasonCursorExpired)
	}
	return p, nil
}
