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
