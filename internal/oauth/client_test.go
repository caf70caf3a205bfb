package oauth_test

import (
	"testing"

	"github.com/relayroom/relayroom/internal/oauth"
)

// TestRedirectURIs: the redirect URIs the clients people use register with are accepted,
// and the ones that would hand a code to a script, a file or a stranger are refused.
func TestRedirectURIs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		accepted bool
		uris     []string
	}{
		{"known clients' redirect URIs are accepted", true, []string{
			"https://claude.ai/api/mcp/auth_callback",
			"https://claude.com/api/mcp/auth_callback",
			"http://localhost:33418/callback",
			"https://chatgpt.com/connector/oauth/abc123",
			"http://127.0.0.1:33418/",
			"http://[::1]:8080/callback",
			"https://vscode.dev/redirect",
			"cursor://anysphere.cursor-mcp/oauth/callback",
		}},
		{"dangerous or foreign redirect URIs are refused", false, []string{
			"javascript:alert(1)",
			"data:text/html,hi",
			"file:///etc/passwd",
			"http://evil.example/callback",
			"https://claude.ai/api/mcp/auth_callback#frag",
			"https://user@claude.ai/cb",
			"/relative/callback",
			"",
		}},
		{"schemes of operating system handlers are refused", false, []string{
			"search-ms:query=invoice&crumb=location:\\\\attacker.example@SSL\\share",
			"ms-msdt:/id",
			"MS-OFFICECMD:x",
			"shell:startup",
		}},
		{"private-use schemes of applications are accepted", true, []string{
			"vscode://vscode.github-authentication/did-authenticate",
			"com.example.app:/oauth2redirect",
			"claude://callback",
		}},
		// url.Parse takes any digits as a port: no client could ever listen there.
		{"a port that is not a port is refused", false, []string{
			"http://127.0.0.1:99999/callback",
			"https://claude.ai:0/cb",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, u := range c.uris {
				if err := oauth.CheckRedirectURI(u); (err == nil) != c.accepted {
					t.Errorf("%q: accepted %v, want %v (%v)", u, err == nil, c.accepted, err)
				}
			}
		})
	}
}
