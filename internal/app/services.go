package app

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// newRooms builds the rooms toolset with its embedder, secret detector and signing key.
// Wakes stay nil until the wake engine is wired (rooms.Service.Wakes).
func newRooms(cfg config.Config, log *slog.Logger, database *pg.DB, q *db.Queries, r *tenancy.Resolver, publicURL string) (*rooms.Service, error) {
	emb, err := embed.New(embed.Config{Kind: cfg.Embedder, BaseURL: cfg.EmbedURL, Model: cfg.EmbedModel, APIKey: cfg.EmbedAPIKey, Dim: cfg.EmbedDim})
	if err != nil {
		return nil, fmt.Errorf("app: rooms: %w", err)
	}
	det, err := secrets.NewDetector()
	if err != nil {
		return nil, fmt.Errorf("app: rooms: %w", err)
	}
	key := []byte(cfg.SigningKey)
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		log.Warn("RELAYROOM_SIGNING_KEY is not set: attachment download links work only on this process")
	}
	return &rooms.Service{
		DB: database, Q: q, Resolver: r, Embedder: emb, Secrets: det, SigningKey: key,
		MaxAttachmentBytes: cfg.AttachmentMaxBytes, PublicURL: publicURL, Now: time.Now, Log: log,
		EmbedTimeout: cfg.EmbedWait,
	}, nil
}
