package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

const (
	methodInitialize    = "initialize"
	methodInitialized   = "notifications/initialized"
	methodPing          = "ping"
	methodToolsList     = "tools/list"
	methodToolsCall     = "tools/call"
	methodResourcesList = "resources/list"
	methodResourcesRead = "resources/read"
	methodTemplatesList = "resources/templates/list"
	methodPromptsList   = "prompts/list"
	methodPromptsGet    = "prompts/get"
	methodDiscover      = "server/discover"
)

// servedMethods is what the plain-GET description lists.
func servedMethods() []string {
	return []string{
		methodInitialize, methodInitialized, methodPing, methodToolsList, methodToolsCall,
		methodResourcesList, methodResourcesRead, methodTemplatesList, methodPromptsList,
		methodPromptsGet, methodDiscover,
	}
}

// checkEra decides which era a message follows and applies the stateless era's
// consistency rules, the way the go-sdk server does: a call that names 2026-07-28 in
// the MCP-Protocol-Version header or in params._meta must carry both, equal, plus
// Mcp-Method (and Mcp-Name for tools/call) matching the body.
func checkEra(r *http.Request, msg *message) (era, *protocolError) {
	headerVersion := r.Header.Get(headerProtocolVersion)
	var meta requestMeta
	if msg.isCall() {
		meta = readRequestMeta(msg.params)
	}
	// A _meta version of the handshake era selects nothing, as in the go-sdk.
	metaStateless := meta.versionPresent && statelessVersion(meta.version)
	if !statelessVersion(headerVersion) && !metaStateless {
		return eraHandshake, nil
	}
	bad := func(code int, text string) (era, *protocolError) {
		return eraStateless, &protocolError{status: http.StatusBadRequest, code: code, message: text}
	}
	// Two versions that disagree are a header mismatch whichever of them we serve: the
	// client has to fix the disagreement before version negotiation means anything.
	if mismatch := versionMismatch(headerVersion, meta); mismatch != nil {
		return eraStateless, mismatch
	}
	if metaStateless && !supportedVersion(meta.version) {
		e := unsupportedVersion(meta.version)
		return eraStateless, e
	}
	if headerVersion == "" {
		return bad(codeHeaderMismatch, "the "+headerProtocolVersion+" header is required for requests carrying "+quote(metaProtocolVersion))
	}
	if msg.isCall() {
		if !meta.versionPresent {
			return bad(codeInvalidParams, "missing or invalid _meta field "+quote(metaProtocolVersion))
		}
		if !meta.capabilitiesPresent {
			return bad(codeInvalidParams, "missing or invalid _meta field "+quote(metaClientCapabilities)+" (an object; {} when the client has none)")
		}
	}
	switch m := r.Header.Get(headerMethod); {
	case m == "":
		return bad(codeHeaderMismatch, "missing required "+headerMethod+" header")
	case m != msg.method:
		return bad(codeHeaderMismatch, headerMethod+" header "+quote(m)+" does not match the body's method "+quote(msg.method))
	}
	// A tools/call without a name is left to dispatch, whose -32602 says more than a
	// header mismatch would.
	if msg.method == methodToolsCall {
		if name, ok := toolNameOf(msg.params); ok && name != "" {
			switch n := r.Header.Get(headerName); {
			case n == "":
				return bad(codeHeaderMismatch, "missing required "+headerName+" header for method "+quote(msg.method))
			case n != name:
				return bad(codeHeaderMismatch, headerName+" header "+quote(n)+" does not match the body's name "+quote(name))
			}
		}
	}
	return eraStateless, nil
}

// requestMeta is what the stateless era reads of params._meta.
type requestMeta struct {
	version             string
	versionPresent      bool // a string protocol version is present
	capabilitiesPresent bool // clientCapabilities is present and an object
}

// readRequestMeta reads params._meta; fields that are missing or of the wrong type read
// as absent.
func readRequestMeta(params json.RawMessage) requestMeta {
	var m requestMeta
	if params == nil || !mayNameMeta(params) {
		return m
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta == nil {
		return m
	}
	if raw, ok := p.Meta[metaProtocolVersion]; ok && json.Unmarshal(raw, &m.version) == nil {
		m.versionPresent = true
	}
	var caps map[string]json.RawMessage
	if raw, ok := p.Meta[metaClientCapabilities]; ok && json.Unmarshal(raw, &caps) == nil && caps != nil {
		m.capabilitiesPresent = true
	}
	return m
}

// mayNameMeta reports whether params can hold a member that decodes as "_meta" (matched
// as encoding/json matches names, in any case; written with an escape it could be anything,
// hence the backslash), so that the many calls without one skip decoding their params for it.
func mayNameMeta(params json.RawMessage) bool {
	if bytes.IndexByte(params, '\\') >= 0 {
		return true
	}
	for i := 0; i+5 <= len(params); i++ {
		if params[i] == '_' && bytes.EqualFold(params[i+1:i+5], []byte("meta")) {
			return true
		}
	}
	return false
}

// versionMismatch is the -32020 answer when the header and _meta both name a version
// and the two differ; nil otherwise.
func versionMismatch(headerVersion string, meta requestMeta) *protocolError {
	if headerVersion == "" || !meta.versionPresent || headerVersion == meta.version {
		return nil
	}
	return &protocolError{
		status:  http.StatusBadRequest,
		code:    codeHeaderMismatch,
		message: headerProtocolVersion + " header " + quote(headerVersion) + " does not match " + quote(metaProtocolVersion) + " " + quote(meta.version),
	}
}

func toolNameOf(params json.RawMessage) (string, bool) {
	var p struct {
		Name *string `json:"name"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil || p.Name == nil {
		return "", false
	}
	return *p.Name, true
}

// implementation is serverInfo.
type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// resultMeta is the _meta every stateless-era result carries, as the go-sdk server
// sends it.
type resultMeta struct {
	ServerInfo implementation `json:"io.modelcontextprotocol/serverInfo"`
}

// statelessFields are the members a stateless-era result adds: who answered, that the
// result is complete (no input requests), and, on discover and the lists, cache hints.
// ttlMs 0 makes every answer immediately stale; "private" because answers sit behind a
// credential.
type statelessFields struct {
	Meta       *resultMeta `json:"_meta,omitempty"`
	ResultType string      `json:"resultType,omitempty"`
}

type cacheFields struct {
	TTLMs      *int   `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

func (h *handler[S]) stateless(er era) statelessFields {
	if er != eraStateless {
		return statelessFields{}
	}
	return statelessFields{Meta: &resultMeta{ServerInfo: h.server}, ResultType: "complete"}
}

func cache(er era) cacheFields {
	if er != eraStateless {
		return cacheFields{}
	}
	zero := 0
	return cacheFields{TTLMs: &zero, CacheScope: "private"}
}

// serverCapabilities declares tools, resources and prompts. Resources and prompts are
// served (empty lists, not-found on reads) because the rooms contract requires the lists
// to answer, and a server that answers a method must declare its capability. Nothing is
// ever listChanged or subscribable: toolsets are static per deployment, and a true would
// make a 2026-07-28 client open subscriptions/listen, which we do not serve.
type serverCapabilities struct {
	Tools     listCapability     `json:"tools"`
	Resources resourceCapability `json:"resources"`
	Prompts   listCapability     `json:"prompts"`
}

type listCapability struct {
	ListChanged bool `json:"listChanged"`
}

type resourceCapability struct {
	ListChanged bool `json:"listChanged"`
	Subscribe   bool `json:"subscribe"`
}

type initializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    serverCapabilities `json:"capabilities"`
	ServerInfo      implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

type discoverResult struct {
	statelessFields
	cacheFields
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      serverCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
}

type toolsListResult struct {
	statelessFields
	cacheFields
	Tools []toolInfo `json:"tools"`
}

type resourcesListResult struct {
	statelessFields
	cacheFields
	Resources []struct{} `json:"resources"`
}

type templatesListResult struct {
	statelessFields
	cacheFields
	ResourceTemplates []struct{} `json:"resourceTemplates"`
}

type promptsListResult struct {
	statelessFields
	cacheFields
	Prompts []struct{} `json:"prompts"`
}

type emptyResult struct{}

// methodsServed are the methods dispatch answers (in one era or the other).
var methodsServed = map[string]bool{
	methodInitialize: true, methodPing: true, methodToolsList: true, methodResourcesList: true, methodResourcesRead: true,
	methodTemplatesList: true, methodPromptsList: true, methodPromptsGet: true, methodDiscover: true,
}

// dispatch runs a call's method. Only the methods of the request's era exist: the
// stateless era has no initialize and no ping (they are removed there, and the go-sdk
// answers them -32601), and the handshake era has no server/discover.
func (h *handler[S]) dispatch(ctx context.Context, c *caller[S], msg *message, er era, rid string) (any, *protocolError) {
	if msg.method == methodToolsCall {
		return h.callTool(ctx, c, msg.params, er, rid)
	}
	if _, err := c.settle(ctx); err != nil {
		return nil, authProblem(err)
	}
	// MCP's params are an object on every request (JSON-RPC allows an array too): one of
	// another type was taken without a word by every method but initialize and tools/call.
	if msg.params != nil && bytes.TrimSpace(msg.params)[0] != '{' && methodsServed[msg.method] {
		return nil, &protocolError{code: codeInvalidParams, message: "Invalid params: " + msg.method + " params must be an object"}
	}
	switch msg.method {
	case methodToolsList:
		return toolsListResult{statelessFields: h.stateless(er), cacheFields: cache(er), Tools: h.listingOrEmpty()}, nil
	case methodResourcesList:
		return resourcesListResult{statelessFields: h.stateless(er), cacheFields: cache(er), Resources: []struct{}{}}, nil
	case methodTemplatesList:
		return templatesListResult{statelessFields: h.stateless(er), cacheFields: cache(er), ResourceTemplates: []struct{}{}}, nil
	case methodResourcesRead:
		return nil, resourceNotFound(msg.params)
	case methodPromptsList:
		return promptsListResult{statelessFields: h.stateless(er), cacheFields: cache(er), Prompts: []struct{}{}}, nil
	case methodPromptsGet:
		return nil, promptNotFound(msg.params)
	}
	if er == eraStateless {
		switch msg.method {
		case methodDiscover:
			res := discoverResult{
				statelessFields:   h.stateless(er),
				cacheFields:       cache(er),
				SupportedVersions: ProtocolVersions(),
				Instructions:      h.ep.Instructions,
			}
			return res, nil
		case methodInitialize, methodPing:
			return nil, &protocolError{code: codeMethodNotFound, message: "Method not found: " + quote(msg.method) + " is not part of protocol version " + version20260728}
		}
		return nil, methodNotFound(msg.method)
	}
	switch msg.method {
	case methodInitialize:
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if msg.params != nil && json.Unmarshal(msg.params, &p) != nil {
			return nil, &protocolError{code: codeInvalidParams, message: "Invalid params: initialize params must be an object"}
		}
		return initializeResult{
			ProtocolVersion: negotiateHandshake(p.ProtocolVersion),
			ServerInfo:      h.server,
			Instructions:    h.ep.Instructions,
		}, nil
	case methodPing:
		return emptyResult{}, nil
	case methodDiscover:
		return nil, &protocolError{code: codeMethodNotFound, message: "Method not found: " + quote(msg.method) + " needs protocol version " + version20260728 + " in params._meta and the " + headerProtocolVersion + " header"}
	}
	return nil, methodNotFound(msg.method)
}

// resourceNotFound answers resources/read: no resource exists, so every URI is unknown.
// SEP-2164: -32602 with the requested URI in data.
func resourceNotFound(params json.RawMessage) *protocolError {
	var p struct {
		URI *string `json:"uri"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil || p.URI == nil {
		return &protocolError{code: codeInvalidParams, message: "Invalid params: resources/read needs a string \"uri\""}
	}
	return &protocolError{code: codeInvalidParams, message: "Resource not found: " + quote(*p.URI), data: map[string]string{"uri": *p.URI}}
}

// promptNotFound answers prompts/get: no prompt exists.
func promptNotFound(params json.RawMessage) *protocolError {
	var p struct {
		Name *string `json:"name"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil || p.Name == nil {
		return &protocolError{code: codeInvalidParams, message: "Invalid params: prompts/get needs a string \"name\""}
	}
	return &protocolError{code: codeInvalidParams, message: "Invalid params: unknown prompt " + quote(*p.Name)}
}

func methodNotFound(method string) *protocolError {
	return &protocolError{code: codeMethodNotFound, message: "Method not found: " + quote(method)}
}

func (h *handler[S]) listingOrEmpty() []toolInfo {
	if h.listing == nil {
		return []toolInfo{}
	}
	return h.listing
}
