package secrets

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// newTestDetector builds a detector for one test; it costs tens of milliseconds.
func newTestDetector(t testing.TB) *Detector {
	t.Helper()
	d, err := NewDetector()
	if err != nil {
		t.Fatalf("NewDetector: %v", err)
	}
	return d
}

// sample is one expanded line of testdata/positives.txt.
type sample struct {
	line       int
	kind       string
	text       string
	start, end int // expected range of the secret
}

const (
	alphaUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alphaLower = "abcdefghijklmnopqrstuvwxyz"
	digitChars = "0123456789"
	base62     = alphaUpper + alphaLower + digitChars
)

var placeholderRe = regexp.MustCompile(`\{\{(NL|jwt|[a-z0-9]+:\d+)\}\}`)

// expand fills a template's placeholders from a seeded generator, so samples are
// well-formed and reproducible without any credential-shaped string in the repository.
func expand(t testing.TB, tmpl string, rng *rand.Rand) string {
	t.Helper()
	pick := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	return placeholderRe.ReplaceAllStringFunc(tmpl, func(m string) string {
		inner := m[2 : len(m)-2]
		switch inner {
		case "NL":
			return "\n"
		case "jwt":
			enc := base64.RawURLEncoding
			header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
			payload := enc.EncodeToString([]byte(fmt.Sprintf(`{"sub":"%s","tenant":"%s","iat":1767225600}`, pick(base62, 12), pick(base62, 8))))
			sig := make([]byte, 32)
			for i := range sig {
				sig[i] = byte(rng.IntN(256))
			}
			return header + "." + payload + "." + enc.EncodeToString(sig)
		}
		name, num, _ := strings.Cut(inner, ":")
		n, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("bad placeholder %s", m)
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
		}
		t.Fatalf("unknown placeholder %s", m)
		return ""
	})
}

func loadSamples(t testing.TB) []sample {
	t.Helper()
	f, err := os.Open("testdata/positives.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sample
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, tmpl, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("positives.txt:%d: no tab", n)
		}
		text := expand(t, tmpl, rand.New(rand.NewPCG(uint64(n), 42)))
		start := strings.Index(text, "⟦")
		if start < 0 {
			t.Fatalf("positives.txt:%d: no ⟦ marker", n)
		}
		text = text[:start] + text[start+len("⟦"):]
		end := strings.Index(text, "⟧")
		if end < 0 {
			t.Fatalf("positives.txt:%d: no ⟧ marker", n)
		}
		text = text[:end] + text[end+len("⟧"):]
		out = append(out, sample{line: n, kind: kind, text: text, start: start, end: end})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func loadProse(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/prose.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func TestEveryKindDetected(t *testing.T) {
	d := newTestDetector(t)
	samples := loadSamples(t)
	required := []string{
		KindAWSAccessKey, KindAWSSecretKey, KindGitHubToken, KindSlackToken, KindSlackWebhook, KindJWT,
		KindPrivateKey, KindOpenAIKey, KindAnthropicKey, KindGoogleAPIKey, KindStripeKey,
		KindURLCredentials, KindEnvSecret, KindRelayroomAgentKey, KindRelayroomAccessToken,
		KindRelayroomRefreshToken, KindRelayroomConnectCode,
	}
	covered := map[string]bool{}
	for _, s := range samples {
		covered[s.kind] = true
	}
	for _, k := range required {
		if !covered[k] {
			t.Errorf("corpus has no sample of kind %s", k)
		}
	}

	for _, s := range samples {
		t.Run(fmt.Sprintf("line%d_%s", s.line, s.kind), func(t *testing.T) {
			got := d.Scan(s.text)
			want := []Finding{{Kind: s.kind, Start: s.start, End: s.end}}
			if len(got) != 1 || got[0] != want[0] {
				t.Errorf("Scan(%q)\n got %s\nwant %s", s.text, describe(s.text, got), describe(s.text, want))
			}
		})
	}
}

func describe(text string, fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "[%s %d:%d %q] ", f.Kind, f.Start, f.End, text[f.Start:f.End])
	}
	if len(fs) == 0 {
		return "(none)"
	}
	return b.String()
}

func TestProseHasNoFindings(t *testing.T) {
	d := newTestDetector(t)
	lines := loadProse(t)
	if len(lines) < 30 {
		t.Fatalf("prose corpus has %d lines, want at least 30", len(lines))
	}
	for i, l := range lines {
		if got := d.Scan(l); len(got) != 0 {
			t.Errorf("prose line %d: %s\n  in %q", i+1, describe(l, got), l)
		}
	}
	// As one document too: rules that look across lines (private keys, curl commands)
	// must not find anything in the joined text either.
	all := strings.Join(lines, "\n")
	if got := d.Scan(all); len(got) != 0 {
		t.Errorf("joined prose: %s", describe(all, got))
	}
}

// TestSecretsInsideProse embeds every sample in the middle of the prose corpus: the
// finding must keep its kind and its exact offsets, and nothing else may be flagged.
func TestSecretsInsideProse(t *testing.T) {
	d := newTestDetector(t)
	prose := loadProse(t)
	for i, s := range loadSamples(t) {
		before := strings.Join(prose[:i%len(prose)], "\n") + "\n"
		after := "\n" + strings.Join(prose[i%len(prose):], "\n")
		text := before + s.text + after
		got := d.Scan(text)
		want := Finding{Kind: s.kind, Start: len(before) + s.start, End: len(before) + s.end}
		if len(got) != 1 || got[0] != want {
			t.Errorf("positives.txt:%d inside prose: got %s, want %s", s.line,
				describe(text, got), describe(text, []Finding{want}))
		}
	}
}

func TestPlaceholdersAndNearMisses(t *testing.T) {
	d := newTestDetector(t)
	for _, text := range []string{
		"TOKEN=",
		"TOKEN=''",
		`API_TOKEN=""`,
		"TOKEN=<your-token>",
		"GITHUB_TOKEN=xxx",
		"SECRET=xxxxxxxxxxxx",
		"PASSWORD=changeme",
		"PASSWORD=change_me",
		"API_KEY=${API_KEY}",
		"API_KEY=$API_KEY",
		"SECRET_KEY={{ .Values.secretKey }}",
		"AUTH_TOKEN=your_token_here",
		"DB_PASSWORD=********",
		"SECRET=...",
		"TOKEN=…",
		"PASSWORD=password",
		"ACCESS_TOKEN=[REDACTED:jwt]",
		"API_KEY=%API_KEY%",
		"PUBLIC_KEY=MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
		"PAGE_TOKEN=CAEQAA8x9sd",
		"SECRET_LENGTH=64",
		"TOKEN_URL=https://auth.example.com/oauth/token",
		"PASSWORD_FILE=/run/secrets/db_password",
		"apiKey = config.apiKey",
		"token = getToken(ctx)",
		"sk-qyt-xxxxxxxxxxxxxxxxxxxx",
		"qyt_at_YOUR_ACCESS_TOKEN_HERE",
		"sk-qyt-0000000000000000",
		"key sk-qyt-Ab3dE9xK… (masked by auth.Mask: prefix and public id only)",
		"sk-proj-...",
		"AKIAIOSFODNN7EXAMPLE",
		"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"https://user:password@example.com/",
		"https://user:${PASS}@example.com/",
		"redis://:@cache:6379",
		"-----BEGIN RSA PRIVATE KEY-----",
		"-----BEGIN OPENSSH PRIVATE KEY----- blocks must never be pasted into a room",
		"see https://github.com/modelcontextprotocol/go-sdk/blob/main/mcp/streamable_client.go",
		"550e8400-e29b-41d4-a716-446655440000",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	} {
		if got := d.Scan(text); len(got) != 0 {
			t.Errorf("Scan(%q) = %s, want none", text, describe(text, got))
		}
	}
}

func TestScanDeterministicAndOrdered(t *testing.T) {
	d := newTestDetector(t)
	var parts []string
	for _, s := range loadSamples(t) {
		parts = append(parts, s.text)
	}
	text := strings.Join(parts, "\n\n")
	first := d.Scan(text)
	if len(first) < len(parts) {
		t.Fatalf("found %d secrets in %d samples", len(first), len(parts))
	}
	for i := 1; i < len(first); i++ {
		if first[i].Start < first[i-1].End {
			t.Fatalf("findings overlap or are out of order: %v then %v", first[i-1], first[i])
		}
	}
	for range 20 {
		again := d.Scan(text)
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("Scan is not deterministic:\n%v\n%v", first, again)
		}
	}
}

func TestOverlapTakesSpecificKindAndUnion(t *testing.T) {
	d := newTestDetector(t)
	rng := rand.New(rand.NewPCG(7, 7))
	key := expand(t, "ghp_{{b62:36}}", rng)
	text := "export GITHUB_TOKEN=" + key
	got := d.Scan(text)
	want := []Finding{{Kind: KindGitHubToken, Start: len("export GITHUB_TOKEN="), End: len(text)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}

	// merge itself: union of ranges, highest priority kind.
	m := merge([]candidate{
		{Finding{KindEnvSecret, 10, 30}, priorityOf(KindEnvSecret)},
		{Finding{KindJWT, 12, 40}, priorityOf(KindJWT)},
		{Finding{KindEnvSecret, 50, 60}, priorityOf(KindEnvSecret)},
	})
	wantM := []Finding{{KindJWT, 10, 40}, {KindEnvSecret, 50, 60}}
	if fmt.Sprint(m) != fmt.Sprint(wantM) {
		t.Errorf("merge = %v, want %v", m, wantM)
	}
}

func TestScanConcurrent(t *testing.T) {
	d := newTestDetector(t)
	samples := loadSamples(t)
	prose := loadProse(t)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				s := samples[(g*7+i)%len(samples)]
				got := d.Scan(s.text)
				if len(got) != 1 || got[0] != (Finding{s.kind, s.start, s.end}) {
					errs <- fmt.Sprintf("goroutine %d: positives.txt:%d: %v", g, s.line, got)
					return
				}
				if p := prose[(g+i)%len(prose)]; len(d.Scan(p)) != 0 {
					errs <- fmt.Sprintf("goroutine %d: prose finding in %q", g, p)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestScanEmptyAndBinaryish(t *testing.T) {
	d := newTestDetector(t)
	if got := d.Scan(""); got != nil {
		t.Errorf("Scan(\"\") = %v", got)
	}
	if got := d.Scan("\x00\xff\xfe TOKEN=\xff\xfe\xfd"); len(got) != 0 {
		t.Errorf("invalid UTF-8 noise flagged: %v", got)
	}
}

// TestAssignmentRulesMatchTheirPattern checks that evaluating env_secret and
// config_secret at each '='/':' (the fast path) finds every match their full regex finds
// line by line. The fast path may find more: FindAll resumes after each match, so an
// assignment inside another one's value ("?a=x&key=…" as the value of a) is never tried
// by the regex; those extra matches must overlap an earlier regex match.
func TestAssignmentRulesMatchTheirPattern(t *testing.T) {
	own, err := compileOwnRules()
	if err != nil {
		t.Fatal(err)
	}
	texts := loadProse(t)
	for _, s := range loadSamples(t) {
		texts = append(texts, s.text)
	}
	texts = append(texts,
		`export A_KEY=x B_TOKEN="y z" 'C_SECRET'=no "d_password": "v", {e_key:'w'} f.key = g`,
		`x"api_key": "abc" ,"token":'t' [secret: s] (pass:p) ?k=v&token=w#frag`,
		`KEY=a=b==c TOKEN  =  spaced   SECRET:=odd`,
		"A_KEY=\tv\r\nB_KEY=w\n\n=lonely\nname_only=\n:colon\n",
	)
	type span struct{ match, secret [2]int }
	checked := 0
	for _, r := range own {
		if r.delim == 0 {
			continue
		}
		checked++
		for _, text := range texts {
			var want []span
			for _, ln := range lineSpans(text) {
				for _, sm := range r.re.FindAllStringSubmatchIndex(text[ln[0]:ln[1]], -1) {
					want = append(want, span{[2]int{ln[0] + sm[0], ln[0] + sm[1]}, [2]int{ln[0] + sm[2*r.group], ln[0] + sm[2*r.group+1]}})
				}
			}
			var got []span
			fast := r
			fast.accept = func(_ string, sm []int, start, end int) (int, int, bool) {
				got = append(got, span{[2]int{sm[0], sm[1]}, [2]int{start, end}})
				return start, end, true
			}
			fast.matchAtDelims(text, nil)
			found := map[[2]int]bool{}
			for _, g := range got {
				found[g.secret] = true
			}
			for _, w := range want {
				// The regex's match may begin earlier (at a line start it has no separator
				// to consume), so compare what matters: the secret's range.
				if !found[w.secret] {
					t.Errorf("%s on %q: fast path misses %q", r.kind, text, text[w.secret[0]:w.secret[1]])
				}
			}
			wanted := map[[2]int]bool{}
			for _, w := range want {
				wanted[w.secret] = true
			}
			for _, g := range got {
				if wanted[g.secret] {
					continue
				}
				inside := false
				for _, w := range want {
					if w.match[0] < g.match[1] && g.match[0] < w.match[1] {
						inside = true
					}
				}
				if !inside {
					t.Errorf("%s on %q: fast path finds %q, which the regex cannot", r.kind, text, text[g.secret[0]:g.secret[1]])
				}
			}
		}
	}
	if checked != 2 {
		t.Fatalf("checked %d assignment rules, want 2", checked)
	}
}
