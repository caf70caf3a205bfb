package auth

import (
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/text"
)

// FuzzParse covers agent keys and connect codes (the threads URL's path segment): Parse
// never panics, accepts only our alphabet at the right length behind the prefix (so
// nothing it accepts can carry bad text to the database), a generated credential
// round-trips, and changing any one character of it is refused by the checksum.
func FuzzParse(f *testing.F) {
	for _, prefix := range []string{AgentKeyPrefix, ConnectCodePrefix} {
		raw, _, err := Generate(prefix)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(prefix, raw, 0, byte('x'))
		f.Add(prefix, raw+"\x00", 5, byte(0))
		f.Add(prefix, prefix+"\xe0\x80\x80", 0, byte(0xff))
		f.Add(prefix, strings.Replace(raw, raw[len(prefix):len(prefix)+1], "%", 1), 3, byte('%'))
	}
	f.Add(ConnectCodePrefix, "qyt%5Fcc_", 0, byte('_'))
	f.Fuzz(func(t *testing.T, prefix, s string, at int, b byte) {
		if prefix != AgentKeyPrefix && prefix != ConnectCodePrefix {
			prefix = ConnectCodePrefix
		}
		p, err := Parse(prefix, s)
		if err == nil {
			if text.Check(s) != nil || !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+bodyLen || p.ID != s[len(prefix):len(prefix)+idLen] {
				t.Fatalf("Parse accepted %q as %+v", s, p)
			}
			for _, c := range []byte(s[len(prefix):]) {
				if strings.IndexByte(alphabet, c) < 0 {
					t.Fatalf("Parse accepted %q with %q outside the alphabet", s, c)
				}
			}
		}
		// A real credential with one character changed never parses.
		raw, gen, err := Generate(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if q, err := Parse(prefix, raw); err != nil || q.ID != gen.ID || !q.Matches(gen.Hash()) {
			t.Fatalf("generated %q does not round-trip: %v", raw, err)
		}
		i := len(prefix) + abs(at)%bodyLen
		if raw[i] == b {
			return
		}
		typo := raw[:i] + string([]byte{b}) + raw[i+1:]
		if _, err := Parse(prefix, typo); err == nil {
			t.Fatalf("%q (one character of %q changed) was accepted", typo, raw)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}
