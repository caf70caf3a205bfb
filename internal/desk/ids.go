package desk

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Prefixes of the public ids. A public id is the prefix and a number counted per
// workspace, so it tells nothing about any other workspace.
const (
	PrefixConversation = "conv_"
	PrefixInbox        = "inbox_"
	PrefixMessage      = "msg_"
	PrefixNote         = "note_"
	PrefixReply        = "reply_"
	PrefixUser         = "usr_"
)

// Kinds of desk_counter: the sequences of public numbers of a workspace. Notes are
// messages and share their numbers.
const (
	counterInbox        = "inbox"
	counterConversation = "conversation"
	counterMessage      = "message"
	counterReply        = "reply"
)

func publicID(prefix string, n int64) string { return prefix + strconv.FormatInt(n, 10) }

// parseID reads a public id of one kind. Anything else (another kind, no number, a number
// out of range) is not an error of its own: it names nothing, and is answered NOT_FOUND
// like an id of another workspace.
func parseID(prefix, s string) (int64, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 18 {
		return 0, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// messageID is a message's public id: note_N for a private note, msg_N otherwise.
func messageID(typ string, n int64) string {
	if typ == TypeNote {
		return publicID(PrefixNote, n)
	}
	return publicID(PrefixMessage, n)
}

// userID is a member's public id in one workspace: derived from the workspace and the
// person, so the same person has unrelated ids in two workspaces and no id reveals the
// person's account. No tool takes a user id as input, so it is never parsed back.
func userID(org, user uuid.UUID) string {
	h := sha256.New()
	h.Write(org[:])
	h.Write(user[:])
	return PrefixUser + hex.EncodeToString(h.Sum(nil)[:8])
}

func userIDp(org uuid.UUID, user *uuid.UUID) *string {
	if user == nil {
		return nil
	}
	v := userID(org, *user)
	return &v
}
