package app_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestAClientIdentifiedByItsMetadataDocumentConnects: the go-sdk client, identified by a
// client ID metadata document (an https URL, served here by a local TLS server whose
// certificate the server is told to trust) instead of registering, connects with only
// the URL: the server fetches the document, keeps the client, the person consents to it
// by its document's name, and its token works. Without the test-only setting the same
// document, on a loopback address, is never fetched.
func TestAClientIdentifiedByItsMetadataDocumentConnects(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int32
	var docURL string
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprintf(w, `{"client_id":%q,"client_name":"Document client","redirect_uris":[%q],"grant_types":["authorization_code","refresh_token"],"token_endpoint_auth_method":"none"}`,
			docURL, strings.Replace(callbackURL, ":33418", "", 1)) // port-less loopback: any port matches (RFC 8252)
	}))
	t.Cleanup(docs.Close)
	docURL = docs.URL + "/client.json"
	roots := x509.NewCertPool()
	roots.AddCert(docs.Certificate())

	t.Run("with private addresses allowed for the test, the document is the client", func(t *testing.T) {
		s := startServerOpts(t, serverOptions{file: signInDemo, tune: func(c *config.Config) {
			c.OAuthMetadataDocumentsAllowPrivate, c.OAuthMetadataDocumentRoots = true, roots
		}})
		cs := sdkOAuthClientWith(t, newBrowser(t, s.base), s.base+"/api/mcp", "Backend", docURL)
		callJSON(t, cs, "list_rooms", map[string]any{})
		var name, source string
		asOwner(t, s, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT client_name, source FROM oauth_client WHERE client_id = $1`, docURL).Scan(&name, &source)
		})
		if name != "Document client" || source != "metadata_document" || fetched.Load() == 0 {
			t.Fatalf("client %q from %q, document fetched %d times", name, source, fetched.Load())
		}
	})
	t.Run("the consent page says which host named the client", func(t *testing.T) {
		// A document anyone publishes may call itself "Claude": the host that published it
		// is what the person can check.
		s := startServerOpts(t, serverOptions{file: signInDemo, tune: func(c *config.Config) {
			c.OAuthMetadataDocumentsAllowPrivate, c.OAuthMetadataDocumentRoots = true, roots
		}})
		sum := sha256.Sum256([]byte(strings.Repeat("v", 50)))
		q := url.Values{"response_type": {"code"}, "client_id": {docURL}, "redirect_uri": {callbackURL}, "state": {"st"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "resource": {s.base + "/api/mcp"}}
		_, body := newBrowser(t, s.base).consentPage(s.base + "/authorize?" + q.Encode())
		host := strings.TrimPrefix(docs.URL, "https://")
		testfix.CheckContains(t, "consent page", html.UnescapeString(body), "<strong>Document client</strong> (as named by <strong>"+host+"</strong>, returning to")
	})
	t.Run("by default a document on a loopback address is refused unfetched", func(t *testing.T) {
		s := startServerOpts(t, serverOptions{file: signInDemo})
		before := fetched.Load()
		sum := sha256.Sum256([]byte(strings.Repeat("v", 50)))
		q := url.Values{"response_type": {"code"}, "client_id": {docURL}, "redirect_uri": {callbackURL}, "state": {"st"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "resource": {s.base + "/api/mcp"}}
		resp, _ := newBrowser(t, s.base).get(s.base + "/authorize?" + q.Encode())
		if resp.StatusCode == http.StatusOK || resp.Request.URL.Path == "/consent" || resp.Request.URL.Path == "/login" || fetched.Load() != before {
			t.Fatalf("authorize answered %d at %s; document fetched %d more times", resp.StatusCode, resp.Request.URL, fetched.Load()-before)
		}
	})
}
