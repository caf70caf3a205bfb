package dashboard

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/waiters"
)

// RoomChannel is the Postgres channel a new room message is announced on, with its
// project id as the payload, after the message's transaction committed (the rooms
// service's notifier: rooms.RunNotifier).
const RoomChannel = rooms.RoomChannel

// ThreadChannel is the channel a project's id is announced on after its threads, events or
// composing indicators changed (threads.RunNotifier), for the thread pages.
const ThreadChannel = threads.Channel

// hubChannels are the channels every hub listens on.
var hubChannels = []string{RoomChannel, ThreadChannel}

// hubKey is what a page subscribes to: a channel's announcements of one project.
type hubKey struct {
	channel string
	project uuid.UUID
}

// Hub listens on RoomChannel and ThreadChannel on its own connection and wakes the live
// pages of this replica that show the project named on that channel. Every replica runs one, so a message written through
// any replica reaches every page. A wake carries nothing: the page fetches what is new
// through the rooms service, under its person's scope.
type Hub struct {
	db   *pg.DB
	log  *slog.Logger
	subs waiters.Set[hubKey]

	// stopped is closed when Run returns: the server is shutting down (app.Run stops the
	// hub before http.Server.Shutdown), and every live stream ends at once, since
	// Shutdown waits for streams it does not cancel.
	stopped chan struct{}
}

// NewHub builds a hub; Run starts listening.
func NewHub(d *pg.DB, log *slog.Logger) *Hub {
	return &Hub{db: d, log: log, stopped: make(chan struct{})}
}

// ListenState says whether the hub's LISTEN is in place now (waiters.State): while it
// is not, a live page learns of news only at its own periodic check.
func (h *Hub) ListenState() string { return h.subs.State() }

// Stopped is closed once Run has returned; a live stream ends when it is.
func (h *Hub) Stopped() <-chan struct{} { return h.stopped }

// Subscribe returns a channel that receives a token after each new message of the room
// (bursts coalesce into one) and the function that ends the subscription.
func (h *Hub) Subscribe(room uuid.UUID) (<-chan struct{}, func()) {
	return h.SubscribeOn(RoomChannel, room)
}

// SubscribeOn is Subscribe for a project's announcements on one of the hub's channels.
func (h *Hub) SubscribeOn(channel string, project uuid.UUID) (<-chan struct{}, func()) {
	return h.subs.Subscribe(hubKey{channel, project})
}

// Run listens until ctx is done, reconnecting with a growing delay (waiters.Follow), then
// closes Stopped. It runs once per hub.
func (h *Hub) Run(ctx context.Context) {
	defer close(h.stopped)
	h.subs.Follow(ctx, h.log, "dashboard listener", h.listenOnce)
}

// listenOnce holds a connection of its own (not a pool's: a LISTEN ties it up for good).
func (h *Hub) listenOnce(ctx context.Context, connected func()) error {
	// Session: behind a transaction pooler, a LISTEN needs a connection of its own.
	conn, err := pgx.ConnectConfig(ctx, h.db.Session.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, c := range hubChannels {
		if _, err := conn.Exec(ctx, "LISTEN "+c); err != nil {
			return fmt.Errorf("listen %s: %w", c, err)
		}
	}
	connected()
	for {
		n, err := pg.AwaitNotification(ctx, conn, pg.ListenPing, pg.ListenPingTimeout)
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		room, err := uuid.Parse(n.Payload)
		if err != nil {
			h.log.WarnContext(ctx, "dashboard listener: bad payload", "payload", n.Payload)
			continue
		}
		h.subs.Wake(hubKey{n.Channel, room})
	}
}
