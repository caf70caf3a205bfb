package wiretime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/wiretime"
)

func TestTimeIsUTCWithMilliseconds(t *testing.T) {
	t.Parallel()
	paris := time.FixedZone("CEST", 2*3600)
	cases := map[string]time.Time{
		"2026-06-11T08:00:00.000Z": time.Date(2026, 6, 11, 10, 0, 0, 0, paris),
		"2026-06-11T08:00:00.123Z": time.Date(2026, 6, 11, 8, 0, 0, 123456789, time.UTC),
	}
	for want, in := range cases {
		b, err := json.Marshal(struct {
			At  wiretime.Time  `json:"at"`
			Opt *wiretime.Time `json:"opt"`
		}{At: wiretime.Time(in), Opt: wiretime.Ptr(&in)})
		if err != nil || string(b) != `{"at":"`+want+`","opt":"`+want+`"}` {
			t.Fatalf("%v: %s %v", in, b, err)
		}
	}
	if wiretime.Ptr(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}
