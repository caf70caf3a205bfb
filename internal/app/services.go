package app

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/idempotency"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/wake"
)

// buildServices builds every domain service and toolset, each with its package's New,
// from the configuration: the settings become each one's Deps here and nowhere else.
func (a *App) buildServices() error {
	cfg, log, database := a.cfg, a.log, a.db
	// One secret detector (loading its rules costs tens of milliseconds) for every
	// service that masks or refuses secrets.
	det, err := secrets.NewDetector()
	if err != nil {
		return fmt.Errorf("app: secret detector: %w", err)
	}
	// Knowledge: recall, learn, lessons, CI confirmation.
	if a.knowledge, err = knowledge.New(knowledge.Deps{DB: database, Detector: det, Now: time.Now}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	// Wakes: queued by threads and rooms in the transaction of the work, delivered to
	// pagers and webhooks; the sweep and other periodic jobs run on the job runner.
	box, err := wake.OptionalSecretBox(cfg.SecretKey)
	if err != nil {
		return fmt.Errorf("app: %s: %w", SecretKeyEnv, err)
	}
	if box == nil {
		log.Warn(SecretKeyEnv + " is not set: wake webhooks are off (pagers still work)")
	}
	// Session: River holds a LISTEN connection (the owner's pool, unless DATABASE_URL goes
	// through a transaction pooler).
	a.jobs = jobs.New(database.Session, jobs.Options{Log: log})
	a.wake = wake.New(wake.Deps{DB: database, Log: log, Now: time.Now, Box: box, PrivateTargets: cfg.WebhookPrivateTargets})
	if err := a.wake.RegisterJobs(a.jobs); err != nil {
		return fmt.Errorf("app: wakes: %w", err)
	}
	a.threads = threads.New(threads.Deps{DB: database, Now: time.Now, Knowledge: a.knowledge, Waker: a.wake, Secrets: det})
	emb, err := embed.New(embed.Config{Kind: cfg.Embedder, BaseURL: cfg.EmbedURL, Model: cfg.EmbedModel, APIKey: cfg.EmbedAPIKey, Dim: cfg.EmbedDim})
	if err != nil {
		return fmt.Errorf("app: rooms: %w", err)
	}
	key := []byte(cfg.SigningKey)
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // crypto/rand does not fail on Linux
		log.Warn("RELAYROOM_SIGNING_KEY is not set: attachment download links and desk cursors work only on this process; set the same key on every replica")
	}
	a.rooms = rooms.New(rooms.Deps{
		DB: database, Resolver: a.resolver, Embedder: emb, EmbedTimeout: cfg.EmbedWait, Secrets: det,
		Wakes: a.wake, SigningKey: key, MaxAttachmentBytes: cfg.AttachmentMaxBytes, MaxRoomAttachmentBytes: cfg.RoomAttachmentBytes, PublicURL: a.publicURL,
		Now: time.Now, Log: log,
	})
	// The desk toolset signs its cursors with a key derived from the signing key (the
	// one attachment links use, the same on every replica) and shares the detector; its
	// rate limits are RELAYROOM_DESK_RATE_LIMITS.
	boxes, err := DeskBoxes(cfg)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if a.desk, err = desk.New(desk.Deps{DB: database, CursorKey: key, Secrets: det, Limits: cfg.DeskLimits, Boxes: boxes, Now: time.Now, AccessTokens: deskTokens{a}}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	a.idempotency = idempotency.New(database, time.Now)
	return nil
}

// DeskBoxes are the keys of the desk's inbox secrets: RELAYROOM_SECRET_KEY seals and
// opens, RELAYROOM_SECRET_KEY_PREVIOUS (during a rotation) only opens. None without a
// key. The server and the admin commands open them the same way.
func DeskBoxes(cfg config.Config) ([]desk.Box, error) {
	var boxes []desk.Box
	for _, k := range []struct{ name, value string }{{SecretKeyEnv, cfg.SecretKey}, {SecretKeyEnv + "_PREVIOUS", cfg.SecretKeyPrevious}} {
		b, err := wake.OptionalSecretBox(k.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
		if b != nil {
			boxes = append(boxes, b)
		}
	}
	if cfg.SecretKey == "" && cfg.SecretKeyPrevious != "" {
		return nil, fmt.Errorf("%s_PREVIOUS is set without %s: set the new key too", SecretKeyEnv, SecretKeyEnv)
	}
	return boxes, nil
}
