package embed

import (
	"sync"
	"time"
)

// lazyModel decodes an embedded model file on first use, once, and remembers how long
// that took. The builtin embedders embed one each, which gives them Load and LoadTime.
type lazyModel[M any] struct {
	once   sync.Once
	data   string
	decode func(string) (M, error)
	m      M
	err    error
	took   time.Duration
}

func newLazyModel[M any](data string, decode func(string) (M, error)) lazyModel[M] {
	return lazyModel[M]{data: data, decode: decode}
}

func (l *lazyModel[M]) get() (M, error) {
	l.once.Do(func() {
		start := time.Now()
		l.m, l.err = l.decode(l.data)
		l.took = time.Since(start)
		l.data = "" // the decoded model is all that is needed from now on
	})
	return l.m, l.err
}

// Load decodes and verifies the model if that has not happened yet. The file's checksum
// is verified, so a corrupted binary fails here with an error wrapping its format's
// ErrCorrupt (wordvec's or use's) rather than producing wrong vectors.
func (l *lazyModel[M]) Load() error {
	_, err := l.get()
	return err
}

// LoadTime is how long loading the model took (loading it first if needed), for the
// startup log.
func (l *lazyModel[M]) LoadTime() time.Duration {
	_ = l.Load() // the error is Load's and Embed's to report; here only the time matters
	return l.took
}
