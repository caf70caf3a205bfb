package jobs

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRepeatsAreQuiet: during a database outage the job library logged the same ERROR
// about every second from each of its parts; a message is now written once per
// repeatWindow, saying how many lines it stands for.
func TestRepeatsAreQuiet(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	log := slog.New(newQuietRepeats(slog.NewJSONHandler(&buf, nil), slog.LevelWarn, func() time.Time { return now })).With("component", "jobs")
	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if l != "" && json.Unmarshal([]byte(l), &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}
	t.Run("a message is written once per window", func(t *testing.T) {
		for range 30 {
			log.Error("producer: Error fetching jobs", "err", "connection refused")
			log.Error("leadership.Elector: Error attempting to elect", "err", "connection refused")
			now = now.Add(time.Second)
		}
		if got := lines(); len(got) != 2 {
			t.Fatalf("%d lines: %v", len(got), got)
		}
	})
	t.Run("after the window it is written again with the count it stood for", func(t *testing.T) {
		now = now.Add(repeatWindow)
		log.Error("producer: Error fetching jobs", "err", "connection refused")
		got := lines()
		last := got[len(got)-1]
		if len(got) != 3 || last["repeated"] != float64(29) || last["component"] != "jobs" {
			t.Fatalf("%v", got)
		}
	})
	t.Run("routine lines below the level stay out", func(t *testing.T) {
		before := len(lines())
		log.Info("River client started")
		if len(lines()) != before {
			t.Fatal("an INFO line of the job library was written")
		}
	})
}
