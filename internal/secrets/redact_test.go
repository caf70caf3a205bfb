package secrets

import (
	"errors"
	"math/rand/v2"
	"regexp/syntax"
	"strings"
	"testing"
)

func TestRedactAppliesRulesInOrderThenDetector(t *testing.T) {
	d := newTestDetector(t)
	key := expand(t, "ghp_{{b62:36}}", rand.New(rand.NewPCG(1, 2)))
	rules := []Rule{
		{Name: "ticket", Pattern: `RR-\d+`, Replacement: "RR-###"},
		{Name: "email", Pattern: `[\w.]+@example\.com`},
		// Runs after "ticket": sees its output, not the original.
		{Name: "hashes", Pattern: `###`, Replacement: "n"},
	}
	in := "Ticket RR-1042 from bob@example.com: deploy with GITHUB_TOKEN=" + key + " then restart."
	got, found, _, err := d.Redact(in, rules)
	if err != nil {
		t.Fatal(err)
	}
	want := "Ticket RR-n from [REDACTED:email]: deploy with GITHUB_TOKEN=[REDACTED:github_token] then restart."
	if got != want {
		t.Errorf("Redact:\n got %q\nwant %q", got, want)
	}
	if len(found) != 1 || found[0].Kind != KindGitHubToken || got[found[0].Start:found[0].End] != "[REDACTED:github_token]" {
		t.Errorf("findings %v do not locate the marker in %q", found, got)
	}
}

func TestRedactRuleCanHideSecretFirst(t *testing.T) {
	d := newTestDetector(t)
	key := expand(t, "sk-qyt-{{b62:32}}", rand.New(rand.NewPCG(3, 4)))
	got, found, matched, err := d.Redact("key: "+key, []Rule{{Name: "agent", Pattern: `sk-qyt-\w+`, Replacement: "<agent key>"},
		{Name: "unused", Pattern: `zzz`}})
	if err != nil {
		t.Fatal(err)
	}
	// The rule's own replacement leaves no marker: only matched names it.
	if got != "key: <agent key>" || len(found) != 0 || len(matched) != 1 || matched[0].Name != "agent" {
		t.Errorf("got %q %v, matched %v", got, found, matched)
	}
}

func TestRedactReplacementIsLiteral(t *testing.T) {
	d := newTestDetector(t)
	got, _, _, err := d.Redact("order 12345 shipped", []Rule{{Name: "num", Pattern: `(\d+)`, Replacement: "$1-${1}"}})
	if err != nil {
		t.Fatal(err)
	}
	if got != "order $1-${1} shipped" {
		t.Errorf("got %q: the replacement must not expand groups", got)
	}
}

func TestRedactDefaultReplacement(t *testing.T) {
	d := newTestDetector(t)
	got, found, _, err := d.Redact("call 555-0100 or 555-0199", []Rule{{Name: "phone", Pattern: `\d{3}-\d{4}`}})
	if err != nil {
		t.Fatal(err)
	}
	if got != "call [REDACTED:phone] or [REDACTED:phone]" {
		t.Errorf("got %q", got)
	}
	if found != nil {
		t.Errorf("rule matches are not detector findings: %v", found)
	}
}

func TestRedactInvalidRule(t *testing.T) {
	d := newTestDetector(t)
	for _, tc := range []struct {
		rule   Rule
		syntax bool // cause is an RE2 syntax error
	}{
		{Rule{Name: "broken", Pattern: `(unclosed`}, true},
		{Rule{Name: "perl", Pattern: `(?<=x)y`}, true}, // lookbehind is not RE2
		{Rule{Name: "everything", Pattern: `a*`}, false},
		{Rule{Name: "empty", Pattern: ``}, false},
		{Rule{Name: "  ", Pattern: `x`}, false},
		{Rule{Name: "a]b", Pattern: `x`}, false},
	} {
		ok := Rule{Name: "fine", Pattern: `fine`}
		got, found, _, err := d.Redact("fine text", []Rule{ok, tc.rule})
		if !errors.Is(err, ErrRuleInvalid) {
			t.Errorf("%+v: err = %v, want ErrRuleInvalid", tc.rule, err)
			continue
		}
		var re *RuleError
		if !errors.As(err, &re) || re.Name != tc.rule.Name {
			t.Errorf("%+v: err %v does not carry the rule name", tc.rule, err)
		}
		var se *syntax.Error
		if errors.As(err, &se) != tc.syntax {
			t.Errorf("%+v: syntax.Error in chain = %v, want %v", tc.rule, !tc.syntax, tc.syntax)
		}
		if got != "" || found != nil {
			t.Errorf("%+v: a failed redaction returned text %q %v", tc.rule, got, found)
		}
	}
}

func TestValidateRules(t *testing.T) {
	if err := ValidateRules(nil); err != nil {
		t.Errorf("no rules: %v", err)
	}
	if err := ValidateRules([]Rule{{Name: "a", Pattern: `\bfoo\b`}, {Name: "b", Pattern: `x+`, Replacement: "y"}}); err != nil {
		t.Errorf("valid rules: %v", err)
	}
	err := ValidateRules([]Rule{{Name: "a", Pattern: `ok`}, {Name: "bad1", Pattern: `[`}, {Name: "bad2", Pattern: `.*`}})
	if !errors.Is(err, ErrRuleInvalid) {
		t.Fatalf("err = %v, want ErrRuleInvalid", err)
	}
	for _, name := range []string{`"bad1"`, `"bad2"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name rule %s", err, name)
		}
	}
	if strings.Contains(err.Error(), `"a"`) {
		t.Errorf("error %q blames the valid rule", err)
	}
}

func TestRedactLeavesCleanTextAlone(t *testing.T) {
	d := newTestDetector(t)
	for _, line := range loadProse(t) {
		got, found, _, err := d.Redact(line, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != line || found != nil {
			t.Errorf("Redact changed clean text:\n in %q\nout %q", line, got)
		}
	}
}

func TestRedactEverySample(t *testing.T) {
	d := newTestDetector(t)
	for _, s := range loadSamples(t) {
		secret := s.Text[s.Start:s.End]
		got, found, _, err := d.Redact(s.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := s.Text[:s.Start] + Marker(s.Kind) + s.Text[s.End:]
		if got != want {
			t.Errorf("positives.txt:%d:\n got %q\nwant %q", s.Line, got, want)
		}
		if strings.Contains(got, secret) {
			t.Errorf("positives.txt:%d: secret survives redaction", s.Line)
		}
		if len(found) != 1 || got[found[0].Start:found[0].End] != Marker(s.Kind) {
			t.Errorf("positives.txt:%d: findings %v do not point at the marker", s.Line, found)
		}
		// Markers must not look like secrets themselves: redacting twice changes nothing.
		again, more, _, err := d.Redact(got, nil)
		if err != nil || again != got {
			t.Errorf("positives.txt:%d: second redaction changed %q into %q", s.Line, got, again)
		}
		if len(more) != 0 {
			t.Errorf("positives.txt:%d: marker detected as a secret: %v", s.Line, more)
		}
	}
}

func TestRedactBodyThatIsOnlyASecret(t *testing.T) {
	d := newTestDetector(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ body, marker string }{
		{expand(t, "sk-qyt-{{b62:32}}", rng), "[REDACTED:relayroom_agent_key]"},
		{"  " + expand(t, "{{jwt}}", rng) + "\n", "  [REDACTED:jwt]\n"},
		{expand(t, "ghp_{{b62:36}}", rng) + ".", "[REDACTED:github_token]."},
	} {
		got, _, _, err := d.Redact(tc.body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.marker {
			t.Errorf("Redact(%q) = %q, want %q", tc.body, got, tc.marker)
		}
		if !IsEmptyAfterRedaction(got) {
			t.Errorf("IsEmptyAfterRedaction(%q) = false", got)
		}
	}
	// A secret in a sentence leaves the sentence.
	got, _, _, _ := d.Redact("Use "+expand(t, "ghp_{{b62:36}}", rng)+" for CI", nil)
	if IsEmptyAfterRedaction(got) {
		t.Errorf("IsEmptyAfterRedaction(%q) = true", got)
	}
}

func TestIsEmptyAfterRedaction(t *testing.T) {
	for s, want := range map[string]bool{
		"":               true,
		"   \n\t":        true,
		"[REDACTED:jwt]": true,
		" [REDACTED:jwt], [REDACTED:env_secret]; — …": true,
		"`[REDACTED:aws_access_key]`":                 true,
		"[REDACTED:my rule]":                          true,
		"***":                                         true, // a project rule's own replacement
		"Key: [REDACTED:openai_api_key]":              false,
		"[REDACTED:jwt] 42":                           false,
		"[REDACTED:jwt]é":                             false,
		"[REDACTED:unterminated":                      false,
		"[REDACTED:a\nb]":                             false,
		"ok":                                          false,
	} {
		if got := IsEmptyAfterRedaction(s); got != want {
			t.Errorf("IsEmptyAfterRedaction(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestMask(t *testing.T) {
	d := newTestDetector(t)
	key := expand(t, "AKIA{{a2z7:16}}", rand.New(rand.NewPCG(8, 8)))
	t.Run("clean text is returned as is", func(t *testing.T) {
		if got := d.Mask("nothing to see", 5); got != "nothing to see" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("markers replace secrets, no bound", func(t *testing.T) {
		if got := d.Mask("id "+key+" leaked", 0); got != "id [REDACTED:aws_access_key] leaked" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("a marker longer than its secret is cut before, never inside", func(t *testing.T) {
		// 20-character key, 25-character marker: at a bound of 190 the text would grow
		// past it, and the cut falls in the marker, so the marker goes entirely.
		text := strings.Repeat("é", 170) + key
		got := d.Mask(text, 190)
		if got != strings.Repeat("é", 170) {
			t.Errorf("got %q", got)
		}
		if got := d.Mask(text, 195); got != strings.Repeat("é", 170)+"[REDACTED:aws_access_key]" {
			t.Errorf("a bound that holds the marker cut it: %q", got)
		}
	})
}

// TestRulesCannotBlowUpAText: rules run one after another, each on the last one's output,
// and any company hosting a room writes its own. Unbounded, two rules replacing every
// character with a long text multiplied a knowledge write into gigabytes: a replacement
// is now a marker's size, and the text may not grow past MaxRedactedBytes while they run.
func TestRulesCannotBlowUpAText(t *testing.T) {
	d := newTestDetector(t)
	t.Run("a replacement longer than a marker is refused when saved", func(t *testing.T) {
		err := ValidateRules([]Rule{{Name: "grow", Pattern: `.`, Replacement: strings.Repeat("x", MaxReplacementBytes+1)}})
		if !errors.Is(err, ErrRuleInvalid) || !strings.Contains(err.Error(), "replacement is longer than") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a name or pattern past its bound is refused when saved", func(t *testing.T) {
		for _, r := range []Rule{{Name: strings.Repeat("n", MaxRuleNameBytes+1), Pattern: `x`}, {Name: "p", Pattern: strings.Repeat("x", MaxRulePatternBytes+1)}} {
			if err := ValidateRules([]Rule{r}); !errors.Is(err, ErrRuleInvalid) {
				t.Fatalf("%.40v: %v", r, err)
			}
		}
	})
	t.Run("rules that would grow a text past the bound refuse it, having grown nothing", func(t *testing.T) {
		grow := strings.Repeat("x", MaxReplacementBytes)
		rules := []Rule{{Name: "one", Pattern: `.`, Replacement: grow}, {Name: "two", Pattern: `.`, Replacement: grow}}
		got, _, _, err := d.Redact(strings.Repeat("a", 5000), rules)
		if !errors.Is(err, ErrRuleInvalid) || !strings.Contains(err.Error(), "longer than") || got != "" {
			t.Fatalf("%d bytes, %v", len(got), err)
		}
		// The same rules on a short text are fine: 5 × 200 × 200 bytes.
		if got, _, _, err := d.Redact("abcde", rules); err != nil || len(got) != 5*MaxReplacementBytes*MaxReplacementBytes {
			t.Fatalf("%d bytes, %v", len(got), err)
		}
	})
}

// TestARuleSavedBeforeTheBoundsStillApplies: the bounds refuse a new rule; a rule stored
// before they existed (a long keyword list, a long marker) still redacts, since refusing
// it would refuse every knowledge write of its project. The growth bound holds either way.
func TestARuleSavedBeforeTheBoundsStillApplies(t *testing.T) {
	d := newTestDetector(t)
	long := Rule{Name: "customers", Pattern: `\b(` + strings.Repeat("acme|", 250) + `globex)\b`, Replacement: strings.Repeat("#", MaxReplacementBytes+1)}
	if err := ValidateRules([]Rule{long}); !errors.Is(err, ErrRuleInvalid) {
		t.Fatalf("saving it: %v, want refused", err)
	}
	got, _, _, err := d.Redact("Globex and globex", []Rule{long})
	if err != nil || got != "Globex and "+long.Replacement {
		t.Fatalf("applying it: %q, %v", got, err)
	}
}
