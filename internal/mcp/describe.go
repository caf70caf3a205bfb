package mcp

import (
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// describe answers a plain GET: a short description, so that opening the endpoint's URL
// in a browser tells a person whether they have the right one. It needs no credential
// and reveals only the service, the methods, the tool names and what Describe adds.
func (h *handler[S]) describe(r *http.Request) reply {
	names := make([]string, len(h.tools))
	for i, t := range h.tools {
		names[i] = t.Name
	}
	// status and service lead so that a person reads them first; the core's fields win
	// over Describe's, so an endpoint cannot make the description lie about them.
	core := map[string]bool{"status": true, "service": true, "methods": true, "tools": true}
	desc := orderedObject{{"status", "ok"}, {"service", h.ep.Service}}
	if h.ep.Describe != nil {
		extra := h.ep.Describe(r)
		for _, k := range slices.Sorted(maps.Keys(extra)) {
			if !core[k] {
				desc = append(desc, field{k, extra[k]})
			}
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
