package app_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
)

// signInDeskDemo is signInDemo with acme's helpdesk: Ana, an owner of acme, signs in.
const signInDeskDemo = signInDemo + `
desk:
  - workspace: acme
    inboxes:
      - {slug: support, name: Support}
`

// TestThePersonsDeskConnectsWithOnlyTheURL: a client given only the desk's URL signs the
// person in; at consent they pick a workspace and the permissions; the token the desk then
// accepts acts as that person in that workspace with those permissions, and works nowhere
// else.
func TestThePersonsDeskConnectsWithOnlyTheURL(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, signInDeskDemo, nil)
	deskURL := s.base + "/desk/mcp"
	if !slices.Equal(desk.Scopes, auth.DeskScopes) {
		t.Fatalf("the desk's scopes %v differ from those consent offers %v", desk.Scopes, auth.DeskScopes)
	}
	t.Run("every permission: the desk's tools answer for the workspace chosen", func(t *testing.T) {
		cs := sdkOAuthClient(t, s, deskURL, "Acme Corp")
		if names := toolNames(t, cs); !slices.Contains(names, desk.ToolListInboxes) {
			t.Fatalf("tools %v", names)
		}
		inboxes, text := callJSON(t, cs, desk.ToolListInboxes, nil)
		if !strings.Contains(text, `"name":"Support"`) || inboxes == nil {
			t.Fatalf("list_inboxes: %s", text)
		}
		if _, text := callJSON(t, cs, desk.ToolSearchConversations, map[string]any{"query": "csv"}); !strings.Contains(text, "conversations") {
			t.Fatalf("search_conversations: %s", text)
		}
	})
	t.Run("the permissions left ticked are all the token may do", func(t *testing.T) {
		br := newBrowser(t, s.base)
		br.scopes = []string{desk.ScopeInboxesRead}
		cs := sdkOAuthClientWith(t, br, deskURL, "Acme Corp", "")
		callJSON(t, cs, desk.ToolListInboxes, nil)
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: desk.ToolSearchConversations, Arguments: map[string]any{"query": "csv"}})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"required_scope":"conversations:read"`) {
			t.Fatalf("a search without conversations:read: %v %+v", err, res)
		}
	})
	deskToken := func(t *testing.T) string {
		t.Helper()
		f := newFlow(t, s, deskURL)
		cb := f.br.authorize(f.authURL(func(q url.Values) { q.Set("scope", strings.Join(auth.DeskScopes, " ")) }), "Acme Corp")
		status, tok := f.exchange(t, cb.Query().Get("code"), nil)
		if status != http.StatusOK {
			t.Fatalf("token: %d %v", status, tok)
		}
		return tok["access_token"].(string)
	}
	t.Run("a request naming none of the desk's scopes is offered them all", func(t *testing.T) {
		// Clients add offline_access or openid themselves; the page then offered no
		// permission, and its Allow could never succeed.
		for _, scope := range []string{"offline_access", "openid profile"} {
			f := newFlow(t, s, deskURL)
			_, body := f.br.consentPage(f.authURL(func(q url.Values) { q.Set("scope", scope) }))
			for _, sc := range desk.Scopes {
				if !strings.Contains(body, `value="`+sc+`"`) {
					t.Fatalf("scope %q: the consent page does not offer %s:\n%s", scope, sc, body)
				}
			}
			cb := f.br.authorize(f.authURL(func(q url.Values) { q.Set("scope", scope) }), "Acme Corp")
			if status, tok := f.exchange(t, cb.Query().Get("code"), nil); status != http.StatusOK {
				t.Fatalf("scope %q: token %d %v", scope, status, tok)
			}
		}
	})
	t.Run("a desk token works at the desk only, and a rooms token not at the desk", func(t *testing.T) {
		tok := deskToken(t)
		if got := bearerStatus(t, deskURL, tok); got != http.StatusOK {
			t.Fatalf("desk token at the desk: %d", got)
		}
		if got := bearerStatus(t, s.base+"/api/mcp", tok); got != http.StatusUnauthorized {
			t.Fatalf("desk token at the rooms: %d", got)
		}
		f := newFlow(t, s, s.base+"/api/mcp")
		status, rooms := f.exchange(t, f.code(t), nil)
		if status != http.StatusOK {
			t.Fatalf("rooms token: %d %v", status, rooms)
		}
		if got := bearerStatus(t, deskURL, rooms["access_token"].(string)); got != http.StatusUnauthorized {
			t.Fatalf("rooms token at the desk: %d", got)
		}
	})
	t.Run("the token ends when the person leaves the workspace", func(t *testing.T) {
		tok := deskToken(t)
		ownerExec(t, s, `DELETE FROM org_member WHERE user_id = (SELECT id FROM app_user WHERE email = $1)`, anaEmail)
		if got := bearerStatus(t, deskURL, tok); got != http.StatusUnauthorized {
			t.Fatalf("after leaving the workspace: %d", got)
		}
	})
}
