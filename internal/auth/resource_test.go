package auth

import (
	"slices"
	"testing"
)

func TestOriginResource(t *testing.T) {
	t.Parallel()
	const public = "https://relay.example/"
	t.Run("the root document names the origin with every endpoint's scopes", func(t *testing.T) {
		o := Origin(public)
		if o.URL != "https://relay.example" {
			t.Fatalf("origin resource %q", o.URL)
		}
		for _, r := range []string{"/mcp/abc", "/api/mcp", "/desk/mcp"} {
			res, ok := ResourceAt(public, r)
			if !ok {
				t.Fatalf("%s is not a resource", r)
			}
			for _, s := range res.Scopes() {
				if !slices.Contains(o.Scopes(), s) {
					t.Fatalf("origin scopes %v lack %s's %q", o.Scopes(), r, s)
				}
			}
		}
	})
	t.Run("no token is issued for the origin", func(t *testing.T) {
		for _, r := range []string{"https://relay.example", "https://relay.example/"} {
			if _, ok := ParseResource(public, r); ok {
				t.Fatalf("%q accepted as a token's resource", r)
			}
		}
	})
	t.Run("a query is dropped: the threads URL as printed names its endpoint", func(t *testing.T) {
		res, ok := ParseResource(public, "https://relay.example/mcp/qyt_cc_abc?part=architect")
		if !ok || res.URL != "https://relay.example/mcp/qyt_cc_abc" || res.Kind != ResourceThreads {
			t.Fatalf("%+v %v", res, ok)
		}
	})
	t.Run("a fragment or another path is refused", func(t *testing.T) {
		for _, r := range []string{"https://relay.example/api/mcp#x", "https://relay.example/api/mcp/?x", "https://relay.example?/api/mcp"} {
			if _, ok := ParseResource(public, r); ok {
				t.Fatalf("%q accepted", r)
			}
		}
	})
}
