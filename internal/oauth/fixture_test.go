package oauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
)

// seedPerson makes a member of a new organisation and a registered client named client
// (redirect URI http://127.0.0.1/cb), for tests that write a grant of their own; n keeps
// the email and the slug apart from the other tests' on the same database.
func seedPerson(t *testing.T, d *pg.DB, n int, client string) (user, org uuid.UUID) {
	t.Helper()
	user, org = uuid.New(), uuid.New()
	ownerExec(t, d,
		fmt.Sprintf(`INSERT INTO app_user (id, email) VALUES ('%s', 'p%d-%s@example.test')`, user, n, strings.ToLower(client)),
		fmt.Sprintf(`INSERT INTO organisation (id, slug, name) VALUES ('%s', 'o%d-%s', 'O')`, org, n, strings.ToLower(client)),
		fmt.Sprintf(`INSERT INTO org_member (org_id, user_id, role) VALUES ('%s', '%s', 'member')`, org, user),
		fmt.Sprintf(`INSERT INTO oauth_client (client_id, redirect_uris, source) VALUES ('%s', '{http://127.0.0.1/cb}', 'registration')`, client),
	)
	return user, org
}

// codeVerifier is the PKCE verifier of the codes seedCode makes.
var codeVerifier = strings.Repeat("v", 50)

// seedCode makes a member of a new organisation, a registered client named client
// (seedPerson), and a grant whose authorization code, for the desk resource, ends at the
// database's now() plus left (as the consent stamps it); it returns the code. Its
// redirect URI is http://127.0.0.1/cb and its PKCE verifier codeVerifier.
func seedCode(t *testing.T, d *pg.DB, n int, client, left string) string {
	t.Helper()
	user, org := seedPerson(t, d, n, client)
	raw, p, err := auth.Generate(auth.CodePrefix)
	if err != nil {
		t.Fatal(err)
	}
	ownerExec(t, d, fmt.Sprintf(`INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, scopes, code_id, code_hash, code_challenge, redirect_uri, code_expires_at)
		 VALUES ('%s', '%s', '%s', '%s', '%s/desk/mcp', '{conversations:read}', '%s', '\x%x', '%s', 'http://127.0.0.1/cb', now() + interval '%s')`,
		org, uuid.New(), client, user, publicURL, p.ID, p.Hash(), codeChallenge(), left))
	return raw
}

// codeChallenge is codeVerifier's S256 challenge.
func codeChallenge() string {
	sum := sha256.Sum256([]byte(codeVerifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// exchangeForm is the token request that redeems code for client (seedCode's).
func exchangeForm(client, code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {client},
		"redirect_uri": {"http://127.0.0.1/cb"}, "code_verifier": {codeVerifier}}
}

// postToken posts form to /token as a client would and returns the status and the JSON
// answer, which every /token answer is.
func postToken(t *testing.T, s http.Handler, form url.Values) (int, map[string]any) {
	t.Helper()
	return postAnswer(t, s, "/token", "application/x-www-form-urlencoded", form.Encode())
}

// postAnswer posts body to route and returns the status and the JSON answer.
func postAnswer(t *testing.T, s http.Handler, route, contentType, body string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, route, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s answered %d, not JSON: %v: %s", route, w.Code, err, w.Body.String())
	}
	return w.Code, m
}
