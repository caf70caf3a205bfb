package desk_test

import (
	"context"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
)

func TestDeactivation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test", append([]string{desk.ScopeIngestWrite}, desk.Scopes...)...)
	// Al (admin) wrote the dst-start conversation's note and reply, and holds a token.
	tok, err := fx.svc.CreateToken(ctx, fx.acme, "al@acme.test", desk.TokenScopes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["dst-start"], IncludePrivateNotes: true})
	if err != nil {
		t.Fatal(err)
	}
	if member, changed, err := fx.svc.SetDeactivated(ctx, fx.acme, "Al@acme.test", true); err != nil || !member || !changed {
		t.Fatalf("%v %v %v", member, changed, err)
	}
	t.Run("deactivating again changes nothing and says so", func(t *testing.T) {
		if member, changed, err := fx.svc.SetDeactivated(ctx, fx.acme, "al@acme.test", true); err != nil || !member || changed {
			t.Fatalf("%v %v %v, want a member, unchanged", member, changed, err)
		}
	})

	t.Run("their token still verifies and is answered AUTH_REQUIRED on the next call", func(t *testing.T) {
		sc, err := fx.svc.Authenticate(ctx, tok.Token)
		if err != nil {
			t.Fatalf("the token must verify: %v", err)
		}
		_, err = fx.svc.SearchConversations(ctx, sc, desk.SearchInput{Query: "import"})
		wantErr(t, err, apperr.Unauthenticated, "AUTH_REQUIRED", "no longer an active member")
		_, err = fx.svc.AddPrivateNote(ctx, sc, desk.NoteInput{ConversationID: fx.conv["csv"], Body: "hi", IdempotencyKey: "deactivated-1"})
		wantErr(t, err, apperr.Unauthenticated, "AUTH_REQUIRED", "no longer an active member")
		_, err = fx.svc.IngestMessage(ctx, sc, fx.conv["csv"], desk.IngestAppend{IngestMessage: desk.IngestMessage{ExternalID: "d-1", Type: desk.TypeCustomer, Body: "x"}})
		wantErr(t, err, apperr.Unauthenticated, "AUTH_REQUIRED", "no longer an active member")
	})
	t.Run("what they wrote stays, with its author", func(t *testing.T) {
		after, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["dst-start"], IncludePrivateNotes: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Messages) != len(before.Messages) || after.Messages[2].AuthorID == nil || *after.Messages[2].AuthorID != *before.Messages[2].AuthorID {
			t.Fatalf("before %+v\nafter %+v", before.Messages, after.Messages)
		}
	})
	t.Run("no new token is issued to them, and they cannot be named an author or assignee", func(t *testing.T) {
		if _, err := fx.svc.CreateToken(ctx, fx.acme, "al@acme.test", desk.Scopes, time.Hour); err == nil {
			t.Fatal("a token was issued to a deactivated member")
		}
		_, err := fx.svc.IngestMessage(ctx, ana, fx.conv["csv"], desk.IngestAppend{IngestMessage: desk.IngestMessage{
			ExternalID: "d-2", Type: desk.TypeReply, Body: "x", AuthorEmail: "al@acme.test"}})
		wantErr(t, err, apperr.Invalid, "INVALID_ARGUMENT", "not an active member")
	})
	t.Run("reactivated, the same token works again", func(t *testing.T) {
		if member, changed, err := fx.svc.SetDeactivated(ctx, fx.acme, "al@acme.test", false); err != nil || !member || !changed {
			t.Fatalf("%v %v %v", member, changed, err)
		}
		sc, err := fx.svc.Authenticate(ctx, tok.Token)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fx.svc.SearchConversations(ctx, sc, desk.SearchInput{Query: "import"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("someone who is not a member is reported, not created", func(t *testing.T) {
		if member, _, err := fx.svc.SetDeactivated(ctx, fx.acme, "gus@globex.test", true); err != nil || member {
			t.Fatalf("%v %v", member, err)
		}
	})
}
