package oauth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/egress"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/throttle"
)

// Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document, MCP
// 2025-11-25): a client_id that is an https URL names a JSON document describing the
// client, fetched by the server. Bounds of that fetch:
const (
	MetadataDocumentMaxBytes = 64 << 10
	MetadataDocumentTimeout  = 5 * time.Second
	// A document is cached for its Cache-Control max-age, within these bounds (a missing
	// header gets the default).
	MetadataDocumentMinCache     = 5 * time.Minute
	MetadataDocumentDefaultCache = time.Hour
	MetadataDocumentMaxCache     = 24 * time.Hour
)

// isMetadataDocumentID reports a client_id that names a metadata document.
func (s *Server) isMetadataDocumentID(id string) bool {
	if strings.HasPrefix(id, "https://") {
		return true
	}
	// Tests serve documents over http on loopback, when private addresses are allowed.
	return s.deps.MetadataDocumentsAllowPrivate && strings.HasPrefix(id, "http://127.0.0.1:")
}

func (s *Server) documentClient() *http.Client {
	dialer := &net.Dialer{Timeout: MetadataDocumentTimeout}
	if !s.deps.MetadataDocumentsAllowPrivate {
		egress.PublicOnly(dialer, "client metadata document")
	}
	return &http.Client{
		Timeout: MetadataDocumentTimeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: MetadataDocumentTimeout, ResponseHeaderTimeout: MetadataDocumentTimeout,
			TLSClientConfig: &tls.Config{RootCAs: s.deps.MetadataDocumentRoots, MinVersion: tls.VersionTLS12}},
		// The document must be at its URL: its client_id is that URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// metadataDocument is the part of a client's document we use.
type metadataDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// cacheFor reads max-age from Cache-Control, within the bounds.
func cacheFor(h http.Header) time.Duration {
	d := MetadataDocumentDefaultCache
	for _, part := range strings.Split(h.Get("Cache-Control"), ",") {
		part = strings.TrimSpace(strings.ToLower(part))
		if part == "no-store" || part == "no-cache" {
			d = MetadataDocumentMinCache
		}
		if v, ok := strings.CutPrefix(part, "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				d = time.Duration(n) * time.Second
			}
		}
	}
	return min(max(d, MetadataDocumentMinCache), MetadataDocumentMaxCache)
}

// fetchClient resolves a metadata document into a client and keeps it (so grants can
// reference it and the next authorization within its cache time needs no fetch).
func (s *Server) fetchClient(ctx context.Context, id string) (client, error) {
	refuse := func(format string, args ...any) (client, error) {
		return client{}, oidc.ErrInvalidClient().WithDescription("client metadata document: %s", fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil || u.Path == "" || u.Path == "/" {
		return refuse("the client_id must be an https URL with a path")
	}
	revoked := false
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: id}, func(tx *pg.Tx) error {
		var err error
		revoked, err = s.deps.Q.OAuthClientIsRevoked(ctx, tx, id)
		return err
	})
	if err != nil && !pg.IsNoRows(err) {
		return client{}, storeError("read client", err)
	}
	if revoked {
		return client{}, errNoClient
	}
	// Anyone may name a document: each fetch counts against the asking address, as a
	// registration does, so no address makes the server fetch (or store clients) at will.
	if address, _ := ctx.Value(clientAddressKey{}).(string); s.deps.Registrations != nil && address != "" {
		at := throttle.Attempt{Address: "register/" + address, Always: true}
		if err := s.deps.Registrations.Admit(ctx, at); err != nil {
			return refuse("too many documents fetched for this address: retry later")
		}
		defer s.deps.Registrations.Refused(ctx, at)
	}
	ctx, cancel := context.WithTimeout(ctx, MetadataDocumentTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return refuse("the client_id is not a URL")
	}
	req.Header.Set("Accept", "application/json")
	// What went wrong goes to the log, not to the asker: the dial error names the
	// address the server's resolver gave (an internal name's, even when refused), and
	// the status of a URL fetched from the server's network position is the server's to
	// know.
	resp, err := s.documentClient().Do(req)
	if err != nil {
		s.deps.Log.InfoContext(ctx, "oauth: client metadata document not fetched", "client_id", id, "error", err.Error())
		return refuse("could not be fetched from that URL")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.deps.Log.InfoContext(ctx, "oauth: client metadata document not fetched", "client_id", id, "status", resp.StatusCode)
		return refuse("fetching it did not answer 200 OK")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MetadataDocumentMaxBytes+1))
	if err != nil {
		return refuse("could not be read")
	}
	if len(body) > MetadataDocumentMaxBytes {
		return refuse("larger than %d bytes", MetadataDocumentMaxBytes)
	}
	var doc metadataDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return refuse("not a JSON object")
	}
	if doc.ClientID != id {
		return refuse("its client_id must be its own URL")
	}
	if doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none" {
		return refuse("only public clients (token_endpoint_auth_method none) are accepted")
	}
	var uris []string
	for _, r := range doc.RedirectURIs {
		if CheckRedirectURI(r) == nil && !slices.Contains(uris, r) && len(uris) < MaxRedirectURIs {
			uris = append(uris, r)
		}
	}
	if len(uris) == 0 {
		return refuse("no acceptable redirect_uris")
	}
	name := doc.ClientName
	if len(name) > MaxClientNameBytes {
		name = name[:MaxClientNameBytes]
	}
	name = strings.ToValidUTF8(strings.ReplaceAll(name, "\x00", ""), "")
	until := s.deps.Now().Add(cacheFor(resp.Header))
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: id}, func(tx *pg.Tx) error {
		return s.deps.Q.OAuthClientInsert(ctx, tx, db.OAuthClientInsertParams{ClientID: id, ClientName: name, RedirectUris: uris, Source: sourceDocument, FetchedUntil: &until})
	})
	if err != nil {
		return client{}, storeError("keep client", err)
	}
	return client{id: id, name: name, redirectURIs: uris}, nil
}

// Client sources, as stored.
const (
	sourceRegistration = "registration"
	sourceDocument     = "metadata_document"
)
