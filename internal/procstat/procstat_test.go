package procstat

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a parenthesis, as postgres backends have.
	line := "4242 (postgres: relayroom_app db 127.0.0.1(5) idle) S 1 4242 4242 0 -1 4194560 800 0 0 0 150 37 0 0 20 0 1 0 100 0 0"
	got, err := parseStatCPU(line)
	if err != nil || got != 187*ClockTick {
		t.Fatalf("got %v %v, want %v", got, err, 187*ClockTick)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
	self, err := CPU(os.Getpid())
	if err != nil || self < 0 {
		t.Fatalf("own CPU: %v %v", self, err)
	}
}
