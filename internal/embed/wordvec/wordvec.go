// Package wordvec is the on-disk format of the builtin embedder's word vectors: a small
// checksummed header followed by int8-quantized vectors and their vocabulary.
//
// It is a package of its own, apart from internal/embed, because the converter
// (internal/embed/cmd/glovegen) writes the file that internal/embed embeds with go:embed:
// if the converter imported internal/embed it could not be built while the file is
// missing, which is exactly when it is needed.
//
// Layout (little-endian), version 1, in package modelfile's envelope:
//
//	offset size  field
//	0      8     magic "RRWVEC\r\n"
//	8      2     version (1)
//	10     2     dim
//	12     4     count: number of words
//	16     4     source vocabulary size (for Zipf probabilities from ranks)
//	20     4     SIF parameter a (float32) the common component was computed with
//	24     8     payload length in bytes
//	32     32    SHA-256 of the payload
//	64     ...   payload:
//	             common component: dim × float32 (unit vector, or zeros for none)
//	             per-vector scales: count × float32
//	             codes: count × dim × int8 (word i's component d is scale[i]·code[i·dim+d])
//	             vocabulary: count × (uvarint rank delta, uvarint byte length, UTF-8 bytes),
//	             in rank order; the first delta is the first rank itself.
package wordvec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/relayroom/relayroom/internal/embed/modelfile"
)

// Magic opens every file in this format.
const Magic = "RRWVEC\r\n"

// Version is the only format version this package reads and writes.
const Version = 1

// This format's header fields (modelfile.Fields offsets).
const (
	fieldDim         = 0  // uint16
	fieldCount       = 2  // uint32
	fieldSourceVocab = 6  // uint32
	fieldSIFA        = 10 // float32 bits
)

// maxDim bounds what Decode accepts, so a corrupted header cannot ask for absurd memory.
const maxDim = 4096

// ErrCorrupt is wrapped by every Decode error about the file's content, so a caller can
// tell a damaged or foreign file from other failures.
var ErrCorrupt = errors.New("word-vector file is corrupt or not in relayroom format")

// Table is a decoded (or to-be-encoded) word-vector table.
type Table struct {
	Dim         int
	SourceVocab int       // size of the ranked vocabulary the words were taken from
	SIFA        float32   // SIF a that Common was computed with
	Common      []float32 // dim: common component to remove from sentence vectors (may be zero)
	Words       []string  // in rank order
	Ranks       []uint32  // 0-based rank of each word in the source vocabulary, increasing
	Scales      []float32 // per-vector dequantization scale
	Codes       []int8    // len(Words)·Dim quantized components
}

// Len is the number of words.
func (t *Table) Len() int { return len(t.Words) }

// Vector writes the dequantized vector of word i into dst (len Dim).
func (t *Table) Vector(i int, dst []float32) {
	s := t.Scales[i]
	codes := t.Codes[i*t.Dim : (i+1)*t.Dim]
	for d, c := range codes {
		dst[d] = s * float32(c)
	}
}

// Quantize returns the symmetric int8 codes and scale of v: scale = max|v|/127, so the
// largest component is exact and every other one is off by at most scale/2. A per-vector
// scale (rather than one for the whole table) keeps rare words, whose GloVe vectors are
// short, from losing most of their resolution.
func Quantize(v []float32) (codes []int8, scale float32) {
	var maxAbs float64
	for _, x := range v {
		maxAbs = math.Max(maxAbs, math.Abs(float64(x)))
	}
	codes = make([]int8, len(v))
	if maxAbs == 0 {
		return codes, 0
	}
	scale = float32(maxAbs / 127)
	for i, x := range v {
		q := math.Round(float64(x) / float64(scale))
		codes[i] = int8(math.Max(-127, math.Min(127, q)))
	}
	return codes, scale
}

// Encode writes t in format version 1.
func Encode(w io.Writer, t *Table) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("wordvec: encode: %w", err)
	}
	var p bytes.Buffer
	le := binary.LittleEndian
	for _, x := range t.Common {
		p.Write(le.AppendUint32(nil, math.Float32bits(x)))
	}
	for _, x := range t.Scales {
		p.Write(le.AppendUint32(nil, math.Float32bits(x)))
	}
	for _, c := range t.Codes {
		p.WriteByte(byte(c))
	}
	var prev uint32
	for i, word := range t.Words {
		delta := t.Ranks[i]
		if i > 0 {
			delta = t.Ranks[i] - prev
		}
		prev = t.Ranks[i]
		p.Write(binary.AppendUvarint(nil, uint64(delta)))
		p.Write(binary.AppendUvarint(nil, uint64(len(word))))
		p.WriteString(word)
	}
	var f modelfile.Fields
	f.PutUint16(fieldDim, uint16(t.Dim))
	f.PutUint32(fieldCount, uint32(len(t.Words)))
	f.PutUint32(fieldSourceVocab, uint32(t.SourceVocab))
	f.PutUint32(fieldSIFA, math.Float32bits(t.SIFA))
	if err := modelfile.Write(w, Magic, Version, f, p.Bytes()); err != nil {
		return fmt.Errorf("wordvec: encode: %w", err)
	}
	return nil
}

func (t *Table) validate() error {
	n := len(t.Words)
	switch {
	case t.Dim <= 0 || t.Dim > maxDim:
		return fmt.Errorf("dim %d out of range", t.Dim)
	case n == 0:
		return errors.New("no words")
	case len(t.Ranks) != n || len(t.Scales) != n || len(t.Codes) != n*t.Dim:
		return fmt.Errorf("inconsistent lengths: %d words, %d ranks, %d scales, %d codes", n, len(t.Ranks), len(t.Scales), len(t.Codes))
	case len(t.Common) != t.Dim:
		return fmt.Errorf("common component has %d components, want %d", len(t.Common), t.Dim)
	}
	for i, r := range t.Ranks {
		if i > 0 && r <= t.Ranks[i-1] {
			return fmt.Errorf("ranks not increasing at word %d", i)
		}
		if int(r) >= t.SourceVocab {
			return fmt.Errorf("rank %d beyond source vocabulary %d", r, t.SourceVocab)
		}
	}
	for i, s := range t.Scales {
		if !finite(s) || s < 0 {
			return fmt.Errorf("bad scale %v for word %d", s, i)
		}
	}
	for _, x := range t.Common {
		if !finite(x) {
			return errors.New("common component not finite")
		}
	}
	if !finite(t.SIFA) || t.SIFA <= 0 {
		return fmt.Errorf("bad SIF a %v", t.SIFA)
	}
	seen := make(map[string]struct{}, n)
	for i, word := range t.Words {
		if word == "" {
			return fmt.Errorf("empty word at %d", i)
		}
		if _, dup := seen[word]; dup {
			return fmt.Errorf("duplicate word %q", word)
		}
		seen[word] = struct{}{}
	}
	return nil
}

// Decode parses and verifies data. It refuses, with an error wrapping ErrCorrupt, a file
// with the wrong magic or version, a truncated or over-long payload, a checksum mismatch,
// or inconsistent contents. The returned Table does not alias data.
func Decode(data []byte) (*Table, error) {
	t, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("wordvec: decode: %w: %w", ErrCorrupt, err)
	}
	return t, nil
}

func decode(data []byte) (*Table, error) {
	le := binary.LittleEndian
	f, payload, err := modelfile.Open(data, Magic, Version)
	if err != nil {
		return nil, err
	}
	dim := int(f.Uint16(fieldDim))
	count := int(f.Uint32(fieldCount))
	t := &Table{
		Dim:         dim,
		SourceVocab: int(f.Uint32(fieldSourceVocab)),
		SIFA:        math.Float32frombits(f.Uint32(fieldSIFA)),
	}
	payloadLen := uint64(len(payload))
	if dim == 0 || dim > maxDim || count == 0 {
		return nil, fmt.Errorf("implausible dim %d or count %d", dim, count)
	}
	fixed := uint64(dim)*4 + uint64(count)*4 + uint64(count)*uint64(dim)
	if fixed > payloadLen {
		return nil, fmt.Errorf("payload of %d bytes cannot hold %d×%d vectors", payloadLen, count, dim)
	}
	off := 0
	readF32 := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(payload[off:]))
			off += 4
		}
		return out
	}
	t.Common = readF32(dim)
	t.Scales = readF32(count)
	t.Codes = make([]int8, count*dim)
	for i, b := range payload[off : off+count*dim] {
		t.Codes[i] = int8(b)
	}
	off += count * dim

	// One string for the whole vocabulary, sliced per word: one allocation instead of
	// count of them, which is most of the load time otherwise.
	vocab := payload[off:]
	words := make([]byte, 0, len(vocab))
	ends := make([]int, count)
	t.Ranks = make([]uint32, count)
	var rank uint64
	pos := 0
	for i := range count {
		delta, n := binary.Uvarint(vocab[pos:])
		if n <= 0 {
			return nil, fmt.Errorf("vocabulary entry %d: bad rank", i)
		}
		pos += n
		l, n := binary.Uvarint(vocab[pos:])
		if n <= 0 || l == 0 || l > uint64(len(vocab)-pos-n) {
			return nil, fmt.Errorf("vocabulary entry %d: bad length", i)
		}
		pos += n
		if i > 0 {
			if delta == 0 {
				return nil, fmt.Errorf("vocabulary entry %d: ranks not increasing", i)
			}
			rank += delta
		} else {
			rank = delta
		}
		if rank >= uint64(t.SourceVocab) {
			return nil, fmt.Errorf("vocabulary entry %d: rank %d beyond source vocabulary %d", i, rank, t.SourceVocab)
		}
		t.Ranks[i] = uint32(rank)
		words = append(words, vocab[pos:pos+int(l)]...)
		ends[i] = len(words)
		pos += int(l)
	}
	if pos != len(vocab) {
		return nil, fmt.Errorf("%d unexpected bytes after the vocabulary", len(vocab)-pos)
	}
	all := string(words)
	t.Words = make([]string, count)
	start := 0
	for i, end := range ends {
		t.Words[i] = all[start:end]
		start = end
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// ZipfProb estimates the unigram probability of the word at 0-based rank r in a ranked
// vocabulary of size n, assuming Zipf's law with exponent 1: p(r) = 1/((r+1)·H_n). GloVe
// ships ranks, not counts; this is what SIF's weights need and the law fits English
// word frequencies well in the head that the table keeps.
func ZipfProb(r, n int) float64 {
	return 1 / (float64(r+1) * Harmonic(n))
}

// Harmonic returns H_n = 1 + 1/2 + … + 1/n.
func Harmonic(n int) float64 {
	var h float64
	for k := n; k >= 1; k-- { // smallest terms first, for accuracy
		h += 1 / float64(k)
	}
	return h
}

// SIFWeight is the smooth inverse frequency weight a/(a+p) of Arora, Liang and Ma (2017).
func SIFWeight(a, p float64) float64 { return a / (a + p) }

func finite(x float32) bool {
	return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
}
