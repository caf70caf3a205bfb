package oauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/oauth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/throttle"
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
	return w.Code, w.Header().Get("Location"), w.Body.String()
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
		if status == http.StatusFound || !strings.Contains(body, "could not be fetched") {
			t.Fatalf("%d %q %s", status, loc, body)
		}
	})
	t.Run("a failed fetch says nothing of what the server's network answered", func(t *testing.T) {
		// The dial error named the address the server's resolver gave an internal name,
		// and a status told what the URL answered from the server's network position.
		for _, cid := range []string{"https://localhost:8443/x", docs.URL + "/missing.json"} {
			srv := newServer(false)
			if strings.HasPrefix(cid, docs.URL) {
				srv = newServer(true)
				doc = ""
			}
			status, _, body := authorizeWith(t, srv, cid)
			if status != http.StatusBadRequest || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "dial") || strings.Contains(body, "500") {
				t.Fatalf("%s: %d %s", cid, status, body)
			}
		}
	})
}

// TestMetadataDocumentFetchesAreCounted: anyone may name a client metadata document at
// /authorize, so each fetch counts against the asking address like a registration: an
// address past the limit makes the server fetch nothing more. Before, every request
// fetched (a failed document is not kept), and valid documents stored clients past the
// /register limit.
func TestMetadataDocumentFetchesAreCounted(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	var hits atomic.Int64
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(docs.Close)
	const limit = 5
	s, err := oauth.NewHandler(oauth.Deps{DB: d, Q: db.New(), PublicURL: publicURL, Log: slog.New(slog.DiscardHandler), MetadataDocumentsAllowPrivate: true,
		Registrations: throttle.New(d, throttle.Limits{Window: time.Minute, PerAddress: limit}, slog.New(slog.DiscardHandler), nil),
		ClientAddress: func(*http.Request) string { return "198.51.100.7" }})
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range 3 * limit {
		_, _, last = authorizeWith(t, s, fmt.Sprintf("%s/client-%d.json", docs.URL, i))
	}
	if n := hits.Load(); n != limit {
		t.Fatalf("%d documents fetched for one address, want %d", n, limit)
	}
	if !strings.Contains(last, "too many documents fetched for this address") {
		t.Fatalf("the refusal: %s", last)
	}
}
