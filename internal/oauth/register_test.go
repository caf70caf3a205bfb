package oauth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestRegistrationRefusals: dynamic client registration (RFC 7591) refuses what it cannot
// register with its error code and a description that says what is wrong.
func TestRegistrationRefusals(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	s := newHandler(t, d, false)
	register := func(t *testing.T, body string) (int, string, string) {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, oauth.RouteRegister, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(w, r)
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatalf("status %d, body not JSON: %s", w.Code, w.Body)
		}
		return w.Code, e.Error, e.Description
	}
	for _, c := range []struct{ name, body, code, says string }{
		{"not JSON", `{`, "invalid_client_metadata", "JSON object"},
		{"not an object", `[]`, "invalid_client_metadata", "JSON object"},
		{"null", `null`, "invalid_client_metadata", "JSON object"},
		{"an object followed by more", `{"redirect_uris":["http://127.0.0.1/cb"]} {"redirect_uris":["http://127.0.0.1/other"]}`, "invalid_client_metadata", "JSON object"},
		{"an object followed by text", `{"redirect_uris":["http://127.0.0.1/cb"]}x`, "invalid_client_metadata", "JSON object"},
		{"a client authenticated by a signed JWT", `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"private_key_jwt"}`,
			"invalid_client_metadata", `"private_key_jwt" is not supported`},
		{"an implicit grant", `{"redirect_uris":["http://127.0.0.1/cb"],"grant_types":["implicit"]}`, "invalid_client_metadata", "grant_types"},
		{"no usable redirect URI", `{"redirect_uris":["javascript:alert(1)"]}`, "invalid_redirect_uri", "javascript"},
		{"well-formed but too long", fmt.Sprintf(`{"redirect_uris":["http://127.0.0.1/cb"],"software_id":%q}`, strings.Repeat("x", oauth.MaxRegistrationBytes)),
			"invalid_client_metadata", fmt.Sprintf("larger than %d bytes", oauth.MaxRegistrationBytes)},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, code, desc := register(t, c.body)
			if status != http.StatusBadRequest || code != c.code || !strings.Contains(desc, c.says) {
				t.Fatalf("%d %s %q, want 400 %s saying %q", status, code, desc, c.code, c.says)
			}
		})
	}
}
