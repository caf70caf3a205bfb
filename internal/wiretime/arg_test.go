package wiretime

import (
	"encoding/json"
	"testing"
	"time"
)

func TestArg(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 9, 12, 10, 0, 0, 0, time.UTC)
	for _, in := range []string{`"2026-09-12T10:00:00Z"`, `"2026-09-12t10:00:00z"`, `"2026-09-12t12:00:00+02:00"`} {
		t.Run("reads "+in, func(t *testing.T) {
			var d Arg
			if err := json.Unmarshal([]byte(in), &d); err != nil {
				t.Fatal(err)
			}
			if !d.Time().Equal(want) {
				t.Fatalf("got %v, want %v", d.Time(), want)
			}
		})
	}
	for _, in := range []string{`"2026-09-12 10:00"`, `"2026-09-12"`, `12`, `""`} {
		t.Run("refuses "+in, func(t *testing.T) {
			var d Arg
			if err := json.Unmarshal([]byte(in), &d); err == nil {
				t.Fatalf("%s read as %v", in, d.Time())
			}
		})
	}
	t.Run("an absent optional time stays nil", func(t *testing.T) {
		var in struct {
			At *Arg `json:"at,omitempty"`
		}
		if err := json.Unmarshal([]byte(`{}`), &in); err != nil || in.At.TimePtr() != nil {
			t.Fatalf("got %v, %v", in.At, err)
		}
	})
}
