package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
)

// TestIdempotencyKeyHeader checks how the header is read: the draft's Structured Field
// string and a bare token are accepted; anything ambiguous or unbounded is refused.
func TestIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		lines []string
		want  string
		bad   bool
	}{
		{name: "no header", lines: nil, want: ""},
		{name: "structured field string", lines: []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "bare token", lines: []string{"note-1042-v1"}, want: "note-1042-v1"},
		{name: "surrounding spaces", lines: []string{"  k1  "}, want: "k1"},
		{name: "longest key", lines: []string{strings.Repeat("k", MaxIdempotencyKeyBytes)}, want: strings.Repeat("k", MaxIdempotencyKeyBytes)},
		{name: "too long", lines: []string{strings.Repeat("k", MaxIdempotencyKeyBytes+1)}, bad: true},
		{name: "empty", lines: []string{""}, bad: true},
		{name: "empty string", lines: []string{`""`}, bad: true},
		{name: "two header lines", lines: []string{"a", "b"}, bad: true},
		{name: "a list folded into one line", lines: []string{"a, b"}, bad: true},
		{name: "not ASCII", lines: []string{"clé"}, bad: true},
		{name: "escaped quote", lines: []string{`"a\"b"`}, bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "/", nil)
			for _, l := range c.lines {
				r.Header.Add(HeaderIdempotencyKey, l)
			}
			got, err := idempotencyKey(withIdempotencyKey(r))
			if c.bad {
				e, ok := apperr.As(err)
				if !ok || e.Code != apperr.Invalid || e.Reason != ReasonInvalidIdempotencyKey {
					t.Fatalf("want an invalid-key error, got %q, %v", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestFingerprintIgnoresTheRequestIDButNotTheRequest: the fingerprint names the endpoint,
// the tool and the canonical arguments, and nothing else.
func TestFingerprintIgnoresTheRequestIDButNotTheRequest(t *testing.T) {
	t.Parallel()
	base := fingerprint("threads", "send", []byte(`{"a":1}`))
	if fingerprint("threads", "send", []byte(`{"a":1}`)) != base {
		t.Fatal("the same request has two fingerprints")
	}
	for _, other := range [][32]byte{
		fingerprint("rooms", "send", []byte(`{"a":1}`)),
		fingerprint("threads", "reply", []byte(`{"a":1}`)),
		fingerprint("threads", "send", []byte(`{"a":2}`)),
		fingerprint("threads", "sen", []byte("d\x00{\"a\":1}")),
	} {
		if other == base {
			t.Fatal("two different requests share a fingerprint")
		}
	}
}
