package embed

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// Helpers for the tests both builtin embedders (USE and GloVe) pass in the same way.

// loadable is a builtin embedder: an Embedder whose model loads from the binary. The
// server loads it before serving and logs LoadTime (internal/app asks for both methods
// and skips the load when they are missing, so they must stay).
type loadable interface {
	Embedder
	Load() error
	LoadTime() time.Duration
}

var (
	_ loadable = (*USE)(nil)
	_ loadable = (*Builtin)(nil)
)

// triple is a query, a paraphrase of it and an unrelated sentence.
type triple struct{ query, para, unrelated string }

// checkParaphrasesCloser fails unless every paraphrase is at least margin closer to its
// query than the unrelated sentence is.
func checkParaphrasesCloser(t *testing.T, e Embedder, margin float32, triples ...triple) {
	t.Helper()
	for _, tr := range triples {
		v := embedAll(t, e, tr.query, tr.para, tr.unrelated)
		para, unrel := Cosine(v[0], v[1]), Cosine(v[0], v[2])
		t.Logf("%.3f vs %.3f  %q", para, unrel, tr.query)
		if para < unrel+margin {
			t.Errorf("%q: paraphrase %.3f, unrelated %.3f: want the paraphrase at least %.2f closer", tr.query, para, unrel, margin)
		}
	}
}

// checkGolden guards a vector space: stored vectors are only comparable with new ones
// while it holds. nameConst is the constant to bump when it changed on purpose.
func checkGolden(t *testing.T, e Embedder, nameConst string, want map[int]float32) {
	t.Helper()
	v := embedAll(t, e, "The quick brown fox jumps over the lazy dog")[0]
	for d, w := range want {
		if math.Abs(float64(v[d]-w)) > 1e-4 {
			t.Errorf("component %d = %.6f, want %.6f: the builtin vector space changed; bump %s", d, v[d], w, nameConst)
		}
	}
}

// checkRefusesCorrupt: a damaged model file is refused at load with a clear error, and
// the embedder then fails rather than producing vectors; so is a truncated one.
func checkRefusesCorrupt(t *testing.T, data string, from func(string) loadable, errCorrupt error) {
	t.Helper()
	damaged := []byte(data)
	damaged[len(damaged)/2] ^= 0x5a
	e := from(string(damaged))
	err := e.Load()
	if !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Load: %v; want ErrCorrupt with a checksum mismatch", err)
	}
	if _, err2 := e.Embed(context.Background(), []string{"hello"}); !errors.Is(err2, errCorrupt) {
		t.Errorf("Embed after a failed load: %v", err2)
	}
	if err := from(data[:1000]).Load(); !errors.Is(err, errCorrupt) {
		t.Errorf("truncated file: %v", err)
	}
}

func TestBuiltinEmbeddersHonourContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, e := range []Embedder{testUSE(), testBuiltin()} {
		t.Run(e.Name(), func(t *testing.T) {
			if _, err := e.Embed(ctx, []string{"a", "b"}); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled context: %v", err)
			}
		})
	}
}

// benchmarkLoad is the cost of decoding a builtin model at startup.
func benchmarkLoad(b *testing.B, fresh func() loadable) {
	b.ReportAllocs()
	for b.Loop() {
		if err := fresh().Load(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchmarkEmbed is the cost of embedding texts in one call to e, whose model is loaded
// first.
func benchmarkEmbed(b *testing.B, e loadable, texts ...string) {
	ctx := context.Background()
	if err := e.Load(); err != nil {
		b.Fatal(err)
	}
	if _, err := e.Embed(ctx, texts); err != nil { // and in USE's cache from here on
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}
