package dashboard

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/web"
)

// activityRow is an event of the feed as the page and the live stream show it.
type activityRow struct {
	ID     string    `json:"id"`
	Type   string    `json:"type"`
	Part   string    `json:"part"`
	Org    string    `json:"org"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"` // the detail object as compact JSON ("" when empty)
	Usage  string    `json:"usage"`  // the usage report as compact JSON ("" when none)
}

func activityRows(list []threads.Activity) []activityRow {
	out := make([]activityRow, len(list))
	for i, e := range list {
		out[i] = activityRow{ID: e.ID.String(), Type: e.Type, Part: e.Part, Org: e.OrgName, At: e.CreatedAt.UTC(),
			Detail: compactJSON(e.Detail), Usage: compactJSON(e.Usage)}
	}
	return out
}

// compactJSON shows a stored object on one line; an empty object or none shows nothing.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil || b.String() == "{}" || b.String() == "null" {
		return ""
	}
	return b.String()
}

// threadState is what a thread view's live stream sends on each change: the status, who
// is composing, and the messages (threads.PersonMessage, with their read states) that are
// new or changed since the stream's last event: all of them in its first.
type threadState struct {
	Status    string            `json:"status"`
	Composing []string          `json:"composing"`
	Messages  []json.RawMessage `json:"messages"`
}

// threadSent is what a thread view's stream has sent: the status and composing parts, and
// a digest of each message as last sent. A reply then sends the reply and the reads it
// changed, not the page again: 16 streams of a 1 MB thread sent 16 MB for each reply.
type threadSent struct {
	head     []byte
	messages map[uuid.UUID][sha256.Size]byte
}

// projectEvents is a project page's live stream, woken by the hub on ThreadChannel. With
// ?thread= it serves the thread view: a `thread` event (threadState, carrying only what
// changed) whenever the thread's status, composing parts or messages and their reads
// change, and again once a composing
// indicator has lapsed (composing is not announced when it expires). Without it serves the
// activity feed: an `activity` event per new event (activityRow, id = the event's id, so a
// reconnect resumes from Last-Event-ID), after ?after=, and a `gap` event when a
// reconnect missed more than it catches up (liveCatchUpPages). Handler.stream runs it.
func (h *Handler) projectEvents(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	threadID := r.URL.Query().Get("thread")
	var feed activityCursor
	if threadID == "" {
		var ok bool
		if feed, ok = resumeCursor(w, r, "an event id"); !ok {
			return
		}
	}
	wakes, stop := h.deps.Hub.SubscribeOn(ThreadChannel, sc.ProjectID)
	defer stop()
	// lapse re-reads a thread once its composing indicator has expired.
	lapse := time.NewTimer(time.Hour)
	lapse.Stop()
	defer lapse.Stop()
	var sent threadSent
	h.stream(w, r, sess, sc, wakes, lapse.C, func(sc tenancy.Scope) error {
		if threadID == "" {
			return h.sendActivity(w, r, sc, &feed)
		}
		state, composing, err := h.threadState(r, sc, threadID, &sent)
		if err != nil || state == nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: thread\ndata: %s\n\n", state); err != nil {
			return fmt.Errorf("live write: %w", err)
		}
		if composing {
			lapse.Reset(threads.ComposingFor + time.Second)
		}
		return http.NewResponseController(w).Flush()
	})
}

// threadState reads the thread as its view shows it and encodes what changed since sent
// (nil: nothing did), then records it in sent as sent; composing reports whether someone
// is composing. A thread the person can no longer see ends the stream.
func (h *Handler) threadState(r *http.Request, sc tenancy.Scope, threadID string, sent *threadSent) ([]byte, bool, error) {
	t, err := h.deps.Threads.ThreadForPeople(h.budget(r).Context(), sc, threadID)
	if e, ok := apperr.As(err); ok && (e.Code == apperr.NotFound || e.Code == apperr.Invalid) {
		return nil, false, errStreamGone
	}
	if err != nil {
		return nil, false, fmt.Errorf("live thread: %w", err)
	}
	head, err := json.Marshal(threadState{Status: t.Status, Composing: t.Composing})
	if err != nil {
		return nil, false, fmt.Errorf("live thread: %w", err)
	}
	state := threadState{Status: t.Status, Composing: t.Composing, Messages: []json.RawMessage{}}
	// Only the page's messages are kept: one that left it (older than the page) is not
	// sent again, and the map stays the page's size.
	digests := make(map[uuid.UUID][sha256.Size]byte, len(t.Messages))
	for _, m := range t.Messages {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, false, fmt.Errorf("live message: %w", err)
		}
		d := sha256.Sum256(data)
		if old, ok := sent.messages[m.ID]; !ok || old != d {
			state.Messages = append(state.Messages, data)
		}
		digests[m.ID] = d
	}
	composing := len(t.Composing) > 0
	if len(state.Messages) == 0 && bytes.Equal(head, sent.head) {
		return nil, composing, nil
	}
	data, err := json.Marshal(state)
	if err != nil {
		return nil, false, fmt.Errorf("live thread: %w", err)
	}
	sent.head, sent.messages = head, digests
	return data, composing, nil
}

// liveOverlap is how far before the newest event sent each read of the live feed looks
// again. An event's id (a UUIDv7, hence its place in the feed) is made before its
// transaction runs, and a transaction may take up to a request's database budget (5 s by
// default) to commit: an event committed after a newer one was sent would otherwise sit
// below the cursor and never be sent.
const liveOverlap = 15 * time.Second

// resumeCursor is a live stream's cursor at its start: after the browser's Last-Event-ID
// when it reconnects, else ?after= (the newest item the page showed), else before
// everything. A value that is not an id (what, for the refusal) is answered 400: ok is
// false and the answer is written.
func resumeCursor(w http.ResponseWriter, r *http.Request, what string) (c activityCursor, ok bool) {
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	if after == "" {
		return c, true
	}
	id, err := uuid.Parse(after)
	if err != nil {
		http.Error(w, "after is not "+what, http.StatusBadRequest)
		return c, false
	}
	c.newest = id
	return c, true
}

// activityCursor is where a live feed stands: the newest event sent, and the events sent
// within liveOverlap of it (so a read that looks again sends none twice).
type activityCursor struct {
	newest uuid.UUID
	sent   map[uuid.UUID]bool
}

// from is the id the next read starts after: liveOverlap before the newest event sent.
func (c *activityCursor) from() uuid.UUID {
	if c.newest == uuid.Nil || c.newest.Version() != 7 {
		return c.newest
	}
	sec, nsec := c.newest.Time().UnixTime()
	return minV7(time.Unix(sec, nsec).Add(-liveOverlap))
}

// minV7 is the smallest UUIDv7 of a millisecond: every id made from then on sorts after it.
func minV7(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(max(t.UnixMilli(), 0))
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

// liveCatchUpPages is how many pages a live stream reads back from the newest to reach
// its cursor, after a reconnect that missed more than one page. Past it the newest are
// sent and a `gap` event tells the page that some before them are missing (a reload
// shows them), rather than the stream sending a day's history.
const liveCatchUpPages = 10

// sendGap tells the page that the stream skipped items it never sent.
func sendGap(w http.ResponseWriter) error {
	if _, err := fmt.Fprint(w, "event: gap\ndata: {}\n\n"); err != nil {
		return fmt.Errorf("live write: %w", err)
	}
	return nil
}

// readActivity reads the feed's events after the cursor's start, newest first: page
// after page back until a page reaches the newest event sent (up to liveCatchUpPages;
// gap reports that there were more), only the newest page when it starts from nothing.
// The pages stop at the newest event sent, not at the overlap's start: in a feed busier
// than a page in liveOverlap, every wake would read again what it had sent, and report
// a gap that is not there.
func (h *Handler) readActivity(r *http.Request, sc tenancy.Scope, c *activityCursor) (list []threads.Activity, gap bool, err error) {
	var before *uuid.UUID
	for page := 1; ; page++ {
		got, err := h.deps.Threads.ActivityForPeople(h.budget(r).Context(), sc, c.from(), before)
		if err != nil {
			return nil, false, fmt.Errorf("live activity: %w", err)
		}
		list = append(list, got...)
		if len(got) < threads.MaxPeopleActivity || c.newest == uuid.Nil {
			return list, false, nil
		}
		oldest := got[len(got)-1].ID
		switch {
		case bytes.Compare(oldest[:], c.newest[:]) <= 0:
			return list, false, nil // the page reaches what was sent
		case page == liveCatchUpPages:
			return list, true, nil
		}
		before = &oldest
	}
}

// sendActivity writes the feed's events not yet sent, oldest first, and moves the cursor.
func (h *Handler) sendActivity(w http.ResponseWriter, r *http.Request, sc tenancy.Scope, c *activityCursor) error {
	list, gap, err := h.readActivity(r, sc, c)
	if err != nil {
		return err
	}
	if gap {
		if err := sendGap(w); err != nil {
			return err
		}
	}
	if c.sent == nil {
		c.sent = map[uuid.UUID]bool{}
	}
	fresh := list[:0:0]
	for _, e := range list {
		if !c.sent[e.ID] && (c.newest == uuid.Nil || e.ID != c.newest) {
			fresh = append(fresh, e)
		}
	}
	rows := activityRows(fresh)
	for i := len(rows) - 1; i >= 0; i-- {
		data, err := json.Marshal(rows[i])
		if err != nil {
			return fmt.Errorf("live activity: %w", err)
		}
		if _, err := fmt.Fprintf(w, "id: %s\nevent: activity\ndata: %s\n\n", rows[i].ID, data); err != nil {
			return fmt.Errorf("live write: %w", err)
		}
		c.sent[fresh[i].ID] = true
		if bytes.Compare(fresh[i].ID[:], c.newest[:]) > 0 {
			c.newest = fresh[i].ID
		}
	}
	if len(fresh) == 0 {
		if gap {
			return http.NewResponseController(w).Flush()
		}
		return nil
	}
	// Forget what the next read no longer looks at again.
	from := c.from()
	for id := range c.sent {
		if bytes.Compare(id[:], from[:]) <= 0 {
			delete(c.sent, id)
		}
	}
	return http.NewResponseController(w).Flush()
}
