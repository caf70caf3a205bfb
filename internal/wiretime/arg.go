package wiretime

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Arg is a timestamp argument (a tool's or an API's "date-time"): RFC 3339 as the RFC
// writes it. The RFC allows a lower-case t and z (§5.6), which Go's time.Time refuses to
// decode, so an argument declared as time.Time turned a valid time into an error; one
// declared as Arg reads it. Its schema is a string (internal/mcp derives it so).
type Arg time.Time

// UnmarshalJSON reads an RFC 3339 string in either case. Its errors are the decoder's
// own kinds, so a caller that explains them in its API's words (the desk ingest API)
// reads them as it reads time.Time's: a JSON value that is not a string is an
// *json.UnmarshalTypeError (the decoder adds the field), a string that is not RFC 3339 a
// *time.ParseError holding the string as it was sent.
func (d *Arg) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return &json.UnmarshalTypeError{Value: typ.Value, Type: reflect.TypeFor[Arg](), Offset: typ.Offset}
		}
		return fmt.Errorf("date-time: %w", err)
	}
	t, err := Parse(s)
	if err != nil {
		return err
	}
	*d = Arg(t)
	return nil
}

// MarshalJSON writes the time in RFC 3339 with its own offset, as time.Time does.
func (d Arg) MarshalJSON() ([]byte, error) {
	return time.Time(d).MarshalJSON()
}

// Time is the argument as a time.Time.
func (d Arg) Time() time.Time { return time.Time(d) }

// TimePtr is an optional argument as an optional time; nil stays nil.
func (d *Arg) TimePtr() *time.Time {
	if d == nil {
		return nil
	}
	t := time.Time(*d)
	return &t
}

// Parse reads RFC 3339 as the RFC writes it: the separator and the zone letter in either
// case. Go's parser takes only the upper-case ones, hence the upper-casing (no other
// letter appears in a valid date-time, so nothing else changes).
func Parse(s string) (time.Time, error) {
	var t time.Time
	// time.Time's own decoding, upper-cased: what an argument declared as time.Time took.
	if err := t.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		var pe *time.ParseError
		if errors.As(err, &pe) {
			pe.Value = s // what was sent, not its upper-cased copy
		}
		return time.Time{}, err
	}
	return t, nil
}
