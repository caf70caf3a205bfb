package auth

import (
	"net/http"
	"strings"

	"github.com/relayroom/relayroom/internal/httpapi"
)

// PathMetadata is the well-known prefix of every protected-resource metadata document
// (RFC 9728): the origin's own at the prefix itself, an endpoint's at the prefix followed
// by the endpoint's path.
const PathMetadata = "/.well-known/oauth-protected-resource"

// NewMetadataHandler serves the RFC 9728 documents for exactly the resources we protect,
// from the one helper (ResourceAt) that also makes the challenges and checks audiences:
// the resource is the endpoint URL as a person pastes it, without query. The root
// location describes the origin (Origin) for clients that fall back to it.
func NewMetadataHandler(publicURL string) *httpapi.Mux {
	serve := func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.EscapedPath(), PathMetadata)
		res, ok := ResourceAt(publicURL, path)
		if path == "" {
			res, ok = Origin(publicURL), true
		}
		if !ok {
			httpapi.WriteError(w, r, http.StatusNotFound, "no protected resource at this path")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		httpapi.WriteJSON(w, http.StatusOK, Metadata(publicURL, res.Path, res.Name(), res.Scopes()))
	}
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: PathMetadata}, serve)
	m.Handle(httpapi.Route{Method: http.MethodGet, Path: PathMetadata + "/{resource...}"}, serve)
	return m
}
