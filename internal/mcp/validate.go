package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// FormatChecker checks a string against a JSON Schema "format". jsonschema-go treats
// "format" as an annotation only, so the core checks the formats it knows itself.
type FormatChecker func(string) error

// builtinFormats are checked on every endpoint; Options.Formats adds to or replaces them.
func builtinFormats() map[string]FormatChecker {
	return map[string]FormatChecker{
		"date": func(s string) error {
			if _, err := time.Parse(time.DateOnly, s); err != nil {
				return errors.New("must be a date in the form YYYY-MM-DD")
			}
			return nil
		},
		"date-time": func(s string) error {
			// A lower-case t and z are RFC 3339 too: a tool reads the argument as a
			// wiretime.Arg, which takes them.
			if _, err := wiretime.Parse(s); err != nil {
				return errors.New("must be an RFC 3339 date-time such as 2026-09-12T10:00:00Z")
			}
			return nil
		},
	}
}

// schema is a JSON Schema compiled once, at NewHandler.
type schema struct {
	raw      json.RawMessage // compact, in the author's key order, as tools/list shows it
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
	formats  map[string]FormatChecker

	// What empty arguments ({}, null or none: most calls of the tools that take none or
	// only optional ones) prepare to, computed once by the same path as any other.
	emptyOnce sync.Once
	empty     json.RawMessage
	emptyErr  error
}

// compileSchema parses and resolves a tool's schema. Defaults are validated against
// their own schemas here, so a bad default is a startup error, not a call-time one.
func compileSchema(raw json.RawMessage, formats map[string]FormatChecker) (*schema, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(compact.Bytes(), &root); err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	if root.Type != "object" {
		return nil, errors.New(`compile schema: the root must have "type": "object"`)
	}
	resolved, err := root.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &schema{raw: compact.Bytes(), root: &root, resolved: resolved, formats: formats}, nil
}

// closed reports whether the root refuses unknown properties.
func (s *schema) closed() bool { return isFalse(s.root.AdditionalProperties) }

// prepareArgs turns a call's raw arguments into what the tool's handler gets: defaults
// applied, then validated. Every failure is an apperr Invalid whose message names the
// offending argument, because it goes back to a model that has to fix its call.
func (s *schema) prepareArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || isNull(raw) || bytes.Equal(bytes.TrimSpace(raw), []byte("{}")) {
		// The answer depends on the schema alone: prepared once, then copied, so that
		// no handler can change what the next call gets.
		s.emptyOnce.Do(func() { s.empty, s.emptyErr = s.prepare(json.RawMessage("{}")) })
		if s.emptyErr != nil {
			return nil, s.emptyErr
		}
		return bytes.Clone(s.empty), nil
	}
	return s.prepare(raw)
}

// prepare is prepareArgs for arguments that are present.
func (s *schema) prepare(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		// An object with a number no float64 holds (1e400) names that member, not the
		// object: "arguments must be a JSON object" sent the caller looking elsewhere.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && strings.HasPrefix(te.Value, "number") {
			if te.Field != "" {
				return nil, apperr.New(apperr.Invalid, "%s is a number out of range (%s)", subject(te.Field), strings.TrimPrefix(te.Value, "number "))
			}
			return nil, apperr.New(apperr.Invalid, "arguments hold a number out of range (%s)", strings.TrimPrefix(te.Value, "number "))
		}
		return nil, apperr.New(apperr.Invalid, "arguments must be a JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, apperr.New(apperr.Invalid, "arguments must be a JSON object")
	}
	if err := checkText(raw); err != nil {
		return nil, err
	}
	applyDefaults(s.root, obj)
	if err := s.resolved.Validate(obj); err != nil {
		msg := explain(s.root, obj, "")
		if msg == "" {
			msg = "invalid arguments: " + cleanValidationError(err)
		}
		return nil, apperr.Wrap(apperr.Invalid, msg, err)
	}
	if msg := s.checkFormats(s.root, obj, ""); msg != "" {
		return nil, apperr.New(apperr.Invalid, "%s", msg)
	}
	out, err := encodeJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("prepare args: %w", err)
	}
	return out, nil
}

// checkText refuses arguments holding a string PostgreSQL cannot store (NUL, invalid
// UTF-8, lone surrogates), whatever the schema says of it and however deep it sits, so
// that no tool can forget it. It reads the raw bytes: encoding/json has already turned
// invalid UTF-8 into U+FFFD in the decoded value. It runs before the schema so that the
// message names the real fault rather than, say, a pattern the string then fails.
func checkText(raw json.RawMessage) error {
	path, err := text.CheckJSON(raw)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, text.ErrSyntax):
		return apperr.New(apperr.Invalid, "arguments must be a JSON object")
	}
	return apperr.New(apperr.Invalid, "%s %v", subject(path), err)
}

// validateValue checks a value against the schema (used for outputSchema).
func (s *schema) validateValue(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("validate output: %w", err)
	}
	if err := s.resolved.Validate(v); err != nil {
		return fmt.Errorf("validate output: %w", err)
	}
	return nil
}

// applyDefaults fills absent properties that declare a default, recursing only into
// objects and array items that are present. jsonschema-go's own ApplyDefaults also
// invents absent parent objects whose children have defaults, which would turn an
// omitted optional object (threads' close.lesson) into a present, invalid one.
func applyDefaults(s *jsonschema.Schema, v any) {
	if s == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		for name, sub := range s.Properties {
			if sub == nil {
				continue
			}
			val, present := v[name]
			if !present {
				if sub.Default != nil && !required[name] {
					var d any
					if json.Unmarshal(sub.Default, &d) == nil {
						v[name] = d
					}
				}
				continue
			}
			applyDefaults(sub, val)
		}
	case []any:
		for _, item := range v {
			applyDefaults(s.Items, item)
		}
	}
}

// checkFormats walks properties and items (not combinators or $refs) and checks every
// string whose schema names a format we know.
func (s *schema) checkFormats(sc *jsonschema.Schema, v any, path string) string {
	if sc == nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		if check, ok := s.formats[sc.Format]; ok && sc.Format != "" {
			if err := check(v); err != nil {
				return fmt.Sprintf("argument %s %v (got %s)", quote(path), err, quote(v))
			}
		}
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(v)) {
			if sub, ok := sc.Properties[name]; ok {
				if msg := s.checkFormats(sub, v[name], joinPath(path, name)); msg != "" {
					return msg
				}
			}
		}
	case []any:
		for i, item := range v {
			if msg := s.checkFormats(sc.Items, item, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// explain finds the first violation of the common keywords and says it in words a model
// can act on. It only runs after jsonschema-go has rejected the value, so it decides
// nothing; "" means it found nothing it can phrase and the caller falls back to
// jsonschema-go's message.
func explain(s *jsonschema.Schema, v any, path string) string {
	if s == nil {
		return ""
	}
	if msg := explainType(s, v, path); msg != "" {
		return msg
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return jsonEqual(e, v) }) {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = jsonText(e)
		}
		return fmt.Sprintf("%s must be one of %s (got %s)", subject(path), strings.Join(vals, ", "), jsonText(v))
	}
	if s.Const != nil && !jsonEqual(*s.Const, v) {
		return fmt.Sprintf("%s must be %s (got %s)", subject(path), jsonText(*s.Const), jsonText(v))
	}
	switch v := v.(type) {
	case map[string]any:
		return explainObject(s, v, path)
	case []any:
		return explainArray(s, v, path)
	case string:
		return explainString(s, v, path)
	case float64:
		return explainNumber(s, v, path)
	}
	return ""
}

func explainType(s *jsonschema.Schema, v any, path string) string {
	want := s.Types
	if s.Type != "" {
		want = []string{s.Type}
	}
	if len(want) == 0 {
		return ""
	}
	got := jsonTypeOf(v)
	for _, w := range want {
		if w == got || (w == "number" && got == "integer") {
			return ""
		}
	}
	if path == "" && slices.Equal(want, []string{"object"}) {
		return "arguments must be a JSON object"
	}
	detail := got
	if got != "object" && got != "array" && got != "null" {
		detail = jsonText(v)
	}
	return fmt.Sprintf("%s must be %s (got %s)", subject(path), article(strings.Join(want, " or ")), detail)
}

func explainObject(s *jsonschema.Schema, v map[string]any, path string) string {
	var missing []string
	for _, r := range s.Required {
		if _, ok := v[r]; !ok {
			missing = append(missing, quote(joinPath(path, r)))
		}
	}
	if len(missing) == 1 {
		return "missing required argument " + missing[0]
	}
	if len(missing) > 1 {
		return "missing required arguments " + strings.Join(missing, ", ")
	}
	if s.AdditionalProperties != nil && len(s.PatternProperties) == 0 {
		if isFalse(s.AdditionalProperties) {
			var unknown []string
			for _, name := range slices.Sorted(maps.Keys(v)) {
				if _, ok := s.Properties[name]; !ok {
					unknown = append(unknown, quote(joinPath(path, name)))
				}
			}
			if len(unknown) > 0 {
				allowed := slices.Sorted(maps.Keys(s.Properties))
				noun := "argument"
				if len(unknown) > 1 {
					noun = "arguments"
				}
				hint := "this tool takes no arguments"
				if path != "" {
					hint = subject(path) + " takes no properties"
				}
				if len(allowed) > 0 {
					hint = "allowed: " + strings.Join(allowed, ", ")
				}
				return fmt.Sprintf("unknown %s %s (%s)", noun, strings.Join(unknown, ", "), hint)
			}
		}
	}
	if s.MinProperties != nil && len(v) < *s.MinProperties {
		return fmt.Sprintf("%s must have at least %s", subject(path), plural(*s.MinProperties, "property", "properties"))
	}
	if s.MaxProperties != nil && len(v) > *s.MaxProperties {
		return fmt.Sprintf("%s must have at most %s", subject(path), plural(*s.MaxProperties, "property", "properties"))
	}
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if sub, ok := s.Properties[name]; ok {
			if msg := explain(sub, v[name], joinPath(path, name)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func explainArray(s *jsonschema.Schema, v []any, path string) string {
	if s.MinItems != nil && len(v) < *s.MinItems {
		return fmt.Sprintf("%s must have at least %s (got %d)", subject(path), plural(*s.MinItems, "item", "items"), len(v))
	}
	if s.MaxItems != nil && len(v) > *s.MaxItems {
		return fmt.Sprintf("%s must have at most %s (got %d)", subject(path), plural(*s.MaxItems, "item", "items"), len(v))
	}
	if s.UniqueItems {
		for i := range v {
			for j := i + 1; j < len(v); j++ {
				if jsonEqual(v[i], v[j]) {
					return fmt.Sprintf("%s must not contain duplicates (%s appears twice)", subject(path), jsonText(v[i]))
				}
			}
		}
	}
	for i, item := range v {
		if msg := explain(s.Items, item, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
			return msg
		}
	}
	return ""
}

func explainString(s *jsonschema.Schema, v, path string) string {
	n := utf8.RuneCountInString(v)
	if s.MinLength != nil && n < *s.MinLength {
		if *s.MinLength == 1 && n == 0 {
			return fmt.Sprintf("%s must not be empty", subject(path))
		}
		return fmt.Sprintf("%s must be at least %s long (got %d)", subject(path), plural(*s.MinLength, "character", "characters"), n)
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		return fmt.Sprintf("%s must be at most %s long (got %d)", subject(path), plural(*s.MaxLength, "character", "characters"), n)
	}
	if s.Pattern != "" {
		if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(v) {
			return fmt.Sprintf("%s must match the pattern %s", subject(path), s.Pattern)
		}
	}
	return ""
}

func explainNumber(s *jsonschema.Schema, v float64, path string) string {
	got := formatNumber(v)
	switch {
	case s.Minimum != nil && v < *s.Minimum:
		return fmt.Sprintf("%s must be at least %s (got %s)", subject(path), formatNumber(*s.Minimum), got)
	case s.Maximum != nil && v > *s.Maximum:
		return fmt.Sprintf("%s must be at most %s (got %s)", subject(path), formatNumber(*s.Maximum), got)
	case s.ExclusiveMinimum != nil && v <= *s.ExclusiveMinimum:
		return fmt.Sprintf("%s must be greater than %s (got %s)", subject(path), formatNumber(*s.ExclusiveMinimum), got)
	case s.ExclusiveMaximum != nil && v >= *s.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s (got %s)", subject(path), formatNumber(*s.ExclusiveMaximum), got)
	case s.MultipleOf != nil && *s.MultipleOf != 0 && math.Mod(v, *s.MultipleOf) != 0:
		return fmt.Sprintf("%s must be a multiple of %s (got %s)", subject(path), formatNumber(*s.MultipleOf), got)
	}
	return ""
}

// cleanValidationError strips jsonschema-go's chain of "validating <schema path>: "
// prefixes, which name schema locations rather than arguments.
func cleanValidationError(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "validating ") {
		i := strings.Index(msg, ": ")
		if i < 0 {
			break
		}
		msg = msg[i+2:]
	}
	return msg
}

func subject(path string) string {
	if path == "" {
		return "arguments"
	}
	return "argument " + quote(path)
}

// joinPath names an argument the way text.CheckJSON names the strings it refuses.
func joinPath(path, name string) string { return text.Join(path, name) }

func jsonTypeOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func article(typ string) string {
	switch typ {
	case "integer", "object", "array":
		return "an " + typ
	case "null":
		return typ
	}
	return "a " + typ
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func jsonText(v any) string {
	b, err := encodeJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// jsonEqual compares JSON values the way JSON Schema does (1 and 1.0 are equal).
func jsonEqual(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
