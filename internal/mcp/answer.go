package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A tools/call answer is the one every tool call sends, so it is written here by hand
// instead of by encoding/json: byte for byte what encodeJSON(resultResponse(id, res))
// gives (TestToolAnswerBytes compares them), without what encoding/json does on top of
// writing it. encoding/json runs a RawMessage through its scanner again (validated and
// compacted: structuredContent is the tool's whole answer, encoded a moment before by
// encodeJSON, so already both) and walks the structs by reflection; here the answer is
// the structured JSON copied once and its text mirror escaped once, into a buffer sized
// for both.

// appendToolAnswer appends the JSON-RPC answer carrying res to dst.
func appendToolAnswer(dst []byte, id json.RawMessage, res toolResult) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst, err := appendRaw(dst, id, false)
	if err != nil {
		return nil, fmt.Errorf("answer: id: %w", err)
	}
	dst = append(dst, `,"result":`...)
	if dst, err = appendToolResult(dst, res); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

// appendToolResult appends res as encodeJSON(res) writes it.
func appendToolResult(dst []byte, res toolResult) ([]byte, error) {
	dst = append(dst, '{')
	if res.Meta != nil {
		dst = append(dst, `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":`...)
		dst = appendJSONString(dst, res.Meta.ServerInfo.Name)
		dst = append(dst, `,"version":`...)
		dst = appendJSONString(dst, res.Meta.ServerInfo.Version)
		dst = append(dst, `}},`...)
	}
	dst = append(dst, `"content":`...)
	if res.Content == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, b := range res.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":`...)
			dst = appendJSONString(dst, b.Type)
			dst = append(dst, `,"text":`...)
			dst = appendJSONString(dst, b.Text)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(res.StructuredContent) > 0 {
		dst = append(dst, `,"structuredContent":`...)
		var err error
		if dst, err = appendRaw(dst, res.StructuredContent, res.compact); err != nil {
			return nil, fmt.Errorf("answer: structuredContent: %w", err)
		}
	}
	dst = append(dst, `,"isError":`...)
	dst = strconv.AppendBool(dst, res.IsError)
	if res.ResultType != "" {
		dst = append(dst, `,"resultType":`...)
		dst = appendJSONString(dst, res.ResultType)
	}
	return append(dst, '}'), nil
}

// appendRaw appends a json.RawMessage as encoding/json writes one: null when nil, else
// validated and compacted (json.Compact is the very pass encoding/json applies without
// HTML escaping), unless compact says raw is encodeJSON's output already.
func appendRaw(dst []byte, raw json.RawMessage, compact bool) ([]byte, error) {
	switch {
	case raw == nil:
		return append(dst, "null"...), nil
	case compact:
		return append(dst, raw...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// appendJSONString appends s as a JSON string exactly as encodeJSON writes one (HTML
// characters as they are): quotes, backslashes and control characters escaped, invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// toolAnswerSize is what the answer of res takes at most before its strings' escapes: the
// buffer appendToolAnswer starts with, so that a usual answer is written without growing.
func toolAnswerSize(id json.RawMessage, res toolResult) int {
	n := 160 + len(id) + len(res.StructuredContent)
	if res.Meta != nil {
		n += len(res.Meta.ServerInfo.Name) + len(res.Meta.ServerInfo.Version)
	}
	for _, b := range res.Content {
		// A text mirror of JSON escapes every quote and backslash it holds.
		n += len(b.Type) + len(b.Text) + strings.Count(b.Text, `"`) + strings.Count(b.Text, `\`)
	}
	return n
}
