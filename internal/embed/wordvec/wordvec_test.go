package wordvec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/embed/modelfile"
)

func sample(t *testing.T) *Table {
	t.Helper()
	vecs := [][]float32{{1, -2, 0.5}, {0, 0, 0}, {-0.25, 3, 1e-3}}
	tab := &Table{Dim: 3, SourceVocab: 100, SIFA: 1e-3, Common: []float32{1, 0, 0}}
	for i, v := range vecs {
		codes, scale := Quantize(v)
		tab.Words = append(tab.Words, []string{"alpha", "beta", "e-mail"}[i])
		tab.Ranks = append(tab.Ranks, []uint32{3, 7, 70}[i])
		tab.Codes = append(tab.Codes, codes...)
		tab.Scales = append(tab.Scales, scale)
	}
	return tab
}

func encode(t *testing.T, tab *Table) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, tab); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	tab := sample(t)
	got, err := Decode(encode(t, tab))
	if err != nil {
		t.Fatal(err)
	}
	if got.Dim != 3 || got.SourceVocab != 100 || got.SIFA != tab.SIFA || got.Len() != 3 {
		t.Fatalf("header fields: %+v", got)
	}
	for i := range tab.Words {
		if got.Words[i] != tab.Words[i] || got.Ranks[i] != tab.Ranks[i] || got.Scales[i] != tab.Scales[i] {
			t.Errorf("word %d: got %q/%d/%v want %q/%d/%v", i, got.Words[i], got.Ranks[i], got.Scales[i], tab.Words[i], tab.Ranks[i], tab.Scales[i])
		}
	}
	if !bytes.Equal(int8Bytes(got.Codes), int8Bytes(tab.Codes)) {
		t.Error("codes differ")
	}
	v := make([]float32, 3)
	got.Vector(2, v)
	if math.Abs(float64(v[1]-3)) > 1e-6 { // the largest component is exact by construction
		t.Errorf("dequantized max component %v, want 3", v[1])
	}
}

func int8Bytes(c []int8) []byte {
	b := make([]byte, len(c))
	for i, x := range c {
		b[i] = byte(x)
	}
	return b
}

func TestQuantizeError(t *testing.T) {
	v := []float32{0.9, -0.31, 0.0049, 2.5, -2.5, 0.777}
	codes, scale := Quantize(v)
	for i, x := range v {
		if d := math.Abs(float64(x - scale*float32(codes[i]))); d > float64(scale)/2+1e-7 {
			t.Errorf("component %d off by %v > scale/2 = %v", i, d, scale/2)
		}
	}
	if codes[3] != 127 || codes[4] != -127 {
		t.Errorf("extremes quantized to %d, %d; want ±127", codes[3], codes[4])
	}
	if c, s := Quantize([]float32{0, 0}); s != 0 || c[0] != 0 {
		t.Error("zero vector must quantize to zeros with scale 0")
	}
}

// Every way a file can be damaged or foreign is refused with ErrCorrupt and a message that
// says what is wrong.
func TestDecodeRefusesCorruptFiles(t *testing.T) {
	good := encode(t, sample(t))
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   string
	}{
		{"flipped payload byte", func(b []byte) []byte { b[modelfile.HeaderSize+20] ^= 0x40; return b }, "checksum mismatch"},
		{"flipped checksum byte", func(b []byte) []byte { b[40] ^= 1; return b }, "checksum mismatch"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-5] }, "truncated"},
		{"trailing garbage", func(b []byte) []byte { return append(b, 0) }, "truncated or padded"},
		{"shorter than header", func(b []byte) []byte { return b[:10] }, "shorter than"},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"future version", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[8:], 2); return b }, "unsupported version 2"},
		{"empty", func([]byte) []byte { return nil }, "shorter than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.mutate(bytes.Clone(good))
			_, err := Decode(data)
			if err == nil {
				t.Fatal("accepted a corrupt file")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want ErrCorrupt mentioning %q", err, c.want)
			}
		})
	}
}

// A file whose checksum is right but whose contents are inconsistent (a bug in a writer
// rather than damage) is refused too.
func TestDecodeRefusesInconsistentContent(t *testing.T) {
	good := encode(t, sample(t))
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[12:], 1000) // count far beyond the payload
	resum(bad)
	if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("count beyond payload: err %v", err)
	}
	bad = bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[16:], 10) // source vocabulary smaller than a rank
	resum(bad)
	if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "beyond source vocabulary") {
		t.Fatalf("rank beyond vocabulary: err %v", err)
	}
}

// resum recomputes the header checksum after a deliberate edit, as Encode would.
func resum(b []byte) {
	s := sha256.Sum256(b[modelfile.HeaderSize:])
	copy(b[32:64], s[:])
}

func TestEncodeValidates(t *testing.T) {
	tab := sample(t)
	tab.Ranks[2] = 1 // not increasing
	if err := Encode(&bytes.Buffer{}, tab); err == nil {
		t.Error("accepted decreasing ranks")
	}
	tab = sample(t)
	tab.Words[1] = "alpha"
	if err := Encode(&bytes.Buffer{}, tab); err == nil {
		t.Error("accepted a duplicate word")
	}
}

func TestZipf(t *testing.T) {
	n := 1000
	var sum float64
	for r := range n {
		sum += ZipfProb(r, n)
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("Zipf probabilities sum to %v, want 1", sum)
	}
	if w := SIFWeight(1e-3, 1e-3); w != 0.5 {
		t.Errorf("SIFWeight(a, a) = %v, want 0.5", w)
	}
}
