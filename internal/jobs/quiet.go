package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// repeatWindow is how long a message of the job library is not written again after it
// was: during a database outage River's producers, elector and notifier each logged an
// ERROR about every second (95 lines in 28 s on one replica), drowning the few lines that
// said what was wrong.
const repeatWindow = 30 * time.Second

// maxRepeatMessages bounds the messages remembered.
const maxRepeatMessages = 1000

// quietRepeats writes a message the first time, then at most once per repeatWindow with
// "repeated", the number of lines it stood for. Records below min are dropped: River's
// routine INFO lines (client started, job counts every few seconds) stay out of the log.
type quietRepeats struct {
	h     slog.Handler
	min   slog.Level
	state *repeatState // shared by the handlers WithAttrs and WithGroup derive
}

type repeatState struct {
	mu     sync.Mutex
	now    func() time.Time
	byMsg  map[string]*repeated
	window time.Duration
}

type repeated struct {
	last       time.Time // when it was written
	suppressed int
}

func newQuietRepeats(h slog.Handler, min slog.Level, now func() time.Time) quietRepeats {
	return quietRepeats{h: h, min: min, state: &repeatState{now: now, byMsg: map[string]*repeated{}, window: repeatWindow}}
}

func (q quietRepeats) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= q.min && q.h.Enabled(ctx, l)
}

func (q quietRepeats) Handle(ctx context.Context, r slog.Record) error {
	s := q.state
	s.mu.Lock()
	now := s.now()
	rep, seen := s.byMsg[r.Message]
	if seen && now.Sub(rep.last) < s.window {
		rep.suppressed++
		s.mu.Unlock()
		return nil
	}
	n := 0
	if seen {
		n = rep.suppressed
	} else {
		if len(s.byMsg) >= maxRepeatMessages {
			clear(s.byMsg) // messages built with changing text: forget them rather than grow
		}
		rep = &repeated{}
		s.byMsg[r.Message] = rep
	}
	rep.last, rep.suppressed = now, 0
	s.mu.Unlock()
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated", n))
	}
	return q.h.Handle(ctx, r)
}

func (q quietRepeats) WithAttrs(as []slog.Attr) slog.Handler {
	return quietRepeats{q.h.WithAttrs(as), q.min, q.state}
}

func (q quietRepeats) WithGroup(g string) slog.Handler {
	return quietRepeats{q.h.WithGroup(g), q.min, q.state}
}
