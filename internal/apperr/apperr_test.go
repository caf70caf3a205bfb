package apperr_test

import (
	"errors"
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
)

func TestWithReason(t *testing.T) {
	t.Parallel()
	t.Run("leaves its receiver as it was", func(t *testing.T) {
		t.Parallel()
		shared := apperr.New(apperr.Conflict, "taken")
		_ = shared.WithReason("first")
		if shared.Reason != "" {
			t.Fatalf("shared error's reason = %q after WithReason, want it unchanged", shared.Reason)
		}
	})
	t.Run("two reasons from one error stay apart", func(t *testing.T) {
		t.Parallel()
		base := apperr.New(apperr.Invalid, "bad")
		a, b := base.WithReason("a"), base.WithReason("b")
		if a.Reason != "a" || b.Reason != "b" {
			t.Fatalf("reasons = %q, %q; want a, b", a.Reason, b.Reason)
		}
	})
	t.Run("keeps code, message, details and cause", func(t *testing.T) {
		t.Parallel()
		cause := errors.New("disk full")
		base := apperr.Wrap(apperr.Unavailable, "try later", cause)
		base.Details = map[string]any{"retry_after_seconds": 1}
		got := base.WithReason("busy")
		if got.Code != apperr.Unavailable || got.Message != "try later" || got.Details["retry_after_seconds"] != 1 || !errors.Is(got, cause) {
			t.Fatalf("WithReason lost a field: %+v", got)
		}
	})
}
