package desk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

func TestInboxSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	box := func(hexDigit string) desk.Box {
		b, err := wake.NewSecretBox(strings.Repeat(hexDigit, 64))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	oldKey, newKey := box("a"), box("b")
	service := func(boxes ...desk.Box) *desk.Service {
		s, err := desk.New(desk.Deps{DB: fx.d, Q: fx.q, CursorKey: []byte(strings.Repeat("k", 32)), Secrets: testfix.Detector(t), Boxes: boxes, Now: fx.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const secret = "imap-password-Zq81!"
	stored := func(slug string) []byte {
		return testfix.Scalar[[]byte](t, fx.d, "SELECT connection_secret FROM desk_inbox WHERE org_id = $1 AND slug = $2", fx.acme, slug)
	}
	old := service(oldKey)

	t.Run("without a key a secret is refused and nothing is stored", func(t *testing.T) {
		_, err := fx.svc.SetInboxSecret(ctx, fx.acme, "support", secret)
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "RELAYROOM_SECRET_KEY is not set")
		if stored("support") != nil {
			t.Fatal("stored")
		}
	})
	t.Run("only the ciphertext is stored, and it opens again", func(t *testing.T) {
		if had, err := old.SetInboxSecret(audit.AsOperator(ctx, "ops"), fx.acme, "support", secret); err != nil || had {
			t.Fatalf("%v %v", had, err)
		}
		// In the workspace's history, never the secret.
		if n := testfix.Scalar[int64](t, fx.d, `SELECT count(*) FROM audit_event WHERE object_kind = 'desk_inbox' AND action = 'secret_set'
			AND actor_name = 'operator ops' AND org_id = $1 AND detail::text NOT LIKE '%imap%'`, fx.acme); n != 1 {
			t.Fatalf("%d audit events for the secret set, want 1", n)
		}
		if b := stored("support"); len(b) == 0 || bytes.Contains(b, []byte(secret)) {
			t.Fatalf("stored %q", b)
		}
		if got, err := old.InboxSecret(ctx, fx.acme, "support"); err != nil || got != secret {
			t.Fatalf("%q %v", got, err)
		}
	})
	t.Run("no tool returns the secret or the forwarding address", func(t *testing.T) {
		r, err := old.ListInboxes(ctx, fx.scope("acme", "ana@acme.test"), desk.PageInput{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		if len(r.Inboxes) != 2 || bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("support-fwd")) || bytes.Contains(b, []byte("secret")) {
			t.Fatalf("%s", b)
		}
	})
	t.Run("a ciphertext copied onto another inbox does not open", func(t *testing.T) {
		testfix.Exec(t, fx.d, "UPDATE desk_inbox SET connection_secret = $2 WHERE org_id = $1 AND slug = 'billing'", fx.acme, stored("support"))
		if _, err := old.InboxSecret(ctx, fx.acme, "billing"); !errors.Is(err, desk.ErrSecretUnreadable) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("rotation: the previous key opens until resealing under the new one", func(t *testing.T) {
		rotating := service(newKey, oldKey)
		if got, err := rotating.InboxSecret(ctx, fx.acme, "support"); err != nil || got != secret {
			t.Fatalf("%q %v", got, err)
		}
		if _, err := service(newKey).InboxSecret(ctx, fx.acme, "support"); !errors.Is(err, desk.ErrSecretUnreadable) {
			t.Fatalf("the new key alone opened an old secret: %v", err)
		}
		res, err := rotating.ResealInboxSecrets(audit.AsOperator(ctx, "ops"))
		// The billing row holds support's ciphertext: no key opens it there.
		if err != nil || res.Resealed != 1 || len(res.Unreadable) != 1 || res.Unreadable[0] != "acme/billing" {
			t.Fatalf("%+v %v", res, err)
		}
		if got, err := service(newKey).InboxSecret(ctx, fx.acme, "support"); err != nil || got != secret {
			t.Fatalf("after resealing, the new key alone: %q %v", got, err)
		}
		if n := testfix.Scalar[int64](t, fx.d, `SELECT count(*) FROM audit_event WHERE org_id = $1 AND action = 'desk_secrets_resealed'
			AND actor_name = 'operator ops' AND detail->>'inboxes' = '1'`, fx.acme); n != 1 {
			t.Fatalf("%d audit events for the reseal, want 1", n)
		}
	})
	t.Run("clearing forgets it", func(t *testing.T) {
		if had, err := fx.svc.SetInboxSecret(ctx, fx.acme, "support", ""); err != nil || !had {
			t.Fatalf("%v %v", had, err)
		}
		if got, err := old.InboxSecret(ctx, fx.acme, "support"); err != nil || got != "" || stored("support") != nil {
			t.Fatalf("%q %v", got, err)
		}
		// Again: there is none, nothing to do, and the answer says so.
		if had, err := fx.svc.SetInboxSecret(ctx, fx.acme, "support", ""); err != nil || had {
			t.Fatalf("a second clear: %v %v", had, err)
		}
	})
	t.Run("an unknown inbox is not found", func(t *testing.T) {
		_, err := old.SetInboxSecret(ctx, fx.acme, "nope", secret)
		wantErr(t, err, apperr.NotFound, "NOT_FOUND", "no inbox")
	})
}
