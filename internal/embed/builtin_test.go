package embed

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/relayroom/relayroom/internal/embed/wordvec"
)

// One embedder for the package's tests: loading is once per Builtin, as in production.
var testBuiltin = sync.OnceValue(func() *Builtin { return NewBuiltin() })

func embedAll(t testing.TB, e Embedder, texts ...string) [][]float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(texts) {
		t.Fatalf("got %d vectors for %d texts", len(vs), len(texts))
	}
	return vs
}

func TestBuiltinFile(t *testing.T) {
	const maxSize = 6_000_000 // commit size matters: see docs/embeddings.md
	if n := len(builtinData); n > maxSize {
		t.Errorf("embedded word-vector file is %d bytes, over the %d budget", n, maxSize)
	}
	tab, err := wordvec.Decode([]byte(builtinData))
	if err != nil {
		t.Fatalf("embedded file does not verify: %v", err)
	}
	if tab.Dim != 100 || tab.Len() != 50000 {
		t.Errorf("dim %d, %d words; want 100, 50000", tab.Dim, tab.Len())
	}
	// BuiltinName's version must move with the file's format version.
	if v := binary.LittleEndian.Uint16([]byte(builtinData[8:10])); v != 1 || !strings.HasSuffix(BuiltinName, "-v1") {
		t.Errorf("file version %d with name %q: bump BuiltinName together with the format", v, BuiltinName)
	}
	b := testBuiltin()
	if err := b.Load(); err != nil {
		t.Fatal(err)
	}
	if b.Name() != "builtin-glove100-v1" || b.Dim() != 100 {
		t.Errorf("Name %q Dim %d", b.Name(), b.Dim())
	}
	t.Logf("file %d bytes, loaded in %v", len(builtinData), b.LoadTime())
}

// The example from the environment notes, and more pairs of the same shape: a paraphrase
// must be clearly closer than an unrelated sentence. The margin (0.25) is far above what
// plain averaging gets (0.12 on the first triple), so losing the common-component removal
// fails here; TestBuiltinStopWordsWeighLittle covers the SIF weights.
func TestBuiltinSemanticOrdering(t *testing.T) {
	triples := []triple{
		{"How do I rotate my API credentials?", "Steps to change an access key or password", "The weather in Paris is lovely in spring"},
		{"The cat rested on the carpet", "The kitten slept on the rug", "The stock market fell sharply today"},
		{"The meeting is scheduled for Monday afternoon", "We will meet on Monday after lunch", "Bacteria can cause serious infections"},
		{"Encrypt the backups before uploading them", "Backups must be encrypted prior to upload", "The restaurant serves excellent pasta"},
		{"The doctor prescribed medicine for the fever", "The physician gave him drugs to treat his temperature", "The software update added new features"},
		{"The website is down for maintenance tonight", "The site will be offline this evening for repairs", "Elephants live in large family groups"},
	}
	b := testBuiltin()
	checkParaphrasesCloser(t, b, 0.25, triples...)
	// The notes' example in absolute terms too: related clearly positive, unrelated ~0.
	v := embedAll(t, b, triples[0].query, triples[0].para, triples[0].unrelated)
	if p, u := Cosine(v[0], v[1]), Cosine(v[0], v[2]); p < 0.3 || u > 0.15 {
		t.Errorf("credentials example: paraphrase %.3f (want ≥ 0.3), unrelated %.3f (want ≤ 0.15)", p, u)
	}
}

// SIF weighting: padding a request with function words barely moves it (0.75 with the
// weights, 0.50 when every word counts the same).
func TestBuiltinStopWordsWeighLittle(t *testing.T) {
	v := embedAll(t, testBuiltin(), "rotate the API keys",
		"so then it is what we should all of us do: just rotate the API keys as it was said")
	if c := Cosine(v[0], v[1]); c < 0.65 {
		t.Errorf("cosine %.3f: function words weigh too much", c)
	}
}

// Single words: synonyms (and close relatives) closer than unrelated words. GloVe learnt
// from news and Wikipedia, so senses follow them: "bill" is mostly legislation and "bug"
// an insect; pairs that hinge on a software sense are not promised.
func TestBuiltinSynonyms(t *testing.T) {
	checkParaphrasesCloser(t, testBuiltin(), 0.2,
		triple{"car", "automobile", "banana"},
		triple{"buy", "purchase", "thunder"},
		triple{"doctor", "physician", "guitar"},
		triple{"error", "mistake", "violin"},
		triple{"invoice", "payment", "galaxy"},
		triple{"server", "database", "poetry"},
	)
}

func TestBuiltinDeterministicAndNormalised(t *testing.T) {
	texts := []string{"Deploy the new release to production on Friday", "rotate the keys", "ünïcödé café naïve", "x"}
	a := embedAll(t, testBuiltin(), texts...)
	// A fresh instance, a different batch shape and position: the same vectors, bit for bit.
	fresh := NewBuiltin()
	b := embedAll(t, fresh, texts[2], texts[0], texts[1])
	for i, j := range map[int]int{0: 1, 1: 2, 2: 0} {
		for d := range a[i] {
			if a[i][d] != b[j][d] {
				t.Fatalf("text %d component %d: %v then %v", i, d, a[i][d], b[j][d])
			}
		}
	}
	for i, v := range a[:3] {
		var s float64
		for _, x := range v {
			s += float64(x) * float64(x)
		}
		if math.Abs(math.Sqrt(s)-1) > 1e-5 {
			t.Errorf("text %d: norm %v, want 1", i, math.Sqrt(s))
		}
	}
}

// No known word: a zero vector of the right length, no error; callers detect it with
// IsZero and Cosine gives 0 against anything.
func TestBuiltinNoKnownWord(t *testing.T) {
	b := testBuiltin()
	vs := embedAll(t, b, "", "   ", "!!! ???", "zqxjvbk wqpfhgt", "the cat")
	for i, v := range vs[:4] {
		if len(v) != 100 || !IsZero(v) {
			t.Errorf("text %d: want a zero vector of length 100, got len %d zero=%v", i, len(v), IsZero(v))
		}
		if c := Cosine(v, vs[4]); c != 0 {
			t.Errorf("text %d: cosine with a zero vector %v, want 0", i, c)
		}
	}
	if IsZero(vs[4]) {
		t.Error(`"the cat" must have a vector`)
	}
	if vs, err := b.Embed(context.Background(), nil); err != nil || len(vs) != 0 {
		t.Errorf("no texts: %v, %v", vs, err)
	}
}

// A damaged word-vector file is refused at load with a clear error, and the embedder
// then fails rather than producing vectors.
func TestBuiltinRefusesCorruptFile(t *testing.T) {
	var b *Builtin
	checkRefusesCorrupt(t, builtinData, func(data string) loadable { b = newBuiltinFrom(data); return b }, wordvec.ErrCorrupt)
	if b.Dim() != 0 {
		t.Errorf("Dim after a failed load: %d", b.Dim())
	}
}

// If you changed the embedding on purpose, bump BuiltinName's version and update the
// numbers.
func TestBuiltinGolden(t *testing.T) {
	checkGolden(t, testBuiltin(), "BuiltinName", map[int]float32{0: 0.0402575, 1: -0.0551817, 50: -0.0615341, 99: -0.0420435})
}

func TestBuiltinConcurrentFirstUse(t *testing.T) {
	b := NewBuiltin()
	var wg sync.WaitGroup
	res := make([][]float32, 4)
	for i := range res {
		wg.Go(func() {
			vs, err := b.Embed(context.Background(), []string{"concurrent first use"})
			if err != nil {
				t.Error(err)
				return
			}
			res[i] = vs[0]
		})
	}
	wg.Wait()
	for i := 1; i < len(res); i++ {
		if Cosine(res[0], res[i]) < 0.9999 {
			t.Errorf("goroutine %d got a different vector", i)
		}
	}
}

// A 40-word sentence, the size of a typical memory entry's first lines.
const benchText = "After the outage on Tuesday we decided to rotate every API credential, move the " +
	"database backups to encrypted storage, and require two reviewers for any change to the " +
	"deployment pipeline so that a single mistake cannot take production down again"

func BenchmarkBuiltinEmbed(b *testing.B) {
	if n := len(strings.Fields(benchText)); n != 40 {
		b.Fatalf("bench text has %d words", n)
	}
	benchmarkEmbed(b, testBuiltin(), benchText)
}

func BenchmarkBuiltinLoad(b *testing.B) {
	benchmarkLoad(b, func() loadable { return NewBuiltin() })
}
