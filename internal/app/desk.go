package app

import (
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
)

// newDesk builds the desk toolset. Its cursors are signed with a key derived from the
// server's signing key (the one attachment links use: RELAYROOM_SIGNING_KEY, the same on
// every replica), and it shares the rooms toolset's secret detector (loading one costs
// tens of milliseconds). Its rate limits are RELAYROOM_DESK_RATE_LIMITS.
func newDesk(cfg config.Config, database *pg.DB, q *db.Queries, roomsSvc *rooms.Service) (*desk.Service, error) {
	return desk.New(desk.Deps{DB: database, Q: q, CursorKey: roomsSvc.SigningKey, Secrets: roomsSvc.Secrets, Limits: cfg.DeskLimits, Now: time.Now})
}
