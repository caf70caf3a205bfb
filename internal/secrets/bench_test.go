package secrets

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
)

// prose2KB is 2 KiB of the no-findings corpus: ordinary notes that mention keys, tokens,
// JWTs and AWS, so keyword prefilters fire and the regexes behind them really run.
func prose2KB(b *testing.B) string {
	b.Helper()
	text := strings.Join(loadProse(b), "\n")
	if len(text) < 2048 {
		b.Fatalf("prose corpus has only %d bytes", len(text))
	}
	return text[:2048]
}

// benchScan checks that text has the expected number of findings, then measures Scan.
func benchScan(b *testing.B, d *Detector, text string, findings int) {
	b.Helper()
	if got := d.Scan(text); len(got) != findings {
		b.Fatalf("benchmark text: want %d findings, got %v", findings, got)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		d.Scan(text)
	}
}

func BenchmarkScan2KB(b *testing.B) {
	d := newTestDetector(b)
	text := prose2KB(b)
	benchScan(b, d, text, 0)
}

// BenchmarkScan2KBPlain scans 2 KiB of ordinary design notes that never mention
// credentials: most rules are skipped by their keyword prefilters.
func BenchmarkScan2KBPlain(b *testing.B) {
	d := newTestDetector(b)
	raw, err := os.ReadFile("testdata/plain.txt")
	if err != nil {
		b.Fatal(err)
	}
	text := string(raw[:2048])
	benchScan(b, d, text, 0)
}

// BenchmarkScan2KBWithSecrets is the same text with two secrets in it, the path a refused
// write takes (gitleaks builds findings and we map them back to offsets).
func BenchmarkScan2KBWithSecrets(b *testing.B) {
	d := newTestDetector(b)
	rng := rand.New(rand.NewPCG(9, 9))
	text := prose2KB(b)
	text = text[:700] + "\nGITHUB_TOKEN=" + expand(b, "ghp_{{b62:36}}", rng) + "\n" + text[700:1400] +
		"\nAuthorization: Bearer " + expand(b, "{{jwt}}", rng) + "\n" + text[1400:]
	text = text[:2048]
	benchScan(b, d, text, 2)
}

func BenchmarkRedact2KB(b *testing.B) {
	d := newTestDetector(b)
	text := prose2KB(b)
	rules := []Rule{{Name: "ticket", Pattern: `RR-\d+`}, {Name: "email", Pattern: `[\w.]+@example\.com`}}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := d.Redact(text, rules); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGitleaksStock2KB runs gitleaks' full default rule set (generic-api-key and
// private-key included) over the same text as BenchmarkScan2KB, for comparison.
func BenchmarkGitleaksStock2KB(b *testing.B) {
	cfg, err := loadGitleaksConfig()
	if err != nil {
		b.Fatal(err)
	}
	g := detect.NewDetector(cfg)
	text := prose2KB(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		g.DetectString(text)
	}
}

func BenchmarkNewDetector(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewDetector(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScan2KBNormalised is BenchmarkScan2KB's text with a non-breaking space for
// every tenth space and a zero-width space every 50 bytes: the normalised view is built
// (NFKC, offset map) and scanned instead of the text itself.
func BenchmarkScan2KBNormalised(b *testing.B) {
	d := newTestDetector(b)
	var sb strings.Builder
	spaces := 0
	for i, c := range []byte(prose2KB(b)) {
		switch {
		case c == ' ':
			if spaces++; spaces%10 == 0 {
				sb.WriteString("\u00a0")
				continue
			}
		case i%50 == 49 && c >= 'a' && c <= 'z':
			sb.WriteString("\u200b")
		}
		sb.WriteByte(c)
	}
	text := sb.String()
	benchScan(b, d, text, 0)
}

// BenchmarkScan2KBJoined is the worst case for the joined view: 2 KiB of random
// identifiers wrapped at 64 columns, so every line break is joined and the text is
// scanned twice.
func BenchmarkScan2KBJoined(b *testing.B) {
	d := newTestDetector(b)
	rng := rand.New(rand.NewPCG(3, 3))
	var lines []string
	for n := 0; n < 2048; n += 65 {
		lines = append(lines, expand(b, "{{hex:64}}", rng))
	}
	text := strings.Join(lines, "\n")[:2048]
	if v := normalise(text); join(v, text, d.prefixes) == nil {
		b.Fatal("nothing is joined")
	}
	benchScan(b, d, text, 0)
}
