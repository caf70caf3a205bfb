package desk

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
)

// Box seals and opens secrets at rest (AES-256-GCM under a server key: wake.SecretBox).
type Box interface {
	Seal(plain, ad []byte) []byte
	Open(sealed, ad []byte) ([]byte, error)
}

// MaxInboxSecret bounds an inbox's connection secret (a password, an OAuth refresh
// token, an API key: never a document).
const MaxInboxSecret = 4096

// MsgNoSecretKey refuses to store a secret when no key is configured.
const MsgNoSecretKey = "RELAYROOM_SECRET_KEY is not set: inbox connection secrets cannot be stored (generate one: openssl rand -hex 32)"

// ErrSecretUnreadable is a stored secret that none of the configured keys opens.
var ErrSecretUnreadable = errors.New("desk: the inbox's connection secret opens with none of the configured keys (was RELAYROOM_SECRET_KEY changed without RELAYROOM_SECRET_KEY_PREVIOUS? set the secret again)")

// secretAD binds a sealed secret to its workspace and inbox: a ciphertext copied onto
// another row does not open.
func secretAD(org uuid.UUID, inbox int64) []byte {
	return fmt.Appendf(nil, "relaydesk inbox secret v1 %s %d", org, inbox)
}

// open opens a sealed secret with the current key, then the previous ones.
func (s *Service) open(sealed []byte, org uuid.UUID, inbox int64) ([]byte, error) {
	for _, b := range s.boxes {
		if plain, err := b.Open(sealed, secretAD(org, inbox)); err == nil {
			return plain, nil
		}
	}
	return nil, ErrSecretUnreadable
}

func (s *Service) inboxBySlug(ctx context.Context, tx *pg.Tx, org uuid.UUID, slug string) (int64, error) {
	id, err := s.q.DeskInboxGetBySlug(ctx, tx, db.DeskInboxGetBySlugParams{OrgID: org, Slug: slug})
	if pg.IsNoRows(err) {
		return 0, apperr.New(apperr.NotFound, "no inbox %q in this workspace", slug)
	} else if err != nil {
		return 0, fmt.Errorf("desk: find inbox: %w", err)
	}
	return id, nil
}

// SetInboxSecret stores an inbox's mail-connection secret sealed under the current key
// ("" clears it). Only the ciphertext is stored; no tool, page or listing returns it.
// Owner's pool: `relayroom admin desk inbox set-secret`.
// It reports whether the inbox held a secret before (so that clearing twice says the
// second did nothing), and records the change in the workspace's history (never the
// secret).
func (s *Service) SetInboxSecret(ctx context.Context, org uuid.UUID, inboxSlug, secret string) (had bool, err error) {
	if len(secret) > MaxInboxSecret {
		return false, apperr.New(apperr.Invalid, "the secret holds at most %d bytes", MaxInboxSecret)
	}
	if secret != "" && len(s.boxes) == 0 {
		return false, apperr.New(apperr.Invalid, MsgNoSecretKey)
	}
	err = s.db.Operator(ctx, func(tx *pg.Tx) error {
		id, err := s.inboxBySlug(ctx, tx, org, inboxSlug)
		if err != nil {
			return err
		}
		before, err := s.q.DeskInboxSecretGet(ctx, tx, db.DeskInboxSecretGetParams{OrgID: org, ID: id})
		if err != nil {
			return fmt.Errorf("desk: read inbox secret: %w", err)
		}
		had = before != nil
		if secret == "" && !had {
			return nil // nothing to clear
		}
		var sealed []byte
		action := "secret_cleared"
		if secret != "" {
			sealed, action = s.boxes[0].Seal([]byte(secret), secretAD(org, id)), "secret_set"
		}
		if _, err := s.q.DeskInboxSecretSet(ctx, tx, db.DeskInboxSecretSetParams{OrgID: org, ID: id, ConnectionSecret: sealed}); err != nil {
			return fmt.Errorf("desk: store inbox secret: %w", err)
		}
		return audit.RecordOperator(ctx, tx, audit.Event{OrgID: org, Kind: audit.KindDeskInbox, ObjectID: publicID(PrefixInbox, id), Action: action})
	})
	return had, err
}

// InboxSecret opens an inbox's connection secret for the mail connection that uses it
// ("" when none is stored). It is never part of any answer to a person or an agent.
func (s *Service) InboxSecret(ctx context.Context, org uuid.UUID, inboxSlug string) (string, error) {
	var out string
	err := s.db.Operator(ctx, func(tx *pg.Tx) error {
		id, err := s.inboxBySlug(ctx, tx, org, inboxSlug)
		if err != nil {
			return err
		}
		sealed, err := s.q.DeskInboxSecretGet(ctx, tx, db.DeskInboxSecretGetParams{OrgID: org, ID: id})
		if err != nil || sealed == nil {
			return err
		}
		plain, err := s.open(sealed, org, id)
		out = string(plain)
		return err
	})
	return out, err
}

// ResealResult is what resealing did.
type ResealResult struct {
	Resealed int `json:"resealed"`
	// Unreadable lists the inboxes ("workspace/inbox", their slugs) whose secret opens
	// with none of the keys: they are left as they are, to be set again.
	Unreadable []string `json:"unreadable"`
}

// ResealInboxSecrets seals every stored inbox secret, of every workspace, under the
// current key (the rotation's second step: the previous key still opens them, the
// current one seals them). One transaction: all or nothing.
func (s *Service) ResealInboxSecrets(ctx context.Context) (ResealResult, error) {
	out := ResealResult{Unreadable: []string{}}
	if len(s.boxes) == 0 {
		return out, apperr.New(apperr.Invalid, MsgNoSecretKey)
	}
	err := s.db.Operator(ctx, func(tx *pg.Tx) error {
		out = ResealResult{Unreadable: []string{}} // a transaction retried runs again from its start
		rows, err := s.q.DeskInboxSecretsAll(ctx, tx)
		if err != nil {
			return fmt.Errorf("desk: read inbox secrets: %w", err)
		}
		perOrg := map[uuid.UUID]int{}
		for _, r := range rows {
			plain, err := s.open(r.ConnectionSecret, r.OrgID, r.ID)
			if err != nil {
				out.Unreadable = append(out.Unreadable, r.OrgSlug+"/"+r.InboxSlug)
				continue
			}
			sealed := s.boxes[0].Seal(plain, secretAD(r.OrgID, r.ID))
			if _, err := s.q.DeskInboxSecretSet(ctx, tx, db.DeskInboxSecretSetParams{OrgID: r.OrgID, ID: r.ID, ConnectionSecret: sealed}); err != nil {
				return fmt.Errorf("desk: reseal inbox secret: %w", err)
			}
			out.Resealed++
			perOrg[r.OrgID]++
		}
		// Each workspace's history says its secrets were sealed again (a key rotation).
		for org, n := range perOrg {
			if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: org, Kind: audit.KindOrganisation, ObjectID: org.String(),
				Action: "desk_secrets_resealed", Detail: map[string]string{"inboxes": strconv.Itoa(n)}}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
