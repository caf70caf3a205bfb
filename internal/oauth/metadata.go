package oauth

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/relayroom/relayroom/internal/auth"
)

// Metadata is the RFC 8414 authorization server metadata (also served as OpenID discovery,
// which some clients look for first).
type Metadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RegistrationEndpoint                       string   `json:"registration_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	ResponseTypesSupported                     []string `json:"response_types_supported"`
	ResponseModesSupported                     []string `json:"response_modes_supported"`
	GrantTypesSupported                        []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	ScopesSupported                            []string `json:"scopes_supported"`
	ClientIDMetadataDocumentSupported          bool     `json:"client_id_metadata_document_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
	ServiceDocumentation                       string   `json:"service_documentation,omitempty"`
}

// Metadata returns the document. The issuer is the public URL's origin (no path), which
// is what clients that assume the server sits at the resource's origin find.
func (s *Server) Metadata() Metadata {
	scopes := append([]string{auth.ScopeThreads, auth.ScopeRooms}, auth.DeskScopes...)
	scopes = append(slices.Clone(scopes), ScopeOfflineAccess)
	return Metadata{
		Issuer:                                 s.issuer,
		AuthorizationEndpoint:                  s.issuer + RouteAuthorize,
		TokenEndpoint:                          s.issuer + RouteToken,
		RegistrationEndpoint:                   s.issuer + RouteRegister,
		RevocationEndpoint:                     s.issuer + RouteRevoke,
		ResponseTypesSupported:                 []string{"code"},
		ResponseModesSupported:                 []string{"query"},
		GrantTypesSupported:                    []string{"authorization_code", "refresh_token"},
		CodeChallengeMethodsSupported:          []string{"S256"},
		TokenEndpointAuthMethodsSupported:      []string{"none"},
		RevocationEndpointAuthMethodsSupported: []string{"none"},
		ScopesSupported:                        scopes,
		// A client_id that is an https URL is resolved (cimd.go).
		ClientIDMetadataDocumentSupported:          true,
		AuthorizationResponseIssParameterSupported: true,
		ServiceDocumentation:                       s.issuer + "/",
	}
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		// JSON like every other answer of this server: a client that reads the error as
		// JSON got plain text here.
		writeJSON(w, http.StatusMethodNotAllowed, errorAnswer{"invalid_request", "read this document with GET"})
		return
	}
	writeJSON(w, http.StatusOK, s.Metadata())
}

// writeJSON answers the authorization server's own JSON (metadata, registration and its
// RFC 7591 errors); op writes the RFC 6749 ones.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do about it
}
