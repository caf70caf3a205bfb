// Package embed turns text into vectors for semantic memory search (docs/embeddings.md).
//
// Four embedders sit behind one interface:
//
//   - builtin (the default): Google's Universal Sentence Encoder Lite, a small
//     transformer shipped inside the binary and run in pure Go (package use). Offline,
//     milliseconds per text, reads whole sentences: finds paraphrases that share no word.
//   - glove: the previous default, GloVe word vectors shipped inside the binary, combined
//     into a sentence vector by SIF weighting. Microseconds per text, good on synonyms,
//     blind to word order and to words outside its 50,000.
//   - openai: any server speaking OpenAI's POST /v1/embeddings (OpenAI, Ollama, vLLM, TEI).
//   - none: no semantic search; callers fall back to lexical search.
//
// Every vector must be stored with the Name of the embedder that made it: vectors of
// different embedders live in different spaces and are never compared.
package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// Embedder turns texts into vectors.
//
// Implementations are safe for concurrent use.
type Embedder interface {
	// Name is a stable id recorded with every vector, e.g. "builtin-use-lite-v1",
	// "builtin-glove100-v1", "openai:<model>", "none". It changes whenever the vectors an input maps to change.
	Name() string
	// Dim is the vector length, 0 for none (and for openai until learnt from a response
	// when not configured).
	Dim() int
	// Embed returns one L2-normalised vector per text, in order.
	//
	// A text with nothing to embed (blank, or for glove no known word) yields a zero
	// vector, not an error, so one odd text does not fail a batch. A zero vector carries
	// no semantic signal: test it with IsZero, do not store it, and treat the text as
	// lexical-only. Cosine returns 0 for it.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ErrDisabled is returned by the none embedder: semantic search is switched off and the
// caller should use lexical search alone.
var ErrDisabled = errors.New("embed: semantic embedding is disabled (embedder none)")

// Kinds accepted by Config.Kind.
const (
	KindBuiltin = "builtin" // Universal Sentence Encoder Lite (USE)
	KindGlove   = "glove"   // GloVe word vectors (Builtin)
	KindOpenAI  = "openai"
	KindNone    = "none"
)

// Config chooses and configures an embedder. The lead wires it from the environment
// (RELAYROOM_EMBEDDER, RELAYROOM_EMBED_URL, RELAYROOM_EMBED_MODEL, RELAYROOM_EMBED_API_KEY,
// RELAYROOM_EMBED_DIM); see docs/embeddings.md.
type Config struct {
	// Kind is "builtin" (the default when empty), "glove", "openai" or "none".
	Kind string

	// The rest configures openai only.

	// BaseURL of the server, e.g. "http://localhost:11434" for Ollama or
	// "https://api.openai.com"; "/v1/embeddings" is appended. A base ending in "/v1" is
	// accepted too, as OpenAI client libraries are usually configured that way.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer …" when not empty. It never appears in
	// errors or in String.
	APIKey string
	// Model is the embedding model's name as the server knows it.
	Model string
	// Dim is the expected vector length; 0 learns it from the first response. When set,
	// a response of any other length is an error (a misconfigured model would otherwise
	// silently fill the store with vectors that cannot be compared).
	Dim int
	// Timeout bounds each HTTP request (one batch); default 30s. The caller's context
	// still applies.
	Timeout time.Duration
	// BatchSize is the most texts sent in one request; default 32, which every common
	// server accepts (TEI's default limit is 32; OpenAI's is 2048).
	BatchSize int
	// HTTPClient is used when set (tests, proxies); otherwise a plain client. Its own
	// Timeout, if any, applies on top of Timeout.
	HTTPClient *http.Client
}

// String describes the configuration without the API key, so a Config can be logged.
func (c Config) String() string {
	key := "unset"
	if c.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("embed.Config{Kind:%q BaseURL:%q Model:%q Dim:%d Timeout:%v BatchSize:%d APIKey:%s}",
		c.Kind, c.BaseURL, c.Model, c.Dim, c.Timeout, c.BatchSize, key)
}

// GoString keeps %#v from printing the key too.
func (c Config) GoString() string { return c.String() }

// New builds the embedder cfg.Kind names. It does no I/O: the builtin model and the glove
// table load on first use (or on USE.Load, Builtin.Load), and openai is first contacted by
// Embed.
func New(cfg Config) (Embedder, error) {
	switch kind := strings.ToLower(strings.TrimSpace(cfg.Kind)); kind {
	case "", KindBuiltin:
		return NewUSE(), nil
	case KindGlove:
		return NewBuiltin(), nil
	case KindOpenAI:
		e, err := NewOpenAI(cfg)
		if err != nil {
			return nil, fmt.Errorf("embed: new: %w", err)
		}
		return e, nil
	case KindNone:
		return None{}, nil
	default:
		return nil, fmt.Errorf("embed: new: unknown embedder kind %q (want %q, %q, %q or %q)", cfg.Kind, KindBuiltin, KindGlove, KindOpenAI, KindNone)
	}
}

// None is the embedder that embeds nothing: Name "none", Dim 0, Embed fails with
// ErrDisabled.
type None struct{}

// Name implements Embedder.
func (None) Name() string { return KindNone }

// Dim implements Embedder.
func (None) Dim() int { return 0 }

// Embed implements Embedder; it always returns ErrDisabled.
func (None) Embed(context.Context, []string) ([][]float32, error) { return nil, ErrDisabled }

// Cosine is the cosine similarity of a and b, in [-1, 1]. It does not assume normalised
// input. It is 0 when either vector is zero (no semantic signal) or when the lengths
// differ (vectors of different embedders, which must not be compared).
func Cosine(a, b []float32) float32 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	// float64 accumulation: with 1,000+ dimensions float32 sums drift visibly.
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	c := dot / math.Sqrt(na*nb)
	return float32(math.Max(-1, math.Min(1, c)))
}

// IsZero reports whether v carries no semantic signal: empty or all zeros (see
// Embedder.Embed).
func IsZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// normalize scales v to unit L2 length in place; a zero vector stays zero.
func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}

// EmbedParallel embeds texts with e in up to workers concurrent batches and returns the
// vectors in order. It is for bulk work off the request path (seeding fixtures); a server
// embeds one batch at a time so that background work leaves cores to requests.
func EmbedParallel(ctx context.Context, e Embedder, texts []string, workers int) ([][]float32, error) {
	workers = max(1, min(workers, len(texts)))
	out := make([][]float32, len(texts))
	errs := make([]error, workers)
	chunk := (len(texts) + workers - 1) / max(workers, 1)
	done := make(chan struct{}, workers)
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(texts))
		go func() {
			defer func() { done <- struct{}{} }()
			if lo >= hi {
				return
			}
			vs, err := e.Embed(ctx, texts[lo:hi])
			if err != nil {
				errs[w] = err
				return
			}
			copy(out[lo:hi], vs)
		}()
	}
	for range workers {
		<-done
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("embed: parallel: %w", err)
	}
	return out, nil
}
