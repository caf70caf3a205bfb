package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// events streams a room's new messages as Server-Sent Events: `message` events whose id is
// the message id and whose data is the message as get_messages shows it. Each wake of the
// Hub re-resolves the person (a signed-out session, an expired one or a revoked agreement
// ends the stream) and reads what is new through the rooms service, under the person's
// scope. The stream starts after ?after= (the newest message the page showed) or the
// browser's Last-Event-ID when it reconnects; a `gap` event says that a reconnect missed
// more messages than it catches up (liveCatchUpPages pages) and sent the newest.
func (h *Handler) events(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	c, ok := resumeCursor(w, r, "a message id")
	if !ok {
		return
	}
	wakes, stop := h.deps.Hub.Subscribe(sc.ProjectID)
	defer stop()
	h.stream(w, r, sess, sc, wakes, nil, func(sc tenancy.Scope) error {
		return h.send(w, r, sc, &c)
	})
}

// stream serves a live stream once its subscription is in place: push writes what is new
// for the person's scope, at once (what arrived between the page's render and the
// subscription) and after each wake or tick of again (nil: none). Each wake re-resolves
// the person first (rebind); a person who may no longer see the project ends the stream
// with an `event: gone`. It ends with the request, after StreamLifetime, or when the hub
// stops (the server is shutting down: the browser reconnects, through a balancer to
// another replica).
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, wakes <-chan struct{}, again <-chan time.Time, push func(tenancy.Scope) error) {
	if !h.streams.Take(sess.Person.ID, MaxStreamsPerPerson) {
		w.Header().Set("Retry-After", "5") // EventSource reconnects on its own after its retry delay
		h.message(w, http.StatusTooManyRequests, &sess, "Too many live pages", MsgTooManyStreams)
		return
	}
	defer h.streams.Give(sess.Person.ID)
	rc := http.NewResponseController(w)
	// The stream outlives the server's write timeout (the app's limit middleware leaves
	// this route's deadlines to it): its own lifetime bounds it.
	if err := rc.SetWriteDeadline(time.Now().Add(StreamLifetime + time.Minute)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.deps.Log.WarnContext(r.Context(), "dashboard stream: write deadline", "error", err.Error())
	}
	hd := w.Header()
	SecurityHeaders(hd)
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no") // a buffering proxy would hold the events
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: live\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	end := time.NewTimer(StreamLifetime)
	defer end.Stop()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	pushed := time.Now()
	if push(sc) != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.deps.Hub.Stopped():
			return
		case <-end.C:
			return
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-wakes:
		case <-again:
		}
		// What changes meanwhile leaves one token in wakes: it is read after the next wait.
		if wait := StreamPushEvery - time.Since(pushed); wait > 0 {
			pause := time.NewTimer(wait)
			select {
			case <-r.Context().Done():
				pause.Stop()
				return
			case <-h.deps.Hub.Stopped():
				pause.Stop()
				return
			case <-pause.C:
			}
		}
		pushed = time.Now()
		var err error
		if sc, err = h.rebind(r, sess, sc); err == nil {
			err = push(sc)
		}
		if err != nil {
			if errors.Is(err, errStreamGone) {
				_, _ = fmt.Fprint(w, "event: gone\ndata: {}\n\n")
				_ = rc.Flush()
			} else {
				h.deps.Log.WarnContext(r.Context(), "dashboard stream", "error", err.Error())
			}
			return
		}
	}
}

// rebind resolves the person in the room again, as the page did.
func (h *Handler) rebind(r *http.Request, sess web.Session, sc tenancy.Scope) (tenancy.Scope, error) {
	next, found, err := h.deps.Resolver.PersonRoom(h.budget(r).Context(), sess.ID, sess.Person.ID, sc.OrgID, sc.ProjectID)
	if err != nil {
		return sc, err
	}
	if !found || next.Admitted() != nil {
		return sc, errStreamGone
	}
	return next, nil
}

// readMessages reads the room's newest messages, oldest first: page after page back until
// a page reaches the newest message sent (up to liveCatchUpPages; gap reports that there
// were more), only the newest page when it starts from nothing. As readActivity, the
// pages stop at the newest message sent, not at the overlap's start.
func (h *Handler) readMessages(r *http.Request, sc tenancy.Scope, c *activityCursor) (msgs []rooms.Message, gap bool, err error) {
	newest, before := c.newest, ""
	for page := 1; ; page++ {
		res, err := h.deps.Rooms.GetMessages(h.budget(r).Context(), sc, liveFetch, before)
		if err != nil {
			return nil, false, fmt.Errorf("live messages: %w", err)
		}
		msgs = append(res.Messages, msgs...)
		if len(res.Messages) < liveFetch || c.newest == uuid.Nil {
			return msgs, false, nil
		}
		oldest, err := uuid.Parse(res.Messages[0].ID)
		if err != nil || bytes.Compare(oldest[:], newest[:]) <= 0 {
			return msgs, false, nil // the page reaches what was sent
		}
		if page == liveCatchUpPages {
			return msgs, true, nil
		}
		before = res.Messages[0].ID
	}
}

// send writes the room's newest messages not yet sent and moves the cursor. A message's
// id (a UUIDv7) is made before its transaction commits, so a message committed after a
// newer one was sent sorts below the newest sent: the cursor looks liveOverlap back, as
// the activity feed's does, and the page skips a message it already shows.
func (h *Handler) send(w http.ResponseWriter, r *http.Request, sc tenancy.Scope, c *activityCursor) error {
	msgs, gap, err := h.readMessages(r, sc, c)
	if err != nil {
		return err
	}
	if c.sent == nil {
		c.sent = map[uuid.UUID]bool{}
	}
	from := c.from()
	sent := false
	if gap {
		if err := sendGap(w); err != nil {
			return err
		}
		sent = true
	}
	for _, m := range msgs {
		id, err := uuid.Parse(m.ID)
		if err != nil || c.sent[id] || id == c.newest || bytes.Compare(id[:], from[:]) <= 0 {
			continue
		}
		data, err := json.Marshal(m) // get_messages' own fields: id, from, content, timestamp
		if err != nil {
			return fmt.Errorf("live message: %w", err)
		}
		if _, err := fmt.Fprintf(w, "id: %s\nevent: message\ndata: %s\n\n", m.ID, data); err != nil {
			return fmt.Errorf("live write: %w", err)
		}
		c.sent[id], sent = true, true
		if bytes.Compare(id[:], c.newest[:]) > 0 {
			c.newest = id
		}
	}
	if !sent {
		return nil
	}
	from = c.from()
	for id := range c.sent {
		if bytes.Compare(id[:], from[:]) <= 0 {
			delete(c.sent, id)
		}
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		return fmt.Errorf("live flush: %w", err)
	}
	return nil
}

// MaxStreamsPerPerson bounds the live streams one person holds open in a process (a
// stream a tab). The streams are not counted per address (they outlive the per-request
// limits by design), and unbounded, one signed-in person could hold every connection the
// server allows.
const MaxStreamsPerPerson = 32

// MsgTooManyStreams refuses a stream past MaxStreamsPerPerson.
const MsgTooManyStreams = "You have too many live pages open at once: close some tabs, then reload this one."
