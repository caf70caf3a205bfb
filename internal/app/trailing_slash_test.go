package app_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAnEndpointURLWithATrailingSlash: a URL pasted with a slash at its end reaches the
// same endpoint. It was answered "unknown connect code" on a threads URL and "Agent is
// not a participant in this room" on a room's, which sent a participant looking for a
// problem with their access.
func TestAnEndpointURLWithATrailingSlash(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	threads := strings.Replace(s.threadsURL("escalations", "architect"), "?", "/?", 1)
	room := s.base + "/api/mcp/p/" + s.res.Projects["escalations"].ID.String() + "/"
	for name, c := range map[string]struct{ url, key, tool string }{
		"a threads URL": {threads, s.key("acme/architect"), "whoami"},
		"a room's URL":  {room, s.key("acme/architect"), "get_inbox"},
	} {
		t.Run(name, func(t *testing.T) {
			if a := callTool(t, c.url, c.key, c.tool, nil); a.status != http.StatusOK || a.isErr {
				t.Fatalf("%s: %d %s", c.url, a.status, a.body)
			}
		})
	}
}
