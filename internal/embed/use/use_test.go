package use

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// modelPath is the shipped model file; -model compares another one (say a float32
// conversion made with usegen -quant f32) with the reference outputs.
var modelPath = flag.String("model", "../builtin/uselite.bin", "model file to test")

var loaded = sync.OnceValues(func() (*Model, error) {
	raw, err := os.ReadFile(*modelPath)
	if err != nil {
		return nil, err
	}
	f, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	return NewModel(f)
})

func model(t testing.TB) *Model {
	t.Helper()
	m, err := loaded()
	if err != nil {
		t.Fatalf("load %s: %v", *modelPath, err)
	}
	return m
}

type refCase struct {
	Text   string    `json:"text"`
	Tokens []int32   `json:"tokens"`
	Vector []float64 `json:"vector"`
}

func reference(t *testing.T) []refCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct{ Cases []refCase }
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 30 {
		t.Fatalf("reference.json has %d cases", len(ref.Cases))
	}
	return ref.Cases
}

func cosine(a []float32, b []float64) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * b[i]
		na += float64(a[i]) * float64(a[i])
		nb += b[i] * b[i]
	}
	return d / math.Sqrt(na*nb)
}

// goldenMinCosine is the least cosine between this package's vector and the JavaScript
// reference's for any reference sentence. Measured: the shipped int8 file gives min
// 0.99906 and mean 0.99964; a float32 conversion (usegen -quant f32) 1.000000 on all
// (docs/embeddings.md). The quantization is what the margin is for.
const goldenMinCosine = 0.999

// goldenMeanCosine bounds the average over the sentences.
const goldenMeanCosine = 0.9995

func TestGolden(t *testing.T) {
	t.Parallel()
	m := model(t)
	cases := reference(t)
	t.Run("tokens equal the JavaScript tokenizer's", func(t *testing.T) {
		for _, c := range cases {
			if got := m.tok.Encode(c.Text); !slices.Equal(got, c.Tokens) {
				t.Errorf("Encode(%q) = %v, want %v", c.Text, got, c.Tokens)
			}
		}
	})
	t.Run("vectors match the JavaScript model's", func(t *testing.T) {
		v := make([]float32, Dim)
		var sum float64
		worst, worstText := 1.0, ""
		for _, c := range cases {
			if !m.Embed(c.Text, v) {
				t.Fatalf("Embed(%q) found no tokens", c.Text)
			}
			cos := cosine(v, c.Vector)
			sum += cos
			if cos < worst {
				worst, worstText = cos, c.Text
			}
			if cos < goldenMinCosine {
				t.Errorf("cosine(Go, JS) for %q = %.6f, want ≥ %v", c.Text, cos, goldenMinCosine)
			}
		}
		mean := sum / float64(len(cases))
		t.Logf("cosine(Go, JS) over %d sentences: mean %.6f, min %.6f (%.40q)", len(cases), mean, worst, worstText)
		if mean < goldenMeanCosine {
			t.Errorf("mean cosine %.6f, want ≥ %v", mean, goldenMeanCosine)
		}
	})
}

// EmbedMany, stacking texts into shared forward passes, gives each text the vector Embed
// gives it alone, for texts of every length (an empty one, one of MaxTokens, and enough
// of them to fill several passes).
func TestEmbedManyMatchesEmbed(t *testing.T) {
	t.Parallel()
	m := model(t)
	var texts []string
	for _, c := range reference(t) {
		texts = append(texts, c.Text)
	}
	long := strings.Repeat("every deploy needs a rollback plan written down first ", 30)
	texts = append(texts, "", long, "   ", "short", long)
	vs := make([][]float32, len(texts))
	for i := range vs {
		vs[i] = make([]float32, Dim)
		vs[i][0] = 9 // overwritten (or cleared for a text with no tokens)
	}
	ok := m.EmbedMany(texts, vs)
	for i, text := range texts {
		want := make([]float32, Dim)
		wantOK := m.Embed(text, want)
		if ok[i] != wantOK {
			t.Fatalf("text %d (%.30q): ok %v, Embed says %v", i, text, ok[i], wantOK)
		}
		for j := range want {
			if math.Abs(float64(vs[i][j]-want[j])) > 1e-5 {
				t.Fatalf("text %d (%.30q): v[%d] = %v, Embed gives %v", i, text, j, vs[i][j], want[j])
			}
		}
	}
}

// Benchmarks: a short query (9 tokens), a typical memory entry (26 tokens) and a long
// one (45 tokens).
func BenchmarkEmbed(b *testing.B) {
	m := model(b)
	for _, bc := range []struct{ name, text string }{
		{"query", "Who has to sign off on large money-back requests?"},
		{"entry", "Invoices are paid net 30; suppliers who want faster payment get a 2 percent discount for paying within ten days."},
		{"long", "Deploys to production happen only on Tuesdays and Thursdays after the change advisory board approves them, and every deploy must have a rollback plan written in the ticket before anyone presses the button."},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := make([]float32, Dim)
			b.ReportMetric(float64(len(m.Tokens(bc.text))), "tokens")
			b.ReportAllocs()
			for b.Loop() {
				m.Embed(bc.text, v)
			}
		})
	}
}

// axpy (vectorized where the CPU allows) agrees with the plain loop for every length
// around the vector width, tails included, and leaves y past len(x) alone.
func TestAxpyMatchesGeneric(t *testing.T) {
	t.Parallel()
	t.Logf("vectorized: %v", vectorized())
	for n := range 100 {
		x := make([]float32, n)
		y1, y2 := make([]float32, n+3), make([]float32, n+3)
		for i := range x {
			x[i] = float32(i%7) - 2.5
		}
		for i := range y1 {
			y1[i], y2[i] = float32(i)/3, float32(i)/3
		}
		axpy(0.75, x, y1)
		axpyGeneric(0.75, x, y2)
		for i := range y1 {
			if math.Abs(float64(y1[i]-y2[i])) > 1e-5 {
				t.Fatalf("n=%d: y[%d] = %v, want %v", n, i, y1[i], y2[i])
			}
		}
	}
}

// matMul through the packed kernels (each this CPU runs: AVX2's panels of 16, AVX-512's
// of 32) agrees with the portable row-by-row loop for every count of positions around
// the block of four, dense and mostly zero inputs (the sparse kernel's step lists), and
// leaves y's other rows alone.
func TestMatMulMatchesGeneric(t *testing.T) {
	t.Parallel()
	var widths []int
	if vectorized() {
		widths = append(widths, 16)
	}
	if panelWidth() == 32 {
		widths = append(widths, 32)
	}
	t.Logf("panel widths this CPU runs: %v", widths)
	for _, sh := range []struct{ in, out int }{{EmbedDim, 3 * EmbedDim}, {FFNWidth, Dim}, {Dim, FFNWidth}, {7, 64}} {
		w := make([]float32, sh.in*sh.out)
		for i := range w {
			w[i] = float32((i*7919)%201-100) / 100
		}
		b := make([]float32, sh.out)
		for i := range b {
			b[i] = float32(i%5) - 2
		}
		for _, pc := range []struct {
			pw     int
			sparse bool
		}{{16, false}, {16, true}, {32, false}, {32, true}} {
			if !slices.Contains(widths, pc.pw) {
				continue
			}
			sparse := pc.sparse
			packed := packMatrix(w, sh.in, sh.out, pc.pw)
			packed.sparseInput = sparse
			plain := matrix{in: sh.in, out: sh.out, data: w}
			for n := range 10 {
				x := make([]float32, n*sh.in)
				for i := range x {
					x[i] = float32((i*104729)%97-48) / 50
					if sparse && i%11 != 0 {
						x[i] = 0 // about nine in ten zero, as after relu
					}
				}
				got, want := make([]float32, (n+1)*sh.out), make([]float32, (n+1)*sh.out)
				got[n*sh.out], want[n*sh.out] = 42, 42 // a row past n stays as it was
				var sl stepLists
				matMul(x, packed, b, got, n, &sl)
				matMul(x, plain, b, want, n, &sl)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-3*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("panels of %d, in=%d out=%d n=%d sparse=%v: y[%d] = %v, want %v", pc.pw, sh.in, sh.out, n, sparse, i, got[i], want[i])
					}
				}
			}
		}
	}
}
