package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/relayroom/relayroom/internal/tenancy"
)

// requestNote is what the request's handlers learn that its log line should say: who
// called (organisation, and agent or person) and which tool with which outcome. An
// operator reads "who is hammering us" and "which agent got these errors" from the access
// log; a tool's failure is in its result with HTTP 200, so the status alone hid it.
type requestNote struct {
	org, caller   string
	tool, outcome string
}

type requestNoteKey struct{}

func withRequestNote(ctx context.Context) (context.Context, *requestNote) {
	n := &requestNote{}
	return context.WithValue(ctx, requestNoteKey{}, n), n
}

func requestNoteFrom(ctx context.Context) *requestNote {
	n, _ := ctx.Value(requestNoteKey{}).(*requestNote)
	return n
}

// noteCaller records an authenticated caller on the request's note.
func noteCaller(ctx context.Context, s tenancy.Scope) {
	n := requestNoteFrom(ctx)
	if n == nil {
		return
	}
	n.org = s.OrgID.String()
	switch {
	case s.Person != nil:
		n.caller = "person:" + s.Person.UserID.String()
	default:
		n.caller = "agent:" + s.AgentID.String()
	}
}

// onToolCall counts a tool call and records it on the request's note.
func (a *App) onToolCall(ctx context.Context, endpoint, tool, outcome string, d time.Duration) {
	a.metrics.observeTool(ctx, endpoint, tool, outcome, d)
	if n := requestNoteFrom(ctx); n != nil {
		n.tool, n.outcome = tool, outcome
	}
}

// attrs are the note's attributes for the request's line (none when nothing was learnt).
func (n *requestNote) attrs(out []slog.Attr) []slog.Attr {
	if n.org != "" {
		out = append(out, slog.String("org", n.org), slog.String("caller", n.caller))
	}
	if n.tool != "" {
		out = append(out, slog.String("tool", n.tool), slog.String("outcome", n.outcome))
	}
	return out
}
