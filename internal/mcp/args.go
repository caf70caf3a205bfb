package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/relayroom/relayroom/internal/wiretime"
)

// A tool's input schema is derived from the Go struct its handler takes, the way the MCP
// go-sdk's AddTool does it: jsonschema-go's For reads the struct (property names and
// order from the json tags and field order, types from the Go types, "required" for every
// field without omitempty, "additionalProperties": false), and SchemaOptions add what a
// Go type cannot say: bounds, enums, defaults, patterns, formats and descriptions, each
// given by the same Go constant the code checks. The result is plain JSON Schema: the
// core validates calls against it exactly as it would a hand-written one.

// argsSchema is a derived input schema and the order its keywords are written in.
type argsSchema struct {
	root *jsonschema.Schema
	// order lists, per schema node, the keywords SchemaOptions set, in the order given:
	// tools/list shows them in that order (a client reads what the author wrote).
	order map[*jsonschema.Schema][]string
}

// A SchemaOption refines the schema derived from a tool's argument type. Build them with
// Prop, Items and the keyword functions (MinLength, Maximum, Enum, Default, …).
type SchemaOption func(n schemaNode) error

// schemaNode is the schema an option applies to, and where it sits (for error messages).
type schemaNode struct {
	args *argsSchema
	s    *jsonschema.Schema
	path string
}

func (n schemaNode) apply(opts []SchemaOption) error {
	var errs []error
	for _, o := range opts {
		if err := o(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (n schemaNode) name() string {
	if n.path == "" {
		return "the arguments"
	}
	return "argument " + quote(n.path)
}

// argTypeSchemas are the Go types whose schema is not what jsonschema-go would infer.
func argTypeSchemas() map[reflect.Type]*jsonschema.Schema {
	return map[reflect.Type]*jsonschema.Schema{
		// A json.RawMessage argument is a free-form object its handler reads itself
		// (threads' event detail), not the array of bytes its Go type would suggest.
		reflect.TypeFor[json.RawMessage](): {Type: "object"},
		// A time argument is written as a string; the tool's Prop gives its format.
		reflect.TypeFor[wiretime.Arg](): {Type: "string"},
	}
}

// deriveArgs derives the input schema of a tool whose arguments are the struct t.
func deriveArgs(t reflect.Type, opts []SchemaOption) (*argsSchema, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("derive schema: the arguments must be a struct, not %s", t)
	}
	root, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: argTypeSchemas()})
	if err != nil {
		return nil, fmt.Errorf("derive schema: %w", err)
	}
	optional(root)
	a := &argsSchema{root: root, order: map[*jsonschema.Schema][]string{}}
	if err := (schemaNode{args: a, s: root}).apply(opts); err != nil {
		return nil, err
	}
	return a, nil
}

// SchemaFor derives the JSON Schema of the struct T exactly as a tool's input schema is
// derived (the same rules, the same SchemaOptions, the same encoding), for a wire that
// is not MCP but takes a body of the same kind: the desk ingest API's OpenAPI document
// describes its request bodies with it, so they cannot drift from the Go types either.
func SchemaFor[T any](opts ...SchemaOption) (json.RawMessage, error) {
	a, err := deriveArgs(reflect.TypeFor[T](), opts)
	if err != nil {
		return nil, err
	}
	return a.encode()
}

// optional turns jsonschema-go's nullable types (a pointer or slice field is
// ["null", T]) into T: an optional argument is left out, not sent as null. It also gives
// every struct-derived object its "properties", empty for a struct without fields, so a
// tool without arguments reads {"type":"object","properties":{},…} as clients expect.
func optional(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	if s.Type == "object" && s.Properties == nil && isFalse(s.AdditionalProperties) {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	for _, p := range s.Properties {
		optional(p)
	}
	optional(s.Items)
}

// isFalse reports whether s is the schema false (as "additionalProperties": false).
func isFalse(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

// Prop refines the property name of an object argument (the root, or a nested struct).
// A name the Go type does not have is a declaration error, reported by NewHandler.
func Prop(name string, opts ...SchemaOption) SchemaOption {
	return func(n schemaNode) error {
		sub, ok := n.s.Properties[name]
		if !ok {
			return fmt.Errorf("%s has no property %q (it has: %s)", n.name(), name, strings.Join(slices.Sorted(maps.Keys(n.s.Properties)), ", "))
		}
		return schemaNode{args: n.args, s: sub, path: joinPath(n.path, name)}.apply(opts)
	}
}

// Items refines the schema of an array argument's items.
func Items(opts ...SchemaOption) SchemaOption {
	return func(n schemaNode) error {
		if err := n.set("items", "array"); err != nil {
			return err
		}
		return schemaNode{args: n.args, s: n.s.Items, path: n.path + "[]"}.apply(opts)
	}
}

// Description tells the model what the argument is for.
func Description(text string) SchemaOption {
	return keyword("description", func(s *jsonschema.Schema) error { s.Description = text; return nil })
}

// Default is the value the core fills in when the argument is left out. It must be
// valid against the argument's schema (NewHandler checks).
func Default(v any) SchemaOption {
	return keyword("default", func(s *jsonschema.Schema) error {
		b, err := encodeJSON(v)
		s.Default = b
		return err
	})
}

// Enum lists the values the argument may take.
func Enum[T any](values ...T) SchemaOption {
	return keyword("enum", func(s *jsonschema.Schema) error {
		s.Enum = make([]any, len(values))
		for i, v := range values {
			s.Enum[i] = v
		}
		return nil
	})
}

// MinLength and MaxLength bound a string argument, in characters.
func MinLength(n int) SchemaOption {
	return keyword("minLength", func(s *jsonschema.Schema) error { s.MinLength = &n; return nil }, "string")
}

// MaxLength: see MinLength.
func MaxLength(n int) SchemaOption {
	return keyword("maxLength", func(s *jsonschema.Schema) error { s.MaxLength = &n; return nil }, "string")
}

// Pattern is a regular expression a string argument must match.
func Pattern(re string) SchemaOption {
	return keyword("pattern", func(s *jsonschema.Schema) error { s.Pattern = re; return nil }, "string")
}

// StringFormat names a string format ("format") (date, date-time, or one of Options.Formats).
func StringFormat(name string) SchemaOption {
	return keyword("format", func(s *jsonschema.Schema) error { s.Format = name; return nil }, "string")
}

// MinItems and MaxItems bound an array argument's length.
func MinItems(n int) SchemaOption {
	return keyword("minItems", func(s *jsonschema.Schema) error { s.MinItems = &n; return nil }, "array")
}

// MaxItems: see MinItems.
func MaxItems(n int) SchemaOption {
	return keyword("maxItems", func(s *jsonschema.Schema) error { s.MaxItems = &n; return nil }, "array")
}

type number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Minimum and Maximum bound a numeric argument (inclusive).
func Minimum[N number](v N) SchemaOption {
	return keyword("minimum", func(s *jsonschema.Schema) error { s.Minimum = new(float64(v)); return nil }, "integer", "number")
}

// Maximum: see Minimum.
func Maximum[N number](v N) SchemaOption {
	return keyword("maximum", func(s *jsonschema.Schema) error { s.Maximum = new(float64(v)); return nil }, "integer", "number")
}

// keyword is an option setting one keyword, on a schema of one of types (any when none).
func keyword(key string, set func(*jsonschema.Schema) error, types ...string) SchemaOption {
	return func(n schemaNode) error {
		if err := n.set(key, types...); err != nil {
			return err
		}
		if err := set(n.s); err != nil {
			return fmt.Errorf("%s: %s: %w", n.name(), key, err)
		}
		return nil
	}
}

// set records that an option sets key, refusing it on a schema of the wrong type and
// twice on the same schema (the second would silently win).
func (n schemaNode) set(key string, types ...string) error {
	if len(types) > 0 && !slices.Contains(types, n.s.Type) {
		return fmt.Errorf("%s is of type %q: %s applies to %s", n.name(), n.s.Type, key, strings.Join(types, " or "))
	}
	if slices.Contains(n.args.order[n.s], key) {
		return fmt.Errorf("%s: %s is set twice", n.name(), key)
	}
	n.args.order[n.s] = append(n.args.order[n.s], key)
	return nil
}

// prepend returns the schema of p's arguments followed by a's: p's properties come
// first and p's required ones are required first. A name in both is an error.
func (a *argsSchema) prepend(p *argsSchema) (*argsSchema, error) {
	root := *a.root
	root.Properties = maps.Clone(p.root.Properties)
	for name, s := range a.root.Properties {
		if _, dup := root.Properties[name]; dup {
			return nil, fmt.Errorf("argument %q is declared twice", name)
		}
		root.Properties[name] = s
	}
	root.PropertyOrder = slices.Concat(p.root.PropertyOrder, a.root.PropertyOrder)
	root.Required = slices.Concat(p.root.Required, a.root.Required)
	order := maps.Clone(a.order)
	maps.Copy(order, p.order)
	order[&root] = a.order[a.root]
	return &argsSchema{root: &root, order: order}, nil
}

// encode writes the schema compactly. In every node "type" comes first, then the
// keywords the options set in their order, then those derived from the Go type (items,
// description, properties, required, additionalProperties), then anything else sorted.
func (a *argsSchema) encode() (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := a.write(&buf, a.root); err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return buf.Bytes(), nil
}

func (a *argsSchema) write(buf *bytes.Buffer, s *jsonschema.Schema) error {
	flat := *s
	flat.Items, flat.Properties, flat.PropertyOrder = nil, nil, nil
	b, err := json.Marshal(flat)
	if err != nil {
		return err
	}
	fields := map[string]json.RawMessage{}
	switch string(b) {
	case "false":
		buf.WriteString("false")
		return nil
	case "true": // the empty schema, unless it has items or properties
	default:
		if err := json.Unmarshal(b, &fields); err != nil {
			return err
		}
	}
	if s.Items != nil {
		fields["items"] = nil
	}
	if s.Properties != nil {
		fields["properties"] = nil
	}
	keys := slices.Concat([]string{"type"}, a.order[s], []string{"items", "description", "properties", "required", "additionalProperties"})
	keys = append(keys, slices.Sorted(maps.Keys(fields))...)
	buf.WriteByte('{')
	first := true
	for _, k := range keys {
		v, ok := fields[k]
		if !ok {
			continue
		}
		delete(fields, k)
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, err := encodeJSON(k)
		if err != nil {
			return err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		switch k {
		case "items":
			err = a.write(buf, s.Items)
		case "properties":
			err = a.writeProperties(buf, s)
		default:
			err = writeUnescaped(buf, v)
		}
		if err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// writeProperties writes an object's properties in PropertyOrder (the struct's field
// order), then any others sorted by name.
func (a *argsSchema) writeProperties(buf *bytes.Buffer, s *jsonschema.Schema) error {
	names := slices.Clone(s.PropertyOrder)
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	buf.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := encodeJSON(name)
		if err != nil {
			return err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		if err := a.write(buf, s.Properties[name]); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// writeUnescaped writes a JSON value without encoding/json's HTML escaping (which
// jsonschema-go's marshalling applies), as every other JSON the core sends.
func writeUnescaped(buf *bytes.Buffer, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}
