package rooms_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/text"
)

// FuzzCleanFilename: an attachment's name is either refused as invalid input or comes
// back storable (valid UTF-8, no NUL, 1-255 bytes, no path separator, trimmed), and
// cleaning it again changes nothing.
func FuzzCleanFilename(f *testing.F) {
	for _, s := range []string{"notes.md", "\xff\xfe.txt", "a\x00.txt", "\xe0\x80\x80.txt", " spaced.txt ", "../etc/passwd",
		`c:\boot.ini`, "", "   ", strings.Repeat("a", 256), "café.pdf", "\u200b", "\xc0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := rooms.CleanFilename(name)
		if err != nil {
			if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid {
				t.Fatalf("CleanFilename(%q): %v is not a validation error", name, err)
			}
			if text.Check(err.Error()) != nil {
				t.Fatalf("the error of %q is not text itself: %q", name, err)
			}
			return
		}
		if text.Check(name) != nil {
			t.Fatalf("bad text %q let through as %q", name, got)
		}
		if text.Check(got) != nil || got == "" || len(got) > rooms.MaxFilenameBytes || strings.ContainsAny(got, `/\`) || got != strings.TrimSpace(got) {
			t.Fatalf("CleanFilename(%q) = %q", name, got)
		}
		if again, err := rooms.CleanFilename(got); err != nil || again != got {
			t.Fatalf("not idempotent: %q → %q, %v", got, again, err)
		}
	})
}

// FuzzParseCursor: get_messages' before is none, a message id that prints back as
// itself, or the not-found answer; it never panics.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "  ", "0190c7e0-0000-7000-8000-000000000000", " 0190C7E0-0000-7000-8000-000000000000 ",
		"{0190c7e0-0000-7000-8000-000000000000}", "urn:uuid:0190c7e0-0000-7000-8000-000000000000", "0190c7e000007000800000000000000",
		"x\x00", "\xff\xfe", "\xe0\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, before string) {
		id, err := rooms.ParseCursor(before)
		switch {
		case err != nil:
			if e, ok := apperr.As(err); !ok || e.Code != apperr.NotFound || id != nil {
				t.Fatalf("ParseCursor(%q) = %v, %v", before, id, err)
			}
		case strings.TrimSpace(before) == "":
			if id != nil {
				t.Fatalf("a blank cursor gave %v", id)
			}
		default:
			if id == nil {
				t.Fatalf("ParseCursor(%q) gave neither an id nor an error", before)
			}
			if back, err := uuid.Parse(id.String()); err != nil || back != *id {
				t.Fatalf("%q → %v does not round-trip", before, id)
			}
		}
	})
}
