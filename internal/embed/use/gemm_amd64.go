//go:build !purego

package use

import (
	"math"

	"golang.org/x/sys/cpu"
)

// panelWidth is how many columns a packed weight matrix keeps together for matMulAdd's
// kernels: 32 with AVX-512 (two 16-wide registers a row), 16 with AVX2 and FMA, 0 (not
// packed: matMul's portable loop) without them.
func panelWidth() int {
	switch {
	case !vectorized():
		return 0
	case cpu.X86.HasAVX512F:
		return 32
	default:
		return 16
	}
}

// kern4x16 adds a (4 rows of k, row stride lda) times b (k rows of 16, row stride ldb)
// to c (4 rows of 16, row stride ldc), holding the 4 × 16 sums in registers
// (gemm_amd64.s).
//
//go:noescape
func kern4x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

// kern4x16idx is kern4x16 over the steps idx lists (cnt of them), b one packed panel
// (gemm_amd64.s).
//
//go:noescape
func kern4x16idx(idx *int32, cnt int, a *float32, lda int, b *float32, c *float32, ldc int)

// dotAVX2 returns Σ x[i]·y[i]; len(x) must be a multiple of 16 and len(y) at least
// len(x) (gemm_amd64.s).
//
//go:noescape
func dotAVX2(x, y []float32) float32

// dot returns Σ x[i]·y[i] (len(x) ≤ len(y)).
func dot(x, y []float32) float32 {
	i := 0
	var d float32
	if len(x) >= 16 && vectorized() {
		i = len(x) &^ 15
		d = dotAVX2(x[:i], y[:i])
	}
	return d + dotGeneric(x[i:], y[i:])
}

// kern4x32z, kern4x32zidx and kern1x32 are kern4x16, kern4x16idx and kern1x16 for
// panels of 32: the first two with AVX-512 registers (gemm_amd64.s).
//
//go:noescape
func kern4x32z(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)

//go:noescape
func kern4x32zidx(idx *int32, cnt int, a *float32, lda int, b *float32, c *float32, ldc int)

//go:noescape
func kern1x32(k int, a *float32, b *float32, c *float32)

// kern1x16 adds a (one row of k) times b (one packed panel: k rows of 16) to c (16
// values), skipping zeros of a (gemm_amd64.s).
//
//go:noescape
func kern1x16(k int, a *float32, b *float32, c *float32)

// matMulAdd adds x (n × w.in) · w to y (n × w.out) with the register-blocked kernels,
// and reports false (nothing done) where w is not packed (no AVX2 and FMA). Each panel
// of w (w.in × w.panel values, read in order) stays in cache while every block of four
// positions uses it; the positions past the last block of four go through the one-row
// kernel. For a mostly zero input (w.sparseInput) each block of four runs only the steps
// where one of its rows is not zero (about one in five after relu).
func matMulAdd(x []float32, w matrix, y []float32, n int, sl *stepLists) bool {
	if w.panel == 0 || n == 0 {
		return false
	}
	in, out, pw := w.in, w.out, w.panel
	_, _, _ = x[n*in-1], w.data[in*out-1], y[n*out-1] // the kernels read and write within these
	kern, kernIdx, kern1 := kern4x16, kern4x16idx, kern1x16
	if pw == 32 {
		kern, kernIdx, kern1 = kern4x32z, kern4x32zidx, kern1x32
	}
	n4 := n &^ 3
	sparse := w.sparseInput && n4 > 0
	if sparse {
		sl.fill(x, in, n4)
	}
	for j := 0; j < out; j += pw {
		p := w.data[j*in:]
		for t := 0; t < n4; t += 4 {
			if sparse {
				if s := sl.block(t / 4); len(s) > 0 {
					kernIdx(&s[0], len(s), &x[t*in], in, &p[0], &y[t*out+j], out)
				}
				continue
			}
			kern(in, &x[t*in], in, &p[0], pw, &y[t*out+j], out)
		}
		for t := n4; t < n; t++ {
			kern1(in, &x[t*in], &p[0], &y[t*out+j])
		}
	}
	return true
}

// fill lists, for each block of four rows of x (n4 rows of in), the columns where one of
// the four is not zero (+0 and -0 are zero; NaN is not), reusing sl's memory.
func (sl *stepLists) fill(x []float32, in, n4 int) {
	sl.idx, sl.ends = sl.idx[:0], sl.ends[:0]
	for t := 0; t < n4; t += 4 {
		r0, r1, r2, r3 := x[t*in:(t+1)*in], x[(t+1)*in:(t+2)*in], x[(t+2)*in:(t+3)*in], x[(t+3)*in:(t+4)*in]
		for p := range in {
			if (math.Float32bits(r0[p])|math.Float32bits(r1[p])|math.Float32bits(r2[p])|math.Float32bits(r3[p]))&^(1<<31) != 0 {
				sl.idx = append(sl.idx, int32(p))
			}
		}
		sl.ends = append(sl.ends, len(sl.idx))
	}
}

// block is the step list of block b (rows 4b to 4b+3).
func (sl *stepLists) block(b int) []int32 {
	lo := 0
	if b > 0 {
		lo = sl.ends[b-1]
	}
	return sl.idx[lo:sl.ends[b]]
}
