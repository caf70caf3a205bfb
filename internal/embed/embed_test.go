package embed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	for _, kind := range []string{"", "builtin", " Builtin "} {
		e, err := New(Config{Kind: kind})
		if err != nil || e.Name() != USEName || e.Dim() != 512 {
			t.Errorf("kind %q: %v, %v", kind, e, err)
		}
	}
	if e, err := New(Config{Kind: "glove"}); err != nil || e.Name() != BuiltinName {
		t.Errorf("kind glove: %v, %v", e, err)
	}
	e, err := New(Config{Kind: "openai", BaseURL: "http://localhost:11434", Model: "nomic-embed-text"})
	if err != nil || e.Name() != "openai:nomic-embed-text" {
		t.Errorf("openai: %v, %v", e, err)
	}
	if _, err := New(Config{Kind: "openai"}); err == nil || !strings.Contains(err.Error(), "model is required") {
		t.Errorf("openai without model: %v", err)
	}
	e, err = New(Config{Kind: "none"})
	if err != nil || e.Name() != "none" || e.Dim() != 0 {
		t.Errorf("none: %v, %v", e, err)
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrDisabled) {
		t.Errorf("none.Embed: %v, want ErrDisabled", err)
	}
	_, err = New(Config{Kind: "sentence-transformers"})
	if err == nil || !strings.Contains(err.Error(), `unknown embedder kind "sentence-transformers"`) ||
		!strings.Contains(err.Error(), `"builtin", "glove", "openai" or "none"`) {
		t.Errorf("bad kind: %v", err)
	}
}

func TestConfigStringHidesKey(t *testing.T) {
	c := Config{Kind: "openai", APIKey: testKey, Model: "m"}
	for _, s := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, testKey) {
			t.Errorf("key printed: %s", s)
		}
	}
}

func TestCosine(t *testing.T) {
	for _, c := range []struct {
		a, b []float32
		want float32
	}{
		{[]float32{1, 0}, []float32{1, 0}, 1},
		{[]float32{1, 0}, []float32{0, 2}, 0},
		{[]float32{3, 4}, []float32{-6, -8}, -1}, // not normalised on input
		{[]float32{1, 1}, []float32{0, 0}, 0},    // zero vector: no signal
		{[]float32{1, 0}, []float32{1, 0, 0}, 0}, // different embedders
		{nil, nil, 0},
	} {
		if got := Cosine(c.a, c.b); got < c.want-1e-6 || got > c.want+1e-6 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if !IsZero(nil) || !IsZero([]float32{0, 0}) || IsZero([]float32{0, 1e-9}) {
		t.Error("IsZero")
	}
}

func TestEmbedParallelKeepsOrder(t *testing.T) {
	t.Parallel()
	texts := []string{"alpha", "bravo charlie", "", "delta echo foxtrot", "golf"}
	b := testBuiltin()
	want := embedAll(t, b, texts...)
	for _, workers := range []int{1, 2, 3, 8} {
		got, err := EmbedParallel(context.Background(), b, texts, workers)
		if err != nil || len(got) != len(texts) {
			t.Fatalf("workers %d: %d vectors, %v", workers, len(got), err)
		}
		for i := range texts {
			if Cosine(got[i], want[i]) != Cosine(want[i], want[i]) {
				t.Errorf("workers %d: text %d out of place", workers, i)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := EmbedParallel(ctx, b, texts, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
