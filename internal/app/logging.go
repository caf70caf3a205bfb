package app

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
)

type ctxKey int

const requestIDKey ctxKey = iota

// WithRequestID returns ctx carrying the request id that every log line of the request shows.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// requestIDHandler adds request_id to every record logged with a request's context, so a
// request's lines can be found together without each caller remembering to add it.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// NewLogger writes JSON lines to w at the given level.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(requestIDHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})})
}

// Credentials travel in URL paths (connect codes) and could be pasted anywhere; nothing
// that looks like one reaches a log line.
var credentialPattern = regexp.MustCompile(`(sk-qyt-|qyt_cc_|qyt_at_|qyt_rt_)[0-9A-Za-z]+`)

// RedactCredentials masks every credential in s, keeping its prefix so a reader knows
// which kind was there.
func RedactCredentials(s string) string {
	if !strings.Contains(s, "qyt") {
		return s
	}
	return credentialPattern.ReplaceAllString(s, "${1}[redacted]")
}
