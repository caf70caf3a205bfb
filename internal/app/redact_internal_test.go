package app

import (
	"testing"

	"github.com/relayroom/relayroom/internal/auth"
)

// FuzzMayHoldCredential: the check that lets text skip the credential pattern never says
// no where the pattern finds a credential (so it cannot let one through), whatever the
// case, the script or the bytes; and an already masked path does skip it.
func FuzzMayHoldCredential(f *testing.F) {
	for _, s := range []string{
		"/mcp/qyt_cc_AbC123?part=x", "/mcp/qyt_cc_[redacted]?part=x", "sk-qyt-abc", "SK-QYT-Z",
		"qyt-", "qyt-9", "qyt_at_x", "qyt_a_x", "qyt__x_y", "QyT_Ci_0", "xqyt-\u212a", "qyt_\u017f\u017f_a",
		"qyt_cc_\u212a", "qyt_c\u212a_1", "qyt-\xff", "qyt_cc", "qytqyt-1", "q-y-t",
	} {
		f.Add(s)
	}
	// Every credential the service issues, by its own prefix: a prefix changed or added
	// in auth is checked here without anyone remembering this test.
	for _, p := range []string{auth.AgentKeyPrefix, auth.ConnectCodePrefix, auth.CITokenPrefix,
		auth.AccessTokenPrefix, auth.RefreshTokenPrefix, auth.CodePrefix} {
		f.Add("/x/" + p + "Ab1?y")
		f.Add(p + "0")
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !mayHoldCredential(s) && credentialPattern.MatchString(s) {
			t.Fatalf("%q skips the pattern, which matches %q", s, credentialPattern.FindString(s))
		}
	})
}

func TestMaskedPathSkipsThePattern(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"/mcp/qyt_cc_[redacted]?part=architect", "/api/mcp", "/mcp/qyt-?x"} {
		if mayHoldCredential(s) {
			t.Errorf("%q runs the pattern", s)
		}
	}
	for _, s := range []string{"/mcp/qyt_cc_a", "sk-qyt-1", "qyt_\u017f\u017f_a", "qyt-\u212a"} {
		if !mayHoldCredential(s) || !credentialPattern.MatchString(s) {
			t.Errorf("%q: may hold %v, pattern %v", s, mayHoldCredential(s), credentialPattern.MatchString(s))
		}
	}
}
