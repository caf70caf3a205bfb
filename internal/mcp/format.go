package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/relayroom/relayroom/internal/apperr"
)

// Format is how an endpoint shapes tool results and tool errors. The three toolsets'
// wire formats differ only in the details this type owns, so the mapping from apperr
// codes to what a client reads lives here and nowhere else.
type Format int

const (
	// RoomsFormat: one text block holding the JSON of the value; an error is the text
	// "Error: <message>" with the apperr message verbatim. No structuredContent.
	RoomsFormat Format = iota + 1
	// ThreadsFormat: structuredContent (a JSON object) plus a text block with the same
	// JSON; an error is a text block {"error":{"code","message"}} with lower_snake codes.
	ThreadsFormat
	// DeskFormat: as ThreadsFormat, with UPPER_SNAKE codes and apperr Details merged
	// into the error object.
	DeskFormat
)

func (f Format) String() string {
	switch f {
	case RoomsFormat:
		return "rooms"
	case ThreadsFormat:
		return "threads"
	case DeskFormat:
		return "desk"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

func (f Format) valid() bool { return f >= RoomsFormat && f <= DeskFormat }

// structured reports whether results carry structuredContent, which also decides
// whether a tool may declare an outputSchema.
func (f Format) structured() bool { return f == ThreadsFormat || f == DeskFormat }

// Structured is a handler's way to send a text mirror that differs from its
// structuredContent: threads' inbox returns {"messages":[…]} as structuredContent (MCP
// wants an object there) and the bare array as text, exactly as its spec shows.
type Structured struct {
	Object any // structuredContent; must encode to a JSON object
	Text   any // encoded to JSON for the text block; nil means the JSON of Object
}

// errorCode is the one table from apperr codes to the codes threads and desk send.
// A Reason, when set, is more precise than the code and wins.
func (f Format) errorCode(e *apperr.Error) string {
	if e.Reason != "" && e.Code != apperr.Internal {
		return e.Reason
	}
	if f == DeskFormat {
		switch e.Code {
		case apperr.Invalid:
			return "INVALID_ARGUMENT"
		case apperr.NotFound:
			return "NOT_FOUND"
		case apperr.Forbidden:
			return "FORBIDDEN"
		case apperr.Unauthenticated:
			return "UNAUTHENTICATED"
		case apperr.Conflict:
			return "CONFLICT"
		case apperr.RateLimited:
			return "RATE_LIMITED"
		case apperr.Unavailable:
			return "UPSTREAM_UNAVAILABLE"
		}
		return "INTERNAL"
	}
	switch e.Code {
	case apperr.Invalid:
		return "invalid_argument"
	case apperr.NotFound, apperr.Forbidden, apperr.Unauthenticated, apperr.Conflict,
		apperr.RateLimited, apperr.Unavailable:
		return string(e.Code)
	}
	return "internal"
}

// textBlock is the only content type the toolsets send.
type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolResult is a tools/call result. _meta and resultType are filled in the stateless
// era only.
type toolResult struct {
	Meta              *resultMeta     `json:"_meta,omitempty"`
	Content           []textBlock     `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError"`
	ResultType        string          `json:"resultType,omitempty"`

	// compact is set when StructuredContent is encodeJSON's output (compact and valid),
	// so that appendToolResult copies it instead of compacting it again.
	compact bool
}

// success shapes a handler's value. An error here is a bug in the tool (a value that
// does not encode, or a structured result that is not an object) and is answered as an
// internal error by the caller.
func (f Format) success(v any) (toolResult, error) {
	obj, text := v, any(nil)
	if s, ok := v.(Structured); ok {
		obj, text = s.Object, s.Text
	} else if s, ok := v.(*Structured); ok && s != nil {
		obj, text = s.Object, s.Text
	}
	objJSON, err := encodeJSON(obj)
	if err != nil {
		return toolResult{}, fmt.Errorf("format: encode result: %w", err)
	}
	textJSON := objJSON
	if text != nil {
		if textJSON, err = encodeJSON(text); err != nil {
			return toolResult{}, fmt.Errorf("format: encode text mirror: %w", err)
		}
	}
	res := toolResult{Content: []textBlock{{Type: "text", Text: string(textJSON)}}}
	if f.structured() {
		if !bytes.HasPrefix(objJSON, []byte("{")) {
			return toolResult{}, fmt.Errorf("format: %s results must be JSON objects, got %.40s", f, objJSON)
		}
		res.StructuredContent, res.compact = objJSON, true
	}
	return res, nil
}

// failure shapes a tool error. e must already be client-safe: internal errors are
// replaced by a generic message before they get here.
func (f Format) failure(e *apperr.Error) toolResult {
	if f == RoomsFormat {
		return toolResult{Content: []textBlock{{Type: "text", Text: "Error: " + e.Message}}, IsError: true}
	}
	fields := []field{{"code", f.errorCode(e)}, {"message", e.Message}}
	if f == DeskFormat {
		for _, k := range slices.Sorted(maps.Keys(e.Details)) {
			if k != "code" && k != "message" {
				fields = append(fields, field{k, e.Details[k]})
			}
		}
	}
	body, err := encodeJSON(struct {
		Error orderedObject `json:"error"`
	}{orderedObject(fields)})
	if err != nil {
		// Details that do not encode are dropped rather than losing the error itself.
		body, _ = encodeJSON(struct {
			Error orderedObject `json:"error"`
		}{orderedObject(fields[:2])})
	}
	return toolResult{Content: []textBlock{{Type: "text", Text: string(body)}}, IsError: true}
}

// orderedObject encodes as a JSON object keeping its fields' order, so that "code" and
// "message" lead the error object whatever the details are.
type orderedObject []field

type field struct {
	key   string
	value any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := encodeJSON(f.key)
		if err != nil {
			return nil, err
		}
		v, err := encodeJSON(f.value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.key, err)
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
