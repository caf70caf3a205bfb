package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestEmptyArgumentsArePreparedOnce: empty arguments (none, null, {}) prepare to what
// the full path gives for {}, errors included, from one computation per schema; a
// handler that changes the bytes it got does not change what the next call gets.
func TestEmptyArgumentsArePreparedOnce(t *testing.T) {
	t.Parallel()
	for name, raw := range map[string]string{
		"defaults":   fuzzSchema,
		"required":   `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`,
		"no members": noArgumentsSchema,
	} {
		t.Run(name, func(t *testing.T) {
			sc, err := compileSchema(json.RawMessage(raw), builtinFormats())
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := sc.prepare(json.RawMessage("{}"))
			for _, in := range []string{"", "null", "{}", " { } ", "{}", "null"} {
				got, err := sc.prepareArgs(json.RawMessage(in))
				if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
					t.Fatalf("%q: %s %v, want %s %v", in, got, err, want, wantErr)
				}
				for i := range got {
					got[i] = 'x'
				}
			}
		})
	}
}

// BenchmarkPrepareEmptyArguments: what a call without arguments costs the core's
// argument preparation (the fuzz schema: a default, bounds, nested objects).
func BenchmarkPrepareEmptyArguments(b *testing.B) {
	sc, err := compileSchema(json.RawMessage(fuzzSchema), builtinFormats())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sc.prepare(json.RawMessage("{}")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prepared once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sc.prepareArgs(json.RawMessage("{}")); err != nil {
				b.Fatal(err)
			}
		}
	})
}
