package secrets

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/relayroom/relayroom/internal/secrets/secretstest"
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

// expand fills a template's placeholders (see secretstest.Expand).
func expand(t testing.TB, tmpl string, rng *rand.Rand) string {
	return secretstest.Expand(t, tmpl, rng)
}

func loadSamples(t testing.TB) []secretstest.Sample { return secretstest.Samples(t) }

// loadProse is prose.txt's lines (the text the benchmarks scan).
func loadProse(t testing.TB) []string {
	var out []string
	for _, b := range secretstest.Prose(t) {
		out = append(out, b.Text)
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
		KindRelayroomRefreshToken, KindRelayroomConnectCode, KindRelayroomPersonalToken,
	}
	covered := map[string]bool{}
	for _, s := range samples {
		covered[s.Kind] = true
	}
	for _, k := range required {
		if !covered[k] {
			t.Errorf("corpus has no sample of kind %s", k)
		}
	}

	for _, s := range samples {
		t.Run(fmt.Sprintf("line%d_%s", s.Line, s.Kind), func(t *testing.T) {
			got := d.Scan(s.Text)
			want := []Finding{{Kind: s.Kind, Start: s.Start, End: s.End}}
			if len(got) != 1 || got[0] != want[0] {
				t.Errorf("Scan(%q)\n got %s\nwant %s", s.Text, describe(s.Text, got), describe(s.Text, want))
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
		text := before + s.Text + after
		got := d.Scan(text)
		want := Finding{Kind: s.Kind, Start: len(before) + s.Start, End: len(before) + s.End}
		if len(got) != 1 || got[0] != want {
			t.Errorf("positives.txt:%d inside prose: got %s, want %s", s.Line,
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
		parts = append(parts, s.Text)
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
				got := d.Scan(s.Text)
				if len(got) != 1 || got[0] != (Finding{s.Kind, s.Start, s.End}) {
					errs <- fmt.Sprintf("goroutine %d: positives.txt:%d: %v", g, s.Line, got)
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
		texts = append(texts, s.Text)
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

// TestLookAlikesHaveNoFindings: benign.txt (hashes, ids, public keys, base64 of text,
// code, wrapped lines, text that normalisation rewrites) yields nothing, line by line.
func TestLookAlikesHaveNoFindings(t *testing.T) {
	d := newTestDetector(t)
	for _, b := range secretstest.LookAlikes(t) {
		if got := d.Scan(b.Text); len(got) != 0 {
			t.Errorf("%s: %s\n  in %q", b, describe(b.Text, got), b.Text)
		}
	}
}

func TestMarkerPrefixMatchesTheTests(t *testing.T) {
	if secretstest.MarkerPrefix != MarkerPrefix {
		t.Fatalf("secretstest.MarkerPrefix is %q, the markers start with %q", secretstest.MarkerPrefix, MarkerPrefix)
	}
}

// TestMaskKindsNamesWhatItMasked: the kinds a call tells its writer are those whose
// markers the stored text holds, each once, in the text's order.
func TestMaskKindsNamesWhatItMasked(t *testing.T) {
	d := newTestDetector(t)
	gh := "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "K9mN2p"
	aws := "AKIAZ7QXW3RT5YUPLM2K"
	t.Run("two kinds, one twice", func(t *testing.T) {
		sent := "token " + gh + " then key " + aws + " and again " + gh
		out, kinds := d.MaskKinds(sent, 0)
		if want := []string{"github_token", "aws_access_key"}; !slices.Equal(kinds, want) {
			t.Fatalf("kinds %q, want %q (masked: %q)", kinds, want, out)
		}
		secretstest.CheckNamed(t, kinds, sent, out)
	})
	t.Run("nothing masked names nothing", func(t *testing.T) {
		text := "the deploy key rotates on Mondays"
		if out, kinds := d.MaskKinds(text, 0); out != text || kinds != nil {
			t.Fatalf("clean text came back %q with kinds %q", out, kinds)
		}
	})
	t.Run("texts masked into one list", func(t *testing.T) {
		var kinds []string
		d.MaskAdding("token "+gh, 0, &kinds)
		if out := d.MaskAdding("the deploy key rotates on Mondays", 0, &kinds); out != "the deploy key rotates on Mondays" {
			t.Fatalf("clean text came back %q", out)
		}
		d.MaskAdding("key "+aws+" and "+gh, 0, &kinds)
		if want := []string{"github_token", "aws_access_key"}; !slices.Equal(kinds, want) {
			t.Fatalf("kinds %q, want %q", kinds, want)
		}
	})
	t.Run("a JSON document's strings", func(t *testing.T) {
		out, kinds, err := d.MaskJSON([]byte(`{"step":"deploy","env":{"GITHUB":"` + gh + `"},"keys":["` + aws + `"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"aws_access_key", "github_token"}; !slices.Equal(kinds, want) {
			t.Fatalf("kinds %q, want %q (masked: %s)", kinds, want, out)
		}
		clean := []byte(`{"step":"deploy"}`)
		if same, none, err := d.MaskJSON(clean); err != nil || string(same) != string(clean) || none != nil {
			t.Fatalf("a clean document came back %s, %q, %v", same, none, err)
		}
	})
}
