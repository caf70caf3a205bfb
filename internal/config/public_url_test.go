package config_test

import "testing"

// TestPublicURLIsCanonical : the public URL is the base of every resource
// identifier and of the issuer. MCP clients build the `resource` they send with a URL
// parser, which lower-cases scheme and host and drops a default port; a public URL kept
// as typed ("https://Relay.example", "https://relay.example:443") makes every
// authorization request invalid_target (auth.ParseResource compares bytes).
func TestPublicURLIsCanonical(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://Relay.Example":     "https://relay.example",
		"HTTPS://relay.example":     "https://relay.example",
		"https://relay.example:443": "https://relay.example",
		"http://localhost:80":       "http://localhost",
		"http://[::1]:8080/":        "http://[::1]:8080",
		"http://[::1]:80":           "http://[::1]",
	} {
		t.Run(raw, func(t *testing.T) {
			c, err := load(map[string]string{"RELAYROOM_PUBLIC_URL": raw})
			if err != nil {
				t.Fatal(err)
			}
			if c.Public() != want {
				t.Fatalf("public URL %q, want %q (what clients send back as the resource)", c.Public(), want)
			}
		})
	}
}
