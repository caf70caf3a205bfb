package mcp

import (
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/relayroom/relayroom/internal/auth"
)

// describe answers a plain GET: a short description, so that opening the endpoint's URL
// in a browser tells a person whether they have the right one. It needs no credential
// and reveals only the service, the methods, the tool names and what Describe adds.
//
// A GET that does carry a credential is authenticated as a POST would be, so that an
// agent asking about a room it is not in gets the POST's refusal, not a description; and
// a URL that cannot name anything the endpoint serves (Describe's error) gets that same
// refusal, with or without a credential. So an address that is not a room answers
// exactly like a room the caller cannot see, and neither echoes the id back as "ok".
func (h *handler[S]) describe(r *http.Request, rid string) reply {
	if auth.AgentKey(r) != "" || auth.BearerToken(r) != "" {
		scope, err := h.ep.Authenticate(r.Context(), r)
		if err != nil {
			return h.authFailure(r, nil, err, rid)
		}
		// A cached caller is verified before it is answered, as on a POST.
		if _, err := (&caller[S]{r: r, scope: scope, prov: h.ep.Provisional}).settle(r.Context()); err != nil {
			return h.authFailure(r, nil, err, rid)
		}
	}
	var extra map[string]any
	if h.ep.Describe != nil {
		var err error
		if extra, err = h.ep.Describe(r); err != nil {
			return h.authFailure(r, nil, err, rid)
		}
	}
	names := make([]string, len(h.tools))
	for i, t := range h.tools {
		names[i] = t.Name
	}
	// status and service lead so that a person reads them first; the core's fields win
	// over Describe's, so an endpoint cannot make the description lie about them.
	core := map[string]bool{"status": true, "service": true, "methods": true, "tools": true}
	desc := orderedObject{{"status", "ok"}, {"service", h.ep.Service}}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if !core[k] {
			desc = append(desc, field{k, extra[k]})
		}
	}
	desc = append(desc, field{"methods", servedMethods()}, field{"tools", names})
	return reply{status: http.StatusOK, body: desc}
}

// acceptsEventStream reports whether a GET asks for an SSE stream, which this server
// never offers.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}
