package tenancy_test

import (
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// FuzzCheckPart: a ?part= value is refused with Invalid (HTTP 400) exactly when it is not
// storable text or longer than any part's name, and passed on unchanged otherwise.
func FuzzCheckPart(f *testing.F) {
	for _, s := range []string{"architect", "architect\x00", "\xe0\x80\x80", "\xff\xfe", "qa-lead", "", "é", "\xc0\x80", strings.Repeat("p", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, part string) {
		err := tenancy.CheckPart(part)
		if (err == nil) != (text.Check(part) == nil && len(part) <= tenancy.MaxPartBytes) {
			t.Fatalf("CheckPart(%q) = %v", part, err)
		}
		if err != nil {
			if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || text.Check(e.Message) != nil {
				t.Fatalf("CheckPart(%q) = %v", part, err)
			}
		}
	})
}
