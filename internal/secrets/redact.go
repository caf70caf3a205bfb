package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rule is one project redaction rule as stored in project settings:
// {name, pattern (RE2), replacement?}. An empty Replacement means "[REDACTED:<name>]".
// The replacement is inserted literally: "$1" stays "$1", so a rule cannot echo back the
// text it was written to hide.
type Rule struct {
	Name        string `json:"name"`
	Pattern     string `json:"pattern"`
	Replacement string `json:"replacement,omitempty"`
}

// ErrRuleInvalid is matched (errors.Is) by every error about a redaction rule that cannot
// be applied. Knowledge writes map it to the outcome "redaction_unresolvable"; settings
// refuse to save such a rule.
var ErrRuleInvalid = errors.New("redaction rule cannot be applied")

// RuleError says which rule is unusable and why. It matches ErrRuleInvalid and unwraps
// to the underlying cause (for instance a *syntax.Error from the RE2 compiler).
type RuleError struct {
	Name string
	Err  error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("secrets: redaction rule %q: %v", e.Name, e.Err)
}

func (e *RuleError) Unwrap() []error { return []error{ErrRuleInvalid, e.Err} }

// MarkerPrefix starts every marker this package writes: "[REDACTED:<kind or rule name>]".
const MarkerPrefix = "[REDACTED:"

// Marker returns the text that replaces a secret of the given kind (or a match of the
// named rule when the rule has no replacement of its own).
func Marker(kind string) string { return MarkerPrefix + kind + "]" }

// Bounds of a rule (when saved: ValidateRules) and of what rules may make of a text (when
// applied: Redact). A replacement is a marker, not content; rules run one after another,
// each on the last one's output, so unbounded replacements multiplied a text by their
// lengths: two rules replacing each character with 40,000 made terabytes of a
// 5,000-character write.
const (
	MaxRuleNameBytes    = 100
	MaxRulePatternBytes = 1000
	MaxReplacementBytes = 200
	// MaxRedactedBytes bounds a text while the rules run: past it the write is refused
	// (ErrRuleInvalid) rather than the next rule run on it. Every text the rules are
	// applied to is far shorter (a knowledge body holds at most 5,000 characters).
	MaxRedactedBytes = 256 << 10
)

type compiledRule struct {
	re          *regexp.Regexp
	replacement string
}

// ValidateRules checks project redaction rules as they are saved. It reports every bad
// rule, joined; each one matches ErrRuleInvalid and can be taken apart with errors.As
// into a *RuleError. A rule is bad when its name is blank or holds ']' or a line break
// (it would break its own marker), its pattern is empty or does not compile as RE2, or its
// pattern matches the empty string (it would insert the replacement between every two
// characters of every text).
func ValidateRules(rules []Rule) error {
	var errs []error
	for _, r := range rules {
		if err := checkBounds(r); err != nil {
			errs = append(errs, err)
		} else if _, err := compileRule(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkBounds refuses a rule past the bounds of a new one. It runs when rules are saved,
// not when they are applied: a rule saved before the bounds existed keeps working (the
// growth bound of Redact holds whatever the rules).
func checkBounds(r Rule) error {
	switch {
	case len(r.Name) > MaxRuleNameBytes:
		return &RuleError{Name: strings.ToValidUTF8(r.Name[:MaxRuleNameBytes], "") + "…", Err: fmt.Errorf("name is longer than %d bytes", MaxRuleNameBytes)}
	case len(r.Pattern) > MaxRulePatternBytes:
		return &RuleError{Name: r.Name, Err: fmt.Errorf("pattern is longer than %d bytes", MaxRulePatternBytes)}
	case len(r.Replacement) > MaxReplacementBytes:
		return &RuleError{Name: r.Name, Err: fmt.Errorf("replacement is longer than %d bytes: it is a marker, not content", MaxReplacementBytes)}
	}
	return nil
}

func compileRule(r Rule) (compiledRule, error) {
	if strings.TrimSpace(r.Name) == "" {
		return compiledRule{}, &RuleError{Name: r.Name, Err: errors.New("name is empty")}
	}
	if strings.ContainsAny(r.Name, "]\n") {
		// The name goes into "[REDACTED:<name>]", which must stay recognisable as a marker.
		return compiledRule{}, &RuleError{Name: r.Name, Err: errors.New("name contains ']' or a line break")}
	}
	if r.Pattern == "" {
		return compiledRule{}, &RuleError{Name: r.Name, Err: errors.New("pattern is empty")}
	}
	re, err := regexp.Compile(r.Pattern)
	if err != nil {
		return compiledRule{}, &RuleError{Name: r.Name, Err: fmt.Errorf("pattern does not compile: %w", err)}
	}
	if re.MatchString("") {
		return compiledRule{}, &RuleError{Name: r.Name, Err: errors.New("pattern matches the empty string")}
	}
	repl := r.Replacement
	if repl == "" {
		repl = Marker(r.Name)
	}
	return compiledRule{re: re, replacement: repl}, nil
}

// replaceBounded is ReplaceAllLiteralString that stops, reporting false, as soon as the
// result would pass MaxRedactedBytes: a text is never grown past it, whatever the rules.
// It also reports whether the rule matched at all.
func (c compiledRule) replaceBounded(text string) (out string, matched, ok bool) {
	if len(text) > MaxRedactedBytes {
		return "", false, false
	}
	var b strings.Builder
	last := 0
	for _, m := range c.re.FindAllStringIndex(text, -1) {
		if b.Len()+(m[0]-last)+len(c.replacement) > MaxRedactedBytes {
			return "", false, false
		}
		b.WriteString(text[last:m[0]])
		b.WriteString(c.replacement)
		last = m[1]
		matched = true
	}
	if b.Len()+len(text)-last > MaxRedactedBytes {
		return "", false, false
	}
	b.WriteString(text[last:])
	return b.String(), matched, true
}

// Redact applies the project's rules in order, then replaces every secret the detector
// finds in the result with Marker(kind). The findings it returns locate those markers in
// the returned text (text[f.Start:f.End] == Marker(f.Kind)); matched are the rules that
// replaced something, in their order (a rule with a replacement of its own leaves no
// marker to find). If any rule is unusable nothing is redacted and the error matches
// ErrRuleInvalid: a write must not go ahead with a rule silently skipped.
func (d *Detector) Redact(text string, rules []Rule) (out string, markers []Finding, matched []Rule, err error) {
	compiled := make([]compiledRule, 0, len(rules))
	for _, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			return "", nil, nil, err
		}
		compiled = append(compiled, c)
	}
	for i, c := range compiled {
		var hit, ok bool
		if text, hit, ok = c.replaceBounded(text); !ok {
			return "", nil, nil, &RuleError{Name: rules[i].Name, Err: fmt.Errorf("the rules make the text longer than %d bytes", MaxRedactedBytes)}
		}
		if hit {
			matched = append(matched, rules[i])
		}
	}

	found := d.Scan(text)
	if len(found) == 0 {
		return text, nil, matched, nil
	}
	text, markers = mark(text, found)
	return text, markers, matched, nil
}

// mark replaces each of found (in order, none overlapping) in text with its marker, and
// locates those markers in the result (text[m.Start:m.End] == Marker(m.Kind)).
func mark(text string, found []Finding) (string, []Finding) {
	var b strings.Builder
	b.Grow(len(text))
	markers := make([]Finding, 0, len(found))
	last := 0
	for _, f := range found {
		b.WriteString(text[last:f.Start])
		start := b.Len()
		b.WriteString(Marker(f.Kind))
		markers = append(markers, Finding{Kind: f.Kind, Start: start, End: b.Len()})
		last = f.End
	}
	b.WriteString(text[last:])
	return b.String(), markers
}

// IsEmptyAfterRedaction reports whether nothing of substance is left in s once the
// [REDACTED:…] markers are taken out: no letter and no digit remains, only whitespace,
// punctuation and symbols. A lesson body that was nothing but a key is refused as
// "empty_after_redaction" rather than stored as a bare marker.
func IsEmptyAfterRedaction(s string) bool {
	for s != "" {
		i := strings.Index(s, MarkerPrefix)
		head := s
		if i >= 0 {
			head = s[:i]
		}
		if strings.ContainsFunc(head, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			return false
		}
		if i < 0 {
			return true
		}
		rest := s[i+len(MarkerPrefix):]
		j := strings.IndexAny(rest, "]\n")
		if j < 0 || rest[j] != ']' {
			// An unterminated "[REDACTED:" is not a marker but text, and it has letters.
			return false
		}
		s = rest[j+1:]
	}
	return true
}

// Mask replaces every detected secret in text with its marker, for the channels that
// store and show what they are given (room chat, tasks, thread messages): no project
// rules, no error. A marker may be longer than the secret it hides, so with maxRunes > 0
// the result is cut to at most that many characters, the bound the channel's column
// holds; the cut never falls inside a marker (it goes before it), so it never shows a
// secret's first characters. Text with no secret comes back unchanged.
func (d *Detector) Mask(text string, maxRunes int) string {
	out, _ := d.MaskKinds(text, maxRunes)
	return out
}

// MaskKinds is Mask that also names the kinds of secret it masked, each once, in the
// order they stand in the text, so that a call which stored the masked text can tell its
// caller what was taken out (nil when nothing was).
func (d *Detector) MaskKinds(text string, maxRunes int) (string, []string) {
	found := d.Scan(text)
	if len(found) == 0 {
		return text, nil
	}
	var kinds []string
	for _, f := range found {
		if !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	out, markers := mark(text, found)
	if maxRunes <= 0 || utf8.RuneCountInString(out) <= maxRunes {
		return out, kinds
	}
	cut, n := 0, 0
	for cut < len(out) && n < maxRunes {
		_, w := utf8.DecodeRuneInString(out[cut:])
		cut += w
		n++
	}
	for _, m := range markers {
		if m.Start < cut && cut < m.End {
			cut = m.Start
			break
		}
	}
	return out[:cut], kinds
}

// MaskAdding is MaskKinds for a call that masks several texts and answers one list of
// what it took out: it adds each kind it masked to *kinds unless the list already names
// it. Room chat and tasks, thread messages and an event's detail all keep their redacted
// list this way, so they keep it the same way.
func (d *Detector) MaskAdding(text string, maxRunes int, kinds *[]string) string {
	out, found := d.MaskKinds(text, maxRunes)
	for _, k := range found {
		if !slices.Contains(*kinds, k) {
			*kinds = append(*kinds, k)
		}
	}
	return out
}

// MaskJSON masks every string of a JSON document (object keys included) as Mask does,
// keeping its structure: for the free-form objects a channel stores (a threads event's
// detail). The document comes back byte for byte when nothing was found; otherwise it is
// encoded again (keys sorted, numbers kept as written). kinds names what was masked, each
// once, sorted (a document's objects have no order to follow).
func (d *Detector) MaskJSON(raw json.RawMessage) (masked json.RawMessage, kinds []string, err error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("secrets: mask json: %w", err)
	}
	changed := false
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case string:
			m := d.MaskAdding(t, 0, &kinds)
			changed = changed || m != t
			return m
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
			return t
		case map[string]any:
			out := make(map[string]any, len(t))
			for k, v := range t {
				out[walk(k).(string)] = walk(v)
			}
			return out
		}
		return x
	}
	v = walk(v)
	if !changed {
		return raw, nil, nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: mask json: %w", err)
	}
	slices.Sort(kinds)
	return out, kinds, nil
}
