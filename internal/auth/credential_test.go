package auth

import (
	"strings"
	"testing"
)

func TestCredentialRoundTrip(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{AgentKeyPrefix, ConnectCodePrefix} {
		raw, gen, err := Generate(prefix)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(prefix, raw)
		if err != nil {
			t.Fatalf("Parse(%q): %v", raw, err)
		}
		if p.ID != gen.ID || !p.Matches(gen.Hash()) {
			t.Fatalf("parsed credential differs from the generated one")
		}
		other, _, _ := Generate(prefix)
		if q, _ := Parse(prefix, other); q.Matches(gen.Hash()) {
			t.Fatal("two different credentials match the same hash")
		}
	}
}

func TestCredentialRejectsTypos(t *testing.T) {
	t.Parallel()
	raw, _, err := Generate(AgentKeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	// Every single-character substitution and every adjacent swap must fail the checksum.
	body := []byte(raw)
	for i := len(AgentKeyPrefix); i < len(body); i++ {
		orig := body[i]
		repl := byte('a')
		if orig == 'a' {
			repl = 'b'
		}
		body[i] = repl
		if _, err := Parse(AgentKeyPrefix, string(body)); err == nil {
			t.Fatalf("a key with character %d changed was accepted", i)
		}
		body[i] = orig
	}
	for i := len(AgentKeyPrefix); i+1 < len(body); i++ {
		if body[i] == body[i+1] {
			continue
		}
		body[i], body[i+1] = body[i+1], body[i]
		if _, err := Parse(AgentKeyPrefix, string(body)); err == nil {
			t.Fatalf("a key with characters %d and %d swapped was accepted", i, i+1)
		}
		body[i], body[i+1] = body[i+1], body[i]
	}
	for _, bad := range []string{"", "sk-qyt-", raw[:len(raw)-1], raw + "x", strings.Replace(raw, "sk-qyt-", "sk-qyx-", 1), raw[:10] + "!" + raw[11:]} {
		if _, err := Parse(AgentKeyPrefix, bad); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
	if _, err := Parse(ConnectCodePrefix, raw); err == nil {
		t.Fatal("an agent key was accepted as a connect code")
	}
}
