package oauth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestRefreshSiblingsBothStayLive: a refresh token used twice within its grace gives two
// successors that both stay live, as Claude.ai refreshes from two addresses at once. The
// first use of the later one revoked the earlier (every token of the grant issued before
// it), whose first use was then taken for reuse and revoked the whole grant. The first
// token is inserted without a parent, as tokens issued before parents were recorded.
func TestRefreshSiblingsBothStayLive(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	user, org, grant := uuid.New(), uuid.New(), uuid.New()
	raw, p, err := auth.Generate(auth.RefreshTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ownerExec(t, d,
		`INSERT INTO app_user (id, email) VALUES ('`+user.String()+`', 'p@example.test')`,
		`INSERT INTO organisation (id, slug, name) VALUES ('`+org.String()+`', 'o', 'O')`,
		`INSERT INTO org_member (org_id, user_id, role) VALUES ('`+org.String()+`', '`+user.String()+`', 'member')`,
		`INSERT INTO oauth_client (client_id, redirect_uris, source) VALUES ('clientA', '{http://127.0.0.1/cb}', 'registration')`,
		`INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, scopes, code_id, code_hash, code_challenge, redirect_uri, code_expires_at, code_used_at)
		 VALUES ('`+org.String()+`', '`+grant.String()+`', 'clientA', '`+user.String()+`', '`+publicURL+`/desk/mcp', '{conversations:read}', 'codeA', '\x00', 'c', 'http://127.0.0.1/cb', now(), now())`,
		fmt.Sprintf(`INSERT INTO oauth_token (org_id, token_id, grant_id, kind, secret_hash, expires_at) VALUES ('%s', '%s', '%s', 'refresh', '\x%x', now() + interval '1 day')`, org, p.ID, grant, p.Hash()),
	)
	s := newHandler(t, d, false)
	refresh := func(rt string) (int, map[string]any) {
		t.Helper()
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"clientA"}}
		r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		var body map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		return w.Code, body
	}
	s1, a := refresh(raw) // two processes refresh with R0 at once
	s2, b := refresh(raw)
	if s1 != http.StatusOK || s2 != http.StatusOK {
		t.Fatalf("R0 twice within the grace: %d %v, %d %v", s1, a, s2, b)
	}
	r1a, r1b := a["refresh_token"].(string), b["refresh_token"].(string)
	if st, body := refresh(r1b); st != http.StatusOK {
		t.Fatalf("the later sibling: %d %v", st, body)
	}
	if st, body := refresh(r1a); st != http.StatusOK {
		t.Fatalf("the earlier sibling, never used, after the later one's first use: %d %v", st, body)
	}
	if st, body := refresh(r1b); st != http.StatusOK {
		t.Fatalf("the later sibling once more (within its grace): %d %v", st, body)
	}
}
