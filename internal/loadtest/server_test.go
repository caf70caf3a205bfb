package loadtest

import (
	"os"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	t.Parallel()
	t.Run("reads VmRSS and VmHWM in bytes", func(t *testing.T) {
		t.Parallel()
		rss, peak, err := parseStatus(strings.NewReader("Name:\trelayroom\nVmPeak:\t 2000000 kB\nVmHWM:\t  1843200 kB\nVmRSS:\t   54272 kB\nThreads:\t12\n"))
		if err != nil {
			t.Fatal(err)
		}
		if rss != 54272<<10 || peak != 1843200<<10 {
			t.Fatalf("rss %d peak %d", rss, peak)
		}
	})
	t.Run("a status without them is an error, not zero", func(t *testing.T) {
		t.Parallel()
		if _, _, err := parseStatus(strings.NewReader("Name:\tzombie\nState:\tZ (zombie)\n")); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("this process's own status parses", func(t *testing.T) {
		t.Parallel()
		f, err := os.Open("/proc/self/status")
		if err != nil {
			t.Skip("no /proc here")
		}
		defer f.Close()
		rss, peak, err := parseStatus(f)
		if err != nil || rss <= 0 || peak < rss {
			t.Fatalf("rss %d peak %d err %v", rss, peak, err)
		}
	})
}
