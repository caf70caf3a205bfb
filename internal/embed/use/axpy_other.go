//go:build !amd64 || purego

package use

// vectorized reports whether axpy has a vector implementation here: not on this
// architecture or with the purego build tag.
func vectorized() bool { return false }

// axpy adds a·x to y (len(x) ≤ len(y)).
func axpy(a float32, x, y []float32) { axpyGeneric(a, x, y) }
