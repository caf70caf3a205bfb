package mcp

import (
	"net/http"
	"slices"
)

// Protocol versions served. The handshake era negotiates once with initialize; the
// stateless era (2026-07-28) carries the version on every request, in the
// MCP-Protocol-Version header and in params._meta.
const (
	version20241105 = "2024-11-05"
	version20250326 = "2025-03-26"
	version20250618 = "2025-06-18"
	version20251125 = "2025-11-25"
	version20260728 = "2026-07-28"

	// latestHandshakeVersion answers an initialize asking for a version we do not
	// speak: the lifecycle spec wants the newest version the server supports, and
	// initialize cannot negotiate into the stateless era.
	latestHandshakeVersion = version20251125
)

// Names of the per-request _meta keys and headers of the stateless era, as the
// go-sdk client sends them.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
)

// era says which set of protocol rules a request follows.
type era int

const (
	eraHandshake era = iota
	eraStateless
)

// ProtocolVersions returns every protocol version the handler serves, newest first.
func ProtocolVersions() []string {
	return []string{version20260728, version20251125, version20250618, version20250326, version20241105}
}

func supportedVersion(v string) bool {
	return slices.Contains(ProtocolVersions(), v)
}

// statelessVersion reports whether v belongs to the stateless era. Versions compare as
// strings because they are ISO dates.
func statelessVersion(v string) bool { return v >= version20260728 }

// negotiateHandshake picks the version an initialize answers with: the client's own if
// we speak it in the handshake era, else the newest handshake version.
func negotiateHandshake(requested string) string {
	if supportedVersion(requested) && !statelessVersion(requested) {
		return requested
	}
	return latestHandshakeVersion
}

// headerVersionError checks the MCP-Protocol-Version header before authentication: a
// version we do not serve is -32022, unless the call's _meta names another version, in
// which case the disagreement is reported first (-32020), as the stateless era requires.
func headerVersionError(r *http.Request, msg *message) *protocolError {
	v := r.Header.Get(headerProtocolVersion)
	if v == "" || supportedVersion(v) {
		return nil
	}
	if msg.isCall() {
		if e := versionMismatch(v, readRequestMeta(msg.params)); e != nil {
			return e
		}
	}
	return unsupportedVersion(v)
}

// unsupportedVersion is the error of the stateless era's version negotiation. Its data
// lets a client (the go-sdk one does) retry with a version from the list.
func unsupportedVersion(requested string) *protocolError {
	return &protocolError{
		status:  http.StatusBadRequest,
		code:    codeUnsupportedProtocolVersion,
		message: "unsupported protocol version " + quote(requested),
		data: unsupportedVersionData{
			Supported: ProtocolVersions(),
			Requested: requested,
		},
	}
}

type unsupportedVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested"`
}
