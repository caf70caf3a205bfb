//go:build !purego

package use

import "golang.org/x/sys/cpu"

// axpyAVX2 adds a·x to y with 8-wide fused multiply-adds, 32 values per step; len(x)
// must be a multiple of 32 and len(y) at least len(x). Go assembly (axpy_amd64.s): no
// cgo. The purego build tag or a CPU without AVX2 and FMA uses axpyGeneric instead.
//
//go:noescape
func axpyAVX2(a float32, x, y []float32)

// vectorized reports whether axpy uses axpyAVX2 on this CPU.
func vectorized() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// axpy adds a·x to y (len(x) ≤ len(y)).
func axpy(a float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	if len(x) >= 32 && vectorized() {
		i = len(x) &^ 31
		axpyAVX2(a, x[:i], y[:i])
	}
	axpyGeneric(a, x[i:], y[i:])
}
