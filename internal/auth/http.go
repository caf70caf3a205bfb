package auth

import (
	"net/http"
	"strings"
)

// AgentKey returns the agent key of a request: X-Agent-Key, or an Authorization Bearer
// value that has the key's prefix. "" when neither is present.
func AgentKey(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-Agent-Key")); k != "" {
		return k
	}
	if b := BearerToken(r); strings.HasPrefix(b, AgentKeyPrefix) {
		return b
	}
	return ""
}

// BearerToken returns the credential of an `Authorization: Bearer …` header, or "".
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// Challenge is the WWW-Authenticate value of a 401: it names the endpoint's own
// protected-resource metadata document, where an MCP client learns how to sign in. When
// the request carried a bearer credential that was refused it also says so
// (error="invalid_token", RFC 6750 3.1): clients tell "refresh or sign in again" from
// "never signed in" by it.
func Challenge(r *http.Request, metadataURL, scope string) string {
	c := `Bearer resource_metadata="` + metadataURL + `", scope="` + scope + `"`
	if BearerToken(r) != "" {
		c += `, error="invalid_token"`
	}
	return c
}

// MetadataPath is where the RFC 9728 document of a resource path is served: the
// well-known prefix inserted before the resource's path, its query kept (the threads
// resource includes ?part=, and clients compare the resource byte for byte).
func MetadataPath(resourcePathAndQuery string) string {
	return PathMetadata + resourcePathAndQuery
}

// ResourceMetadata is the RFC 9728 protected-resource metadata document.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// Metadata builds the document for a resource. The authorization server is this
// service's own base URL (sign-in is served there).
func Metadata(publicURL, resourcePathAndQuery, name string, scopes []string) ResourceMetadata {
	base := strings.TrimRight(publicURL, "/")
	return ResourceMetadata{
		Resource:               base + resourcePathAndQuery,
		AuthorizationServers:   []string{base},
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           name,
		ResourceDocumentation:  base + "/",
	}
}
