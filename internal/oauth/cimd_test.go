package oauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

const publicURL = "http://127.0.0.1:1"

// newHandler is the authorization server on d at publicURL; allowPrivate lets it fetch
// client metadata documents from loopback (the tests' document server).
func newHandler(t *testing.T, d *pg.DB, allowPrivate bool) *oauth.Server {
	t.Helper()
	s, err := oauth.NewHandler(oauth.Deps{DB: d, Q: db.New(), PublicURL: publicURL, Log: slog.New(slog.DiscardHandler), MetadataDocumentsAllowPrivate: allowPrivate})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// authorizeWith asks the authorization server to authorize a client id and returns the
// answer's status and Location (a consent URL when the client was accepted).
func authorizeWith(t *testing.T, s http.Handler, clientID string) (int, string, string) {
	t.Helper()
	sum := sha256.Sum256([]byte(strings.Repeat("v", 50)))
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
		"state": {"s"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {publicURL + "/api/mcp"}, "scope": {"rooms"}}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/authorize?"+q.Encode(), nil))
	body, _ := io.ReadAll(w.Body)
	return w.Code, w.Header().Get("Location"), string(body)
}

func TestClientIDMetadataDocuments(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	var doc string
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=0")
		fmt.Fprint(w, doc)
	}))
	t.Cleanup(docs.Close)
	id := docs.URL + "/client.json"
	newServer := func(allowPrivate bool) http.Handler { return newHandler(t, d, allowPrivate) }
	t.Run("a document naming itself is the client, its loopback redirect URI on any port", func(t *testing.T) {
		doc = `{"client_id":"` + id + `","client_name":"Doc client","redirect_uris":["http://127.0.0.1/callback","javascript:x"],"token_endpoint_auth_method":"none"}`
		status, loc, body := authorizeWith(t, newServer(true), id)
		if status != http.StatusFound || !strings.HasPrefix(loc, "/consent?id=") {
			t.Fatalf("%d %q %s", status, loc, body)
		}
	})
	t.Run("a document whose client_id is another URL is refused", func(t *testing.T) {
		doc = `{"client_id":"https://elsewhere.example/client.json","redirect_uris":["http://127.0.0.1/callback"]}`
		status, loc, body := authorizeWith(t, newServer(true), docs.URL+"/other.json") // not cached yet
		if status == http.StatusFound || !strings.Contains(body, "invalid_client") {
			t.Fatalf("%d %q %s", status, loc, body)
		}
	})
	t.Run("a document is kept for its cache time", func(t *testing.T) {
		doc = `{"client_id":"nothing valid"}`
		status, loc, body := authorizeWith(t, newServer(true), id) // fetched by the first subtest
		if status != http.StatusFound || !strings.HasPrefix(loc, "/consent?id=") {
			t.Fatalf("%d %q %s", status, loc, body)
		}
	})
	t.Run("a document at a private address is not fetched", func(t *testing.T) {
		doc = `{"client_id":"` + strings.Replace(id, "http://", "https://", 1) + `","redirect_uris":["http://127.0.0.1/callback"]}`
		status, loc, body := authorizeWith(t, newServer(false), strings.Replace(id, "http://", "https://", 1))
		if status == http.StatusFound || !strings.Contains(body, "not a public address") {
			t.Fatalf("%d %q %s", status, loc, body)
		}
	})
}
