package testfix

import (
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
)

// WantErr fails the test unless err is an apperr.Error of code and, when reason is not
// "", of that reason.
func WantErr(t testing.TB, err error, code apperr.Code, reason string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok {
		t.Fatalf("want %s/%s, got %v", code, reason, err)
	}
	if e.Code != code || (reason != "" && e.Reason != reason) {
		t.Fatalf("want %s/%s, got %s/%s: %s", code, reason, e.Code, e.Reason, e.Message)
	}
}
