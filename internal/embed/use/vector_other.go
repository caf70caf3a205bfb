//go:build !amd64 || purego

package use

// vectorized reports whether axpy has a vector implementation here: not on this
// architecture or with the purego build tag.
func vectorized() bool { return false }

// axpy adds a·x to y (len(x) ≤ len(y)).
func axpy(a float32, x, y []float32) { axpyGeneric(a, x, y) }

// panelWidth reports that weight matrices stay row by row here: there is no vector
// kernel to pack them for.
func panelWidth() int { return 0 }

// matMulAdd reports that there is no vector kernel here: matMul does the sums itself.
func matMulAdd(x []float32, w matrix, y []float32, n int, sl *stepLists) bool { return false }

// dot returns Σ x[i]·y[i] (len(x) ≤ len(y)).
func dot(x, y []float32) float32 { return dotGeneric(x, y) }
