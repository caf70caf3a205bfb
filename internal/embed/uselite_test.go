package embed

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/relayroom/relayroom/internal/embed/use"
)

// One USE for the package's tests: loading is once per USE, as in production.
var testUSE = sync.OnceValue(func() *USE { return NewUSE() })

func TestUSEFile(t *testing.T) {
	const maxSize = 8_000_000 // commit and binary size matter: see docs/embeddings.md
	if n := len(useData); n > maxSize {
		t.Errorf("embedded model file is %d bytes, over the %d budget", n, maxSize)
	}
	u := testUSE()
	if err := u.Load(); err != nil {
		t.Fatalf("embedded model does not load: %v", err)
	}
	if u.Name() != "builtin-use-lite-v1" || u.Dim() != 512 {
		t.Errorf("Name %q Dim %d", u.Name(), u.Dim())
	}
	t.Logf("file %d bytes, loaded in %v", len(useData), u.LoadTime())
}

// Paraphrases that share (almost) no word score clearly above unrelated sentences, the
// thing averaged word vectors could not do (docs/embeddings.md).
func TestUSESemanticOrdering(t *testing.T) {
	t.Parallel()
	checkParaphrasesCloser(t, testUSE(), 0.15,
		triple{"Who has to sign off on large money-back requests?", "Customer refunds above 500 dollars need approval from finance.", "The office kitchen is cleaned every Friday."},
		triple{"How do I rotate my API credentials?", "Steps to change an access key or password", "The weather in Paris is lovely in spring"},
		triple{"The cat rested on the carpet", "The kitten slept on the rug", "The stock market fell sharply today"},
		triple{"When does our accounting year end?", "The fiscal year closes on March 31 and the books are locked two weeks later.", "Elephants live in large family groups"},
	)
}

func TestUSEBlankDeterministicNormalised(t *testing.T) {
	t.Parallel()
	u := testUSE()
	texts := []string{"", "  \t\n", "Deploy the new release to production on Friday", "zqxj!!"}
	a := embedAll(t, u, texts...)
	for i, v := range a {
		if len(v) != 512 {
			t.Fatalf("text %d: length %d", i, len(v))
		}
	}
	t.Run("blank texts give zero vectors", func(t *testing.T) {
		if !IsZero(a[0]) || !IsZero(a[1]) {
			t.Error("blank text: want a zero vector")
		}
	})
	t.Run("any other text has a unit vector", func(t *testing.T) {
		for _, v := range a[2:] {
			var s float64
			for _, x := range v {
				s += float64(x) * float64(x)
			}
			if math.Abs(math.Sqrt(s)-1) > 1e-5 {
				t.Errorf("norm %v, want 1", math.Sqrt(s))
			}
		}
	})
	t.Run("a fresh instance and another batch give the same bits", func(t *testing.T) {
		b := embedAll(t, NewUSE(), texts[3], texts[2])
		for d := range a[2] {
			if a[2][d] != b[1][d] || a[3][d] != b[0][d] {
				t.Fatalf("component %d differs", d)
			}
		}
	})
	t.Run("a cached vector is a copy", func(t *testing.T) {
		v := embedAll(t, u, texts[2])[0]
		v[0] += 1
		w := embedAll(t, u, texts[2])[0]
		if w[0] != a[2][0] {
			t.Errorf("cache returned a vector the caller had changed: %v, want %v", w[0], a[2][0])
		}
	})
}

// If you changed the embedding on purpose, bump USEName's version and update the numbers
// (package use's TestGolden compares with the JavaScript model itself).
func TestUSEGolden(t *testing.T) {
	t.Parallel()
	checkGolden(t, testUSE(), "USEName", map[int]float32{0: -0.000708, 1: -0.049724, 256: 0.067873, 511: -0.003841})
}

func TestUSERefusesCorruptFile(t *testing.T) {
	t.Parallel()
	checkRefusesCorrupt(t, useData, func(data string) loadable { return newUSEFrom(data) }, use.ErrCorrupt)
}

func TestTextCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := newTextCache(2)
	v := []float32{1}
	c.put("a", v)
	c.put("b", []float32{2})
	c.get("a", v) // a is now the most recent
	c.put("c", []float32{3})
	dst := []float32{0}
	if !c.get("a", dst) || dst[0] != 1 {
		t.Error("a was used last and must stay")
	}
	if c.get("b", dst) {
		t.Error("b was the least recently used and must be gone")
	}
	if !c.get("c", dst) || dst[0] != 3 {
		t.Error("c must be there")
	}
}

// BenchmarkUSEEmbed is the cost of one text without the cache: the query (9 words) on
// read_memory's request path and the 40-word entry of BenchmarkBuiltinEmbed.
func BenchmarkUSEEmbed(b *testing.B) {
	u := testUSE()
	if err := u.Load(); err != nil {
		b.Fatal(err)
	}
	m, _ := u.get()
	for _, bc := range []struct{ name, text string }{
		{"query", "Who has to sign off on large money-back requests?"},
		{"entry40words", benchText},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := make([]float32, USEDim)
			b.ReportAllocs()
			for b.Loop() {
				m.Embed(bc.text, v)
			}
		})
	}
	b.Run("cached", func(b *testing.B) {
		benchmarkEmbed(b, u, "Who has to sign off on large money-back requests?")
	})
	// The background embedder's case: 32 different entries in one call (stacked passes);
	// ns/op is for the 32.
	b.Run("batch32entries", func(b *testing.B) {
		texts := make([]string, 32)
		b.ReportAllocs()
		round := 0
		for b.Loop() {
			for i := range texts {
				// New texts every round: the cache must not answer.
				texts[i] = fmt.Sprintf("%s (%d)", benchText, round*32+i)
			}
			round++
			if _, err := u.Embed(context.Background(), texts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkUSELoad(b *testing.B) {
	benchmarkLoad(b, func() loadable { return NewUSE() })
}
