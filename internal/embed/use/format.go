package use

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/relayroom/relayroom/internal/embed/modelfile"
)

// File layout (little-endian), version 1, in package modelfile's envelope:
//
//	offset size  field
//	0      8     magic "RRUSEL\r\n"
//	8      2     version (1)
//	10     2     reserved (0)
//	12     4     number of vocabulary pieces
//	16     4     number of tensors
//	20     4     reserved (0)
//	24     8     payload length in bytes
//	32     32    SHA-256 of the payload
//	64     ...   payload:
//	             vocabulary: per piece (in id order) uvarint byte length, UTF-8 bytes,
//	             float64 score (the sentencepiece log probability, kept exact because
//	             the tokenizer's ties depend on it)
//	             tensors: per tensor uvarint name length, name, uvarint rank, uvarint
//	             dims, one encoding byte, data:
//	               EncFloat32: every value as float32
//	               EncInt8Rows: rows = product of all dims but the last; rows × float32
//	               scales, then rows × cols int8 codes (value = scale[r] · code)
//	               EncInt8Cols: cols = the last dim; cols × float32 scales, then
//	               rows × cols int8 codes (value = scale[c] · code)

// Magic opens every file in this format.
const Magic = "RRUSEL\r\n"

// Version is the only format version this package reads and writes.
const Version = 1

// This format's header fields (modelfile.Fields offsets); the rest is reserved (0).
const (
	fieldPieces  = 2 // uint32
	fieldTensors = 6 // uint32
)

// Tensor encodings.
const (
	EncFloat32  byte = 0
	EncInt8Rows byte = 1
	EncInt8Cols byte = 2
)

// Bounds Decode accepts, so a corrupted header cannot ask for absurd memory.
const (
	maxPieces  = 1 << 20
	maxTensors = 1 << 10
	maxRank    = 4
	maxElems   = 1 << 26
)

// ErrCorrupt is wrapped by every Decode error about the file's content, so a caller can
// tell a damaged or foreign file from other failures.
var ErrCorrupt = errors.New("model file is corrupt or not in relayroom format")

// Piece is one sentencepiece vocabulary entry; its id is its index.
type Piece struct {
	Text  string
	Score float64
}

// Tensor is a named array of float32 values in row-major order.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
	// Enc is how Encode stores it; Decode reports how it was stored.
	Enc byte
}

// File is a decoded (or to-be-encoded) model file.
type File struct {
	Vocab   []Piece
	Tensors []Tensor
}

// Tensor returns the tensor called name, or nil.
func (f *File) Tensor(name string) *Tensor {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

func elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// QuantizeInt8 returns the int8 codes and scales of t's values for enc (EncInt8Rows or
// EncInt8Cols): symmetric, scale = max|x|/127 per row or column, so the largest value
// of each is exact and every other is off by at most scale/2.
func QuantizeInt8(t *Tensor, enc byte) (codes []int8, scales []float32) {
	cols := t.Shape[len(t.Shape)-1]
	rows := len(t.Data) / cols
	group := func(r, c int) int { return r }
	n := rows
	if enc == EncInt8Cols {
		group = func(r, c int) int { return c }
		n = cols
	}
	maxAbs := make([]float32, n)
	for r := range rows {
		for c := range cols {
			g := group(r, c)
			maxAbs[g] = max(maxAbs[g], float32(math.Abs(float64(t.Data[r*cols+c]))))
		}
	}
	scales = make([]float32, n)
	for g, m := range maxAbs {
		scales[g] = m / 127
	}
	codes = make([]int8, len(t.Data))
	for r := range rows {
		for c := range cols {
			s := scales[group(r, c)]
			if s == 0 {
				continue
			}
			q := math.Round(float64(t.Data[r*cols+c] / s))
			codes[r*cols+c] = int8(max(-127, min(127, q)))
		}
	}
	return codes, scales
}

// Encode writes f in this format.
func Encode(w io.Writer, f *File) error {
	var p bytes.Buffer
	var tmp [binary.MaxVarintLen64]byte
	uv := func(x int) { p.Write(tmp[:binary.PutUvarint(tmp[:], uint64(x))]) }
	f32 := func(x float32) { _ = binary.Write(&p, binary.LittleEndian, x) } // bytes.Buffer writes cannot fail
	for _, pc := range f.Vocab {
		uv(len(pc.Text))
		p.WriteString(pc.Text)
		_ = binary.Write(&p, binary.LittleEndian, pc.Score)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if len(t.Shape) == 0 || len(t.Shape) > maxRank || elems(t.Shape) != len(t.Data) {
			return fmt.Errorf("use: encode: tensor %s: shape %v does not hold %d values", t.Name, t.Shape, len(t.Data))
		}
		uv(len(t.Name))
		p.WriteString(t.Name)
		uv(len(t.Shape))
		for _, d := range t.Shape {
			uv(d)
		}
		p.WriteByte(t.Enc)
		switch t.Enc {
		case EncFloat32:
			for _, x := range t.Data {
				f32(x)
			}
		case EncInt8Rows, EncInt8Cols:
			codes, scales := QuantizeInt8(t, t.Enc)
			for _, s := range scales {
				f32(s)
			}
			for _, c := range codes {
				p.WriteByte(byte(c))
			}
		default:
			return fmt.Errorf("use: encode: tensor %s: unknown encoding %d", t.Name, t.Enc)
		}
	}
	var h modelfile.Fields
	h.PutUint32(fieldPieces, uint32(len(f.Vocab)))
	h.PutUint32(fieldTensors, uint32(len(f.Tensors)))
	if err := modelfile.Write(w, Magic, Version, h, p.Bytes()); err != nil {
		return fmt.Errorf("use: encode: %w", err)
	}
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("use: decode: %w: %w", ErrCorrupt, fmt.Errorf(format, args...))
}

// Decode parses and verifies a file: magic, version, payload length and checksum, and
// every count and shape against the bounds above. Quantized tensors come back as
// float32 values (dequantized).
func Decode(data []byte) (*File, error) {
	h, payload, err := modelfile.Open(data, Magic, Version)
	if err != nil {
		return nil, corrupt("%w", err)
	}
	nPieces, nTensors := h.Uint32(fieldPieces), h.Uint32(fieldTensors)
	if nPieces > maxPieces || nTensors > maxTensors {
		return nil, corrupt("%d pieces, %d tensors", nPieces, nTensors)
	}
	r := &reader{b: payload}
	f := &File{Vocab: make([]Piece, nPieces), Tensors: make([]Tensor, nTensors)}
	for i := range f.Vocab {
		n := r.uvarint(1 << 10)
		f.Vocab[i] = Piece{Text: string(r.take(n)), Score: math.Float64frombits(binary.LittleEndian.Uint64(r.take(8)))}
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		t.Name = string(r.take(r.uvarint(1 << 10)))
		rank := r.uvarint(maxRank)
		if rank == 0 && r.err == nil {
			r.err = corrupt("tensor %s has rank 0", t.Name)
		}
		t.Shape = make([]int, rank)
		n := 1
		for d := range t.Shape {
			t.Shape[d] = r.uvarint(maxElems)
			n *= max(t.Shape[d], 1)
			if n > maxElems && r.err == nil {
				r.err = corrupt("tensor %s is too large", t.Name)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		t.Enc = r.take(1)[0]
		n = elems(t.Shape)
		t.Data = make([]float32, n)
		cols := 1
		if rank > 0 {
			cols = t.Shape[rank-1]
		}
		switch t.Enc {
		case EncFloat32:
			raw := r.take(4 * n)
			if r.err != nil {
				return nil, r.err
			}
			decodeFloat32(t.Data, raw)
		case EncInt8Rows, EncInt8Cols:
			ns := n / max(cols, 1)
			if t.Enc == EncInt8Cols {
				ns = cols
			}
			rawS := r.take(4 * ns)
			codes := r.take(n)
			if r.err != nil {
				return nil, r.err
			}
			scales := make([]float32, ns)
			decodeFloat32(scales, rawS)
			dequantize(t.Data, codes, scales, cols, t.Enc == EncInt8Cols)
		default:
			if r.err == nil {
				r.err = corrupt("tensor %s: unknown encoding %d", t.Name, t.Enc)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, corrupt("%d bytes left after the last tensor", len(r.b))
	}
	return f, nil
}

// reader consumes the payload; the first error sticks and later reads return zeros, so
// Decode checks once per section instead of after every field.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		if r.err == nil {
			r.err = corrupt("truncated payload (wanted %d more bytes, %d left)", n, len(r.b))
		}
		// Small zero fields keep the fixed-size reads below from panicking; Decode
		// checks r.err before it uses anything larger.
		return make([]byte, 8)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uvarint(limit int) int {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b)
	if n <= 0 || x > uint64(limit) {
		r.err = corrupt("bad length field")
		return 0
	}
	r.b = r.b[n:]
	return int(x)
}

// decodeFloat32 fills dst from little-endian float32 bytes (len(raw) ≥ 4·len(dst)).
//
// It and dequantize are exempt from the race detector (go:norace): they only write a
// slice their caller has just allocated, and instrumenting 7 million writes made every
// model load, and so every -race test that embeds, seconds slower.
//
//go:norace
func decodeFloat32(dst []float32, raw []byte) {
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
	}
}

// dequantize fills dst (rows × cols) with scale · code, one scale per row or, byCol,
// per column.
//
//go:norace
func dequantize(dst []float32, codes []byte, scales []float32, cols int, byCol bool) {
	for r := 0; r*cols < len(dst); r++ {
		row, code := dst[r*cols:(r+1)*cols], codes[r*cols:(r+1)*cols]
		if byCol {
			for c := range row {
				row[c] = scales[c] * float32(int8(code[c]))
			}
			continue
		}
		s := scales[r]
		for c := range row {
			row[c] = s * float32(int8(code[c]))
		}
	}
}
