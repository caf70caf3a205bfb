package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/relayroom/relayroom/internal/apperr"
)

// Annotations are the MCP behaviour hints of a tool. All of them are always sent, with
// openWorldHint false: clients default absent hints to destructive and open-world.
type Annotations struct {
	ReadOnly    bool // the tool changes nothing
	Destructive bool // the tool does something that cannot be taken back
	Idempotent  bool // repeating the call with the same arguments changes nothing more
}

// Tool is one tool of an endpoint, declared as data. A toolset declares each tool with
// NewTool, from the Go struct its handler takes; InputSchema and Handler are then
// derived. They can also be set by hand (the core's own tests do).
type Tool[S any] struct {
	Name        string
	Title       string
	Description string // written for a model: when to use it, its limits
	// InputSchema is a JSON Schema whose root is an object with
	// "additionalProperties": false. Nil means the tool takes no arguments.
	InputSchema json.RawMessage
	// OutputSchema, if set, describes structuredContent; results are checked against it
	// and a mismatch is answered as an internal error. Only structured formats allow it.
	OutputSchema json.RawMessage
	Annotations  Annotations
	// Handler runs the tool. args is a JSON object that passed InputSchema, with
	// defaults applied. A returned *apperr.Error is shown to the client in the
	// endpoint's format; anything else is logged and answered as an internal error.
	Handler func(ctx context.Context, scope S, args json.RawMessage) (any, error)

	args *argsSchema // the derived input schema, for WithArgs to extend
	err  error       // a declaration error, reported by NewHandler and ToolsListJSON
}

// NewTool declares a tool whose arguments are the Go struct In, as the go-sdk's AddTool
// does: t gives the name, title, description and annotations; the input schema is
// derived from In (see args.go) and refined by opts; the handler receives In decoded
// from the arguments after the core has validated them and applied defaults. A mistake
// in the declaration (an option naming a field In does not have, a bound on the wrong
// type) is reported by NewHandler, so a server never starts with it.
func NewTool[S, In, Out any](t Tool[S], h func(ctx context.Context, scope S, in In) (Out, error), opts ...SchemaOption) Tool[S] {
	if t.InputSchema != nil || t.Handler != nil {
		t.err = fmt.Errorf("tool %s: NewTool derives InputSchema and Handler; leave them unset", t.Name)
		return t
	}
	a, err := deriveArgs(reflect.TypeFor[In](), opts)
	if err == nil {
		t.InputSchema, err = a.encode()
	}
	if err != nil {
		t.err = fmt.Errorf("tool %s: arguments: %w", t.Name, err)
		return t
	}
	t.args = a
	t.Handler = func(ctx context.Context, scope S, args json.RawMessage) (any, error) {
		in, err := decodeArgs[In](args)
		if err != nil {
			return nil, err
		}
		return h(ctx, scope, in)
	}
	return t
}

// WithArgs returns tool t for an address where every call also names what it acts on
// (the all-rooms address's room_id): P's arguments, refined by opts, come first in t's
// schema, bind turns them and the caller's scope into the scope t runs with, and t's
// handler receives its own arguments only. t must have been declared with NewTool.
func WithArgs[S, P any](t Tool[S], bind func(ctx context.Context, scope S, p P) (S, error), opts ...SchemaOption) Tool[S] {
	if t.err != nil {
		return t
	}
	if t.args == nil {
		t.err = fmt.Errorf("tool %s: WithArgs extends a tool declared with NewTool", t.Name)
		return t
	}
	p, err := deriveArgs(reflect.TypeFor[P](), opts)
	if err == nil {
		t.args, err = t.args.prepend(p)
	}
	if err == nil {
		t.InputSchema, err = t.args.encode()
	}
	if err != nil {
		t.err = fmt.Errorf("tool %s: arguments: %w", t.Name, err)
		return t
	}
	inner := t.Handler
	t.Handler = func(ctx context.Context, scope S, args json.RawMessage) (any, error) {
		rest, err := decodeArgs[map[string]json.RawMessage](args)
		if err != nil {
			return nil, err
		}
		pv, err := decodeArgs[P](args)
		if err != nil {
			return nil, err
		}
		for name := range p.root.Properties {
			delete(rest, name)
		}
		bound, err := bind(ctx, scope, pv)
		if err != nil {
			return nil, err
		}
		own, err := json.Marshal(rest)
		if err != nil {
			return nil, fmt.Errorf("tool %s: arguments: %w", t.Name, err)
		}
		return inner(ctx, bound, own)
	}
	return t
}

// decodeArgs reads validated arguments into a T. The schema was derived from T, so a
// failure is rare (a value the schema allows and the Go type cannot hold); it is the
// caller's argument that is at fault, so it is answered as invalid.
func decodeArgs[T any](args json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(args, &v); err != nil {
		return v, apperr.New(apperr.Invalid, "invalid arguments: %v", err)
	}
	return v, nil
}

// compiledTool is a Tool checked and prepared by NewHandler.
type compiledTool[S any] struct {
	Tool[S]
	input  *schema
	output *schema
}

const noArgumentsSchema = `{"type":"object","properties":{},"additionalProperties":false}`

func compileTool[S any](t Tool[S], f Format, formats map[string]FormatChecker) (*compiledTool[S], error) {
	if t.err != nil {
		return nil, t.err
	}
	if !validToolName(t.Name) {
		return nil, fmt.Errorf("tool %q: name must be 1-128 characters of A-Z a-z 0-9 _ - .", t.Name)
	}
	if t.Description == "" {
		return nil, fmt.Errorf("tool %s: description is required", t.Name)
	}
	if t.Handler == nil {
		return nil, fmt.Errorf("tool %s: handler is required", t.Name)
	}
	raw := t.InputSchema
	if len(raw) == 0 {
		raw = json.RawMessage(noArgumentsSchema)
	}
	in, err := compileSchema(raw, formats)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	// Rejecting unknown arguments is a product rule (a misspelt argument must not be
	// silently ignored), so it is enforced here rather than trusted to each author.
	if !in.closed() {
		return nil, fmt.Errorf(`tool %s: input schema: the root must set "additionalProperties": false`, t.Name)
	}
	ct := &compiledTool[S]{Tool: t, input: in}
	if len(t.OutputSchema) > 0 {
		if !f.structured() {
			return nil, fmt.Errorf("tool %s: the %s format sends no structuredContent, so it cannot declare an output schema", t.Name, f)
		}
		if ct.output, err = compileSchema(t.OutputSchema, formats); err != nil {
			return nil, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
		}
	}
	return ct, nil
}

func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// toolInfo is a tool as tools/list shows it. Field order is the wire order.
type toolInfo struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  toolAnnotations `json:"annotations"`
}

type toolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

func (t *compiledTool[S]) info() toolInfo {
	ti := toolInfo{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.input.raw,
		Annotations: toolAnnotations{
			Title:           t.Title,
			ReadOnlyHint:    t.Annotations.ReadOnly,
			DestructiveHint: t.Annotations.Destructive,
			IdempotentHint:  t.Annotations.Idempotent,
		},
	}
	if t.output != nil {
		ti.OutputSchema = t.output.raw
	}
	return ti
}

// compileTools checks a toolset and keeps its declaration order, which is the order
// tools/list answers with.
func compileTools[S any](tools []Tool[S], f Format, formats map[string]FormatChecker) ([]*compiledTool[S], map[string]*compiledTool[S], error) {
	list := make([]*compiledTool[S], 0, len(tools))
	byName := make(map[string]*compiledTool[S], len(tools))
	var errs []error
	for _, t := range tools {
		ct, err := compileTool(t, f, formats)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := byName[t.Name]; dup {
			errs = append(errs, fmt.Errorf("tool %s: declared twice", t.Name))
			continue
		}
		byName[t.Name] = ct
		list = append(list, ct)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return list, byName, nil
}

// ToolsListJSON returns the tools/list result of an endpoint, indented and ending in a
// newline, in declaration order: the snapshot kept under api/ and diffed in CI, so that
// a change to any tool's contract shows up in review.
func ToolsListJSON[S any](ep Endpoint[S]) ([]byte, error) {
	list, _, err := compileTools(ep.Tools, ep.Format, builtinFormats())
	if err != nil {
		return nil, fmt.Errorf("tools list json: %w", err)
	}
	infos := make([]toolInfo, len(list))
	for i, t := range list {
		infos[i] = t.info()
	}
	compact, err := encodeJSON(struct {
		Tools []toolInfo `json:"tools"`
	}{infos})
	if err != nil {
		return nil, fmt.Errorf("tools list json: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return nil, fmt.Errorf("tools list json: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
