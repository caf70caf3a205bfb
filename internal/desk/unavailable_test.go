package desk_test

import (
	"context"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
)

// TestUpstreamUnavailable: a tool whose statement runs out of the request's time (here a
// table locked by another session) answers UPSTREAM_UNAVAILABLE with an integer
// retry_after_seconds of at least 1, a retryable error rather than an internal one.
func TestUpstreamUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test")
	lock, err := fx.d.Ops.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lock.Rollback(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := lock.Exec(ctx, `LOCK TABLE desk_conversation IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(context.Context) error{
		"search": func(ctx context.Context) error {
			_, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import"})
			return err
		},
		"get_conversation": func(ctx context.Context) error {
			_, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["csv"]})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := call(pg.WithBudget(ctx, 300*time.Millisecond))
			e := wantErr(t, err, apperr.Unavailable, "UPSTREAM_UNAVAILABLE", "")
			if secs, ok := e.Details["retry_after_seconds"].(int); !ok || secs < 1 {
				t.Fatalf("retry_after_seconds: %#v", e.Details["retry_after_seconds"])
			}
		})
	}
}
