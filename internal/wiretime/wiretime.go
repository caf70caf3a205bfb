// Package wiretime holds the one timestamp format of the threads toolset's results:
// RFC 3339 in UTC with millisecond precision ("2026-06-11T08:00:00.000Z"), as the threads
// contract's examples show. Every time a threads or knowledge result carries is of this
// type, so none comes out in another precision or offset. Arg is the other direction: a
// timestamp argument, read as RFC 3339 allows it to be written.
package wiretime

import "time"

// Layout is the format, fixed at three fractional digits and Z.
const Layout = "2006-01-02T15:04:05.000Z"

// Time is a timestamp that marshals as Layout.
type Time time.Time

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(Layout) + `"`), nil
}

// String is the timestamp as it is written on the wire.
func (t Time) String() string { return time.Time(t).UTC().Format(Layout) }

// Ptr converts an optional time; nil stays nil.
func Ptr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	w := Time(*t)
	return &w
}
