package auth

import (
	"strings"

	"github.com/google/uuid"
)

// Kinds of protected resource: the four MCP endpoints.
const (
	ResourceThreads  = "threads"
	ResourceRoom     = "room"
	ResourceAllRooms = "all_rooms"
	ResourceDesk     = "desk"
	// ResourceOrigin is the service's origin itself: only the root metadata document
	// describes it. No token is ever issued for it (ParseResource refuses it), so a client
	// that reads it still needs an endpoint's own document to connect.
	ResourceOrigin = "origin"
)

// Scopes each endpoint asks for in its 401 and lists in its metadata. A person's token
// carries them; offline_access is the authorization server's alone (never a resource's).
const (
	ScopeThreads = "threads"
	ScopeRooms   = "rooms"
)

// DeskScopes are the desk's scopes, chosen by the person at consent.
var DeskScopes = []string{"conversations:read", "inboxes:read", "saved_replies:read", "reports:read", "notes:write"}

// Resource is one protected resource (RFC 8707 / RFC 9728): the endpoint URL exactly as a
// person pastes it, without query (lower-case scheme and host from the public URL, no
// trailing slash). Every document, challenge and audience check derives from it, so they
// never disagree.
type Resource struct {
	Kind string
	// URL is the resource identifier: public URL + Path.
	URL  string
	Path string
	// ConnectCode (threads) and ProjectID (one room) name what the path names.
	ConnectCode string
	ProjectID   uuid.UUID
}

// Scopes the resource asks for.
func (r Resource) Scopes() []string {
	switch r.Kind {
	case ResourceThreads:
		return []string{ScopeThreads}
	case ResourceDesk:
		return DeskScopes
	case ResourceOrigin:
		return append([]string{ScopeThreads, ScopeRooms}, DeskScopes...)
	default:
		return []string{ScopeRooms}
	}
}

// Name is the resource's name in its metadata.
func (r Resource) Name() string {
	switch r.Kind {
	case ResourceThreads:
		return "relayroom threads"
	case ResourceDesk:
		return "relaydesk"
	case ResourceOrigin:
		return "relayroom"
	default:
		return "relayroom rooms"
	}
}

// MetadataURL is where the resource's RFC 9728 document is served: the well-known prefix
// inserted before its path.
func (r Resource) MetadataURL(publicURL string) string {
	return strings.TrimRight(publicURL, "/") + MetadataPath(r.Path)
}

// ResourceAt returns the resource an endpoint path names (its escaped path, without the
// query); ok is false for a path that is not one of the endpoints. A room path whose id
// is not a UUID is still the room resource (the endpoint answers it), with a nil ProjectID.
func ResourceAt(publicURL, path string) (Resource, bool) {
	base := strings.TrimRight(publicURL, "/")
	r := Resource{URL: base + path, Path: path}
	switch {
	case strings.HasPrefix(path, "/mcp/") && len(path) > len("/mcp/") && !strings.Contains(path[len("/mcp/"):], "/"):
		r.Kind, r.ConnectCode = ResourceThreads, path[len("/mcp/"):]
	case strings.HasPrefix(path, "/api/mcp/p/") && len(path) > len("/api/mcp/p/") && !strings.Contains(path[len("/api/mcp/p/"):], "/"):
		r.Kind = ResourceRoom
		if id, err := uuid.Parse(path[len("/api/mcp/p/"):]); err == nil {
			r.ProjectID = id
		}
	case path == "/api/mcp":
		r.Kind = ResourceAllRooms
	case path == "/desk/mcp":
		r.Kind = ResourceDesk
	default:
		return Resource{}, false
	}
	return r, true
}

// Origin is the resource the root metadata document (RFC 9728 3, at
// /.well-known/oauth-protected-resource itself) describes: the public URL's origin, with
// every endpoint's scopes. It exists for clients whose last fallback is the root location;
// it is never a token's audience.
func Origin(publicURL string) Resource {
	return Resource{Kind: ResourceOrigin, URL: strings.TrimRight(publicURL, "/")}
}

// ParseResource checks a `resource` parameter (RFC 8707) against our endpoints: it must
// be one of them as its metadata publishes it (public URL, path, no fragment, no trailing
// slash). A query is dropped, and the resource is the endpoint without it: Claude Code
// sends the URL it was given, and the threads URLs we print carry `?part=` (RFC 8707
// allows a query; the part is chosen at consent).
func ParseResource(publicURL, resource string) (Resource, bool) {
	base := strings.TrimRight(publicURL, "/")
	if i := strings.IndexByte(resource, '?'); i >= 0 {
		resource = resource[:i]
	}
	if !strings.HasPrefix(resource, base+"/") || strings.Contains(resource, "#") {
		return Resource{}, false
	}
	return ResourceAt(publicURL, resource[len(base):])
}
