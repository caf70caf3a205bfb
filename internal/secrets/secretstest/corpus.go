// Package secretstest loads the secret-detection corpus (internal/secrets/testdata) for
// the tests of every package that stores text: the detector's own tests and the tests
// that push each sample through a real tool and read back what was stored.
//
// The corpus holds no credential-shaped string: sample bodies are generated at test
// time from templates by a seeded generator, so they are reproducible and never trip a
// repository's push protection.
package secretstest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Sample is one secret: Text contains it, Text[Start:End] is exactly what must be
// redacted (what a scan reports), Kind what it is.
type Sample struct {
	File       string
	Line       int
	Kind       string
	Text       string
	Start, End int
}

// Secret returns the part of the text that must not survive.
func (s Sample) Secret() string { return s.Text[s.Start:s.End] }

func (s Sample) String() string { return fmt.Sprintf("%s:%d (%s)", s.File, s.Line, s.Kind) }

// Benign is one look-alike that must pass every channel unchanged.
type Benign struct {
	File string
	Line int
	Text string
}

func (b Benign) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Channel is one stored or broadcast text field and what it does with a secret.
type Channel struct {
	Name    string // tool.field, as in docs/secrets.md
	Outcome string // OutcomeRefuse or OutcomeRedact
}

// What a channel does with a text holding a secret.
const (
	OutcomeRefuse = "refuse" // the call fails with the tool's error, nothing is stored
	OutcomeRedact = "redact" // stored and shown with the secret replaced by a marker
)

// Dir is internal/secrets/testdata, wherever the calling test runs.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

func readLines(tb testing.TB, name string) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// Samples expands positives.txt: <kind> TAB <template>, the secret between ⟦ and ⟧.
func Samples(tb testing.TB) []Sample {
	tb.Helper()
	var out []Sample
	f, err := os.Open(filepath.Join(Dir(), "positives.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, tmpl, ok := strings.Cut(line, "\t")
		if !ok {
			tb.Fatalf("positives.txt:%d: no tab", n)
		}
		text := Expand(tb, tmpl, rand.New(rand.NewPCG(uint64(n), 42)))
		start := strings.Index(text, "⟦")
		if start < 0 {
			tb.Fatalf("positives.txt:%d: no ⟦ marker", n)
		}
		text = text[:start] + text[start+len("⟦"):]
		end := strings.Index(text, "⟧")
		if end < 0 {
			tb.Fatalf("positives.txt:%d: no ⟧ marker", n)
		}
		text = text[:end] + text[end+len("⟧"):]
		out = append(out, Sample{File: "positives.txt", Line: n, Kind: kind, Text: text, Start: start, End: end})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Prose returns prose.txt's lines: ordinary notes, literal text.
func Prose(tb testing.TB) []Benign {
	tb.Helper()
	return benignLines(tb, "prose.txt", false)
}

// LookAlikes expands benign.txt: templates of text shaped like secrets that are not.
func LookAlikes(tb testing.TB) []Benign {
	tb.Helper()
	return benignLines(tb, "benign.txt", true)
}

func benignLines(tb testing.TB, name string, templates bool) []Benign {
	tb.Helper()
	var out []Benign
	for i, l := range readLines(tb, name) {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if templates {
			l = Expand(tb, l, rand.New(rand.NewPCG(uint64(i+1), 7)))
		}
		out = append(out, Benign{File: name, Line: i + 1, Text: l})
	}
	return out
}

// AllBenign is prose.txt and benign.txt.
func AllBenign(tb testing.TB) []Benign { return append(Prose(tb), LookAlikes(tb)...) }

// Channels reads channels.txt: <tool.field> TAB <refuse|redact>.
func Channels(tb testing.TB) []Channel {
	tb.Helper()
	var out []Channel
	for i, l := range readLines(tb, "channels.txt") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, outcome, ok := strings.Cut(l, "\t")
		if !ok || (outcome != OutcomeRefuse && outcome != OutcomeRedact) {
			tb.Fatalf("channels.txt:%d: want <tool.field> TAB refuse|redact, got %q", i+1, l)
		}
		out = append(out, Channel{Name: name, Outcome: outcome})
	}
	return out
}

// ChannelsWithPrefix returns the channels of one toolset ("rooms.", "threads.").
func ChannelsWithPrefix(tb testing.TB, prefix string) []Channel {
	tb.Helper()
	var out []Channel
	for _, c := range Channels(tb) {
		if strings.HasPrefix(c.Name, prefix) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		tb.Fatalf("channels.txt lists no channel starting with %q", prefix)
	}
	return out
}

const (
	alphaUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alphaLower = "abcdefghijklmnopqrstuvwxyz"
	digitChars = "0123456789"
	base62     = alphaUpper + alphaLower + digitChars
)

var placeholderRe = regexp.MustCompile(`\{\{(NL|jwt|uuid|U\+[0-9A-F]{4,5}|fw:[^}]+|[a-z0-9]+:\d+)\}\}`)

// textForBase64 is ordinary prose, encoded by {{b64text:W}}: base64 of text is not a key.
const textForBase64 = "Release notes for the escalation service. Escalations now time out after " +
	"seventy-two hours and expire instead of being approved automatically. The reviewers agreed " +
	"that the dashboard should show the remaining time in hours and minutes, and that a person " +
	"can extend the deadline once. Nothing else changes for agents or for guests."

// Expand fills a template's placeholders from rng:
//
//	{{b62:N}} {{b64:N}} {{b64url:N}} {{hex:N}} {{upper:N}} {{a2z7:N}} {{digits:N}}
//	    N random characters of that alphabet
//	{{jwt}} a well-formed JWT          {{uuid}} a version 4 UUID
//	{{pem:N}} N random base64 lines of 64 joined by real newlines; {{pemesc:N}} by a literal \n
//	{{NL}} a newline                   {{U+200B}} that code point
//	{{fw:text}} text in fullwidth forms (ghp_ → ｇｈｐ＿)
//	{{p256:W}} a P-256 PKCS#8 private key, base64 wrapped at W columns (0: one line)
//	{{rsa:N}} the first N lines of a PKCS#1 RSA private key
//	{{encpkcs8:N}} the first N lines of an encrypted PKCS#8 key
//	{{openssh:N}} the first N lines (70 columns) of an OpenSSH private key
//	{{cert:N}} the first N lines of an X.509 certificate; {{spki:W}} a P-256 public key
//	{{b64text:W}} base64 of a paragraph of prose, wrapped at W columns (0: one line)
func Expand(tb testing.TB, tmpl string, rng *rand.Rand) string {
	tb.Helper()
	pick := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	return placeholderRe.ReplaceAllStringFunc(tmpl, func(m string) string {
		inner := m[2 : len(m)-2]
		switch {
		case inner == "NL":
			return "\n"
		case inner == "jwt":
			enc := base64.RawURLEncoding
			header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
			payload := enc.EncodeToString(fmt.Appendf(nil, `{"sub":"%s","tenant":"%s","iat":1767225600}`, pick(base62, 12), pick(base62, 8)))
			return header + "." + payload + "." + enc.EncodeToString(random(32))
		case inner == "uuid":
			h := "0123456789abcdef"
			return pick(h, 8) + "-" + pick(h, 4) + "-4" + pick(h, 3) + "-a" + pick(h, 3) + "-" + pick(h, 12)
		case strings.HasPrefix(inner, "U+"):
			cp, err := strconv.ParseUint(inner[2:], 16, 32)
			if err != nil {
				tb.Fatalf("bad placeholder %s", m)
			}
			return string(rune(cp))
		case strings.HasPrefix(inner, "fw:"):
			return fullwidth(inner[3:])
		}
		name, num, _ := strings.Cut(inner, ":")
		n, err := strconv.Atoi(num)
		if err != nil {
			tb.Fatalf("bad placeholder %s", m)
		}
		switch name {
		case "b62":
			return pick(base62, n)
		case "b64":
			return pick(base62+"+/", n)
		case "b64url":
			return pick(base62+"-_", n)
		case "hex":
			return pick("0123456789abcdef", n)
		case "upper":
			return pick(alphaUpper, n)
		case "a2z7":
			return pick(alphaUpper+"234567", n)
		case "digits":
			return pick(digitChars, n)
		case "pem", "pemesc":
			sep := "\n"
			if name == "pemesc" {
				sep = `\n`
			}
			lines := make([]string, n)
			for i := range lines {
				lines[i] = pick(base62+"+/", 64)
			}
			return strings.Join(lines, sep)
		case "p256":
			// PKCS#8 PrivateKeyInfo of an EC P-256 key: version 0, the ecPublicKey/prime256v1
			// AlgorithmIdentifier, then the SEC1 key (32-byte scalar, 65-byte point).
			der := hexBytes("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420")
			der = append(der, random(32)...)
			der = append(der, hexBytes("a144034200")...)
			der = append(append(der, 4), random(64)...)
			return wrap(base64.StdEncoding.EncodeToString(der), n)
		case "rsa":
			der := append(hexBytes("308204a40201000282010100"), random(n*48)...)
			return firstLines(base64.StdEncoding.EncodeToString(der), 64, n)
		case "encpkcs8":
			// EncryptedPrivateKeyInfo: an AlgorithmIdentifier (PBES2 OID, opaque params), then
			// the OCTET STRING of ciphertext.
			der := hexBytes("308202fe3018060a2a864886f70d010c0103300a0404") // 0x30 len, SEQ(24) OID pbe, params
			der = append(der, random(4)...)
			der = append(der, 0x02, 0x02, 0x08, 0x00)
			der = append(der, hexBytes("048202e0")...)
			der = append(der, random(n*48)...)
			return firstLines(base64.StdEncoding.EncodeToString(der), 64, n)
		case "openssh":
			raw := append([]byte("openssh-key-v1\x00"), random(n*53)...)
			return firstLines(base64.StdEncoding.EncodeToString(raw), 70, n)
		case "cert":
			// Certificate: SEQUENCE { tbsCertificate SEQUENCE { [0] version, serial, … } … }
			der := append(hexBytes("30820377308202 5fa003020102020900"), random(n*48)...)
			return firstLines(base64.StdEncoding.EncodeToString(der), 64, n)
		case "spki":
			der := hexBytes("3059301306072a8648ce3d020106082a8648ce3d03010703420004")
			der = append(der, random(64)...)
			return wrap(base64.StdEncoding.EncodeToString(der), n)
		case "b64text":
			return wrap(base64.StdEncoding.EncodeToString([]byte(textForBase64)), n)
		}
		tb.Fatalf("unknown placeholder %s", m)
		return ""
	})
}

func hexBytes(h string) []byte {
	h = strings.ReplaceAll(h, " ", "")
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			panic("secretstest: bad hex " + h)
		}
		b[i] = byte(v)
	}
	return b
}

// wrap cuts s into lines of w characters (w = 0: one line).
func wrap(s string, w int) string {
	if w <= 0 {
		return s
	}
	var lines []string
	for len(s) > w {
		lines, s = append(lines, s[:w]), s[w:]
	}
	return strings.Join(append(lines, s), "\n")
}

// firstLines is the first n full lines of s wrapped at w.
func firstLines(s string, w, n int) string {
	lines := strings.Split(wrap(s, w), "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// fullwidth maps printable ASCII to the fullwidth forms block (U+FF01–FF5E).
func fullwidth(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > ' ' && r < 0x7f {
			r += 0xFF01 - '!'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CheckBenign stores every benign text of at most maxRunes characters (0: no bound; a
// longer one cannot be held by the field) through a channel and reports each one that is
// refused or not stored exactly as want(text): zero false positives per channel.
func CheckBenign(t testing.TB, benign []Benign, maxRunes int, store func(text string) (stored string, refused bool, why string), want func(string) string) {
	t.Helper()
	falsePositives := 0
	for _, b := range benign {
		if maxRunes > 0 && utf8.RuneCountInString(b.Text) > maxRunes {
			continue
		}
		stored, refused, why := store(b.Text)
		if refused || stored != want(b.Text) {
			falsePositives++
			t.Errorf("%s: benign text changed: refused=%v %s\n stored %q\n   sent %q", b, refused, why, stored, b.Text)
		}
	}
	if falsePositives != 0 {
		t.Errorf("%d false positives on %d benign texts", falsePositives, len(benign))
	}
}

// Corpus is what a channel is checked with: every secret sample and every benign text.
type Corpus struct {
	Samples []Sample
	Benign  []Benign
}

// RunChannels checks every channel of one toolset (channels.txt's names starting with
// prefix) with its driver from drivers, each as its own subtest and one at a time: the
// corpus is hundreds of writes per channel, and the package's timing-sensitive tests
// (embedding deadlines) run beside it. A channel listed without a driver fails: every
// channel of channels.txt is driven.
func RunChannels[D any](t *testing.T, prefix string, drivers map[string]D, check func(t *testing.T, ch Channel, drive D, c Corpus)) {
	t.Helper()
	c := Corpus{Samples: Samples(t), Benign: AllBenign(t)}
	for _, ch := range ChannelsWithPrefix(t, prefix) {
		t.Run(ch.Name, func(t *testing.T) {
			drive, ok := drivers[ch.Name]
			if !ok {
				t.Fatalf("channels.txt lists %s but this test has no driver for it", ch.Name)
			}
			check(t, ch, drive, c)
		})
	}
}

// MarkerPrefix is secrets.MarkerPrefix, written again because the secrets package's own
// tests import this package; TestMarkerPrefixMatchesTheTests holds the two together.
const MarkerPrefix = "[REDACTED:"

// markerKind finds the markers redaction leaves ([REDACTED:<kind>]) and their kinds.
var markerKind = regexp.MustCompile(regexp.QuoteMeta(MarkerPrefix) + `([^\]]+)\]`)

// CheckNamed reports a call whose answer does not name (redacted) exactly the kinds of
// the markers it put in the text it stored (those of stored beyond any that sent already
// held, as a pasted redacted example does), each once: a writer is told what its readers
// get in place of what it wrote, and is told nothing when nothing was masked.
func CheckNamed(t testing.TB, redacted []string, sent, stored string) {
	t.Helper()
	already := map[string]int{}
	for _, m := range markerKind.FindAllStringSubmatch(sent, -1) {
		already[m[1]]++
	}
	var kinds []string
	for _, m := range markerKind.FindAllStringSubmatch(stored, -1) {
		if already[m[1]] > 0 {
			already[m[1]]--
			continue
		}
		if !slices.Contains(kinds, m[1]) {
			kinds = append(kinds, m[1])
		}
	}
	if len(kinds) != len(redacted) || !slices.Equal(slices.Sorted(slices.Values(kinds)), slices.Sorted(slices.Values(redacted))) {
		t.Errorf("the answer names redacted %q; the markers it added to the stored text are of %q: %q", redacted, kinds, stored)
	}
}
