package threads

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/text"
)

// FuzzParseID covers every id and cursor argument of the toolset (threadId, messageId,
// inbox's before, detail.threadId): the answer is an id that round-trips or an
// invalid_argument whose message is itself storable text, whatever the input holds.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0190c7e0-0000-7000-8000-000000000000", "", "nope", "x\x00", "\xff\xfe", "\xe0\x80\x80",
		"0190C7E0-0000-7000-8000-00000000000\x00", "{0190c7e0-0000-7000-8000-000000000000}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		id, err := parseID("before", v)
		if err != nil {
			e, ok := apperr.As(err)
			if !ok || e.Code != apperr.Invalid || e.Reason != "invalid_argument" || id != uuid.Nil {
				t.Fatalf("parseID(%q) = %v, %v", v, id, err)
			}
			if text.Check(e.Message) != nil {
				t.Fatalf("the message for %q is not text: %q", v, e.Message)
			}
			return
		}
		if back, err := parseID("before", id.String()); err != nil || back != id {
			t.Fatalf("%q → %v does not round-trip", v, id)
		}
	})
}

// FuzzPreview holds Preview's shortcut (a body returned as it is) to the collapsing copy
// it made of every body before.
func FuzzPreview(f *testing.F) {
	for _, s := range []string{"", " ", "short body", " lead", "trail ", "two  spaces", "tab\there", "line\nbreak",
		"nbsp\u00a0x", "bad\xffutf8", "repl\ufffdchar", strings.Repeat("a", PreviewRunes), strings.Repeat("a", PreviewRunes+1),
		strings.Repeat("ab ", 60), strings.Repeat("é", PreviewRunes)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if got, want := Preview(body), previewCopy(body); got != want {
			t.Fatalf("Preview(%q) = %q, want %q", body, got, want)
		}
	})
}
