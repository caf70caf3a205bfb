// Package secrets finds credentials in free text and redacts them.
//
// It is the one place the product decides what "looks like a live credential": the
// rooms write_memory tool refuses content, tags and categories that Scan flags,
// knowledge writes (learn, lessons on close) run Redact, which applies the project's own
// redaction rules first and then masks every detected secret with a [REDACTED:<kind>]
// marker, and room chat, tasks and thread messages store what Mask returns. Scan looks
// at the text as a reader sees it (NFKC, invisible characters dropped, split tokens
// rejoined; normalize.go) and reports offsets in the text as given.
//
// Detection combines gitleaks' default rule set (loaded once, as a library, minus its
// generic-api-key and private-key rules) with rules of our own for what gitleaks misses:
// this product's credentials (sk-qyt-, qyt_at_, qyt_rt_, qyt_cc_ and connect URLs),
// env-style assignments whose values contain symbols, "name: value" config entries with
// generated values, OpenAI and Anthropic keys in their current shapes, AWS secret keys
// next to their names, private key blocks (also footerless or JSON-escaped), and
// passwords inside URLs. docs/secrets.md lists every kind, the false-positive policy and
// what is deliberately left out.
package secrets

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// Finding is one detected secret: Kind names what it is, and text[Start:End] is the
// secret itself (not the surrounding "KEY=" or quotes), in bytes.
type Finding struct {
	Kind  string
	Start int
	End   int
}

// Detector scans text for secrets. Build it once with NewDetector (loading the rule set
// costs tens of milliseconds) and share it: every method is safe for concurrent use,
// because after construction nothing in it is written.
type Detector struct {
	leaks     *detect.Detector
	leakRules map[string]config.Rule
	own       []ownRule
	// prefixes are every rule's keywords, lower case: the fragments that may start a
	// token, so a line break after one is joined even though it looks like a word.
	prefixes []string
}

// NewDetector loads gitleaks' default configuration and compiles this package's own rules.
func NewDetector() (*Detector, error) {
	cfg, err := loadGitleaksConfig()
	if err != nil {
		return nil, err
	}
	for _, id := range droppedGitleaksRules() {
		delete(cfg.Rules, id)
	}
	kept := cfg.OrderedRules[:0:0]
	for _, id := range cfg.OrderedRules {
		if _, ok := cfg.Rules[id]; ok {
			kept = append(kept, id)
		}
	}
	cfg.OrderedRules = kept

	leaks := detect.NewDetector(cfg)
	// A "gitleaks:allow" comment is a convenience for repositories; here it would let
	// anyone smuggle a key past the check by appending a magic word.
	leaks.IgnoreGitleaksAllow = true
	// No base64/hex/percent decoding passes: findings in decoded text have no byte range
	// in the original, and a secret we cannot point at is one we cannot redact.
	leaks.MaxDecodeDepth = 0

	own, err := compileOwnRules()
	if err != nil {
		return nil, err
	}
	var prefixes []string
	for _, id := range cfg.OrderedRules {
		prefixes = append(prefixes, cfg.Rules[id].Keywords...)
	}
	for _, r := range own {
		prefixes = append(prefixes, r.keywords...)
	}
	return &Detector{leaks: leaks, leakRules: cfg.Rules, own: own, prefixes: prefixes}, nil
}

// loadGitleaksConfig parses the rule file embedded in gitleaks. It uses a private viper
// instance: gitleaks' own NewDetectorDefaultConfig goes through viper's process-wide
// singleton, which two constructors running at once would race on.
func loadGitleaksConfig() (config.Config, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		return config.Config{}, fmt.Errorf("secrets: read gitleaks default config: %w", err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return config.Config{}, fmt.Errorf("secrets: decode gitleaks default config: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return config.Config{}, fmt.Errorf("secrets: translate gitleaks default config: %w", err)
	}
	return cfg, nil
}

// Scan returns every secret found in text, ordered by position. Overlapping detections
// (an env line whose value is also a GitHub token, say) are merged into one finding that
// covers both ranges and carries the most specific kind.
func (d *Detector) Scan(text string) []Finding {
	if text == "" {
		return nil
	}
	v := normalise(text)
	raw := d.scanView(v, nil)
	if j := join(v, text, d.prefixes); j != nil {
		raw = d.scanJoined(j, raw)
	}
	return merge(raw)
}

// scanText runs every rule over text; offsets are text's.
func (d *Detector) scanText(text string, out []candidate) []candidate {
	out = d.scanGitleaks(text, out)
	out = d.scanOwn(text, out)
	return scanKeyBodies(text, out)
}

// scanView scans a view and reports offsets in the original text.
func (d *Detector) scanView(v *view, out []candidate) []candidate {
	n := len(out)
	out = d.scanText(v.text, out)
	for i := n; i < len(out); i++ {
		out[i].Start, out[i].End = v.toOriginal(out[i].Start, out[i].End)
	}
	return out
}

// scanJoined adds what only the joined view shows: a token someone split over lines.
// Of its findings only those count that cross a removed break (the rest the normalised
// view already judged) and are of a kind the token itself identifies (own credentials,
// providers, JWTs, keys, URL passwords, gitleaks' rules): the assignment rules would read
// one line's name with the next line's first word as its value. A finding is first cut
// back to its last join when what follows that join is not token material (trimJoined).
// Findings may overlap the normalised view's: a key wrapped after a head long enough to
// be flagged on its own is redacted whole, not just its first line.
//
// Only the lines of the joined view that hold a join are scanned: elsewhere it is the
// normalised view again, already scanned, so ordinary prose costs one scan, not two.
func (d *Detector) scanJoined(j *view, out []candidate) []candidate {
	var found []candidate
	for _, ln := range j.joinedLines() {
		n := len(found)
		found = d.scanText(j.text[ln[0]:ln[1]], found)
		for i := n; i < len(found); i++ {
			found[i].Start += ln[0]
			found[i].End += ln[0]
		}
	}
	for _, c := range found {
		if c.priority < minJoinedPriority {
			continue
		}
		c.End = j.trimJoined(c.Start, c.End)
		if !j.spansJoin(c.Start, c.End) {
			continue
		}
		c.Start, c.End = j.toOriginal(c.Start, c.End)
		out = append(out, c)
	}
	return out
}

// candidate is a detection before overlaps are merged.
type candidate struct {
	Finding
	priority int
}

func (d *Detector) scanGitleaks(text string, out []candidate) []candidate {
	found := d.leaks.DetectString(text)
	if len(found) == 0 {
		return out
	}
	nl := newlineIndexes(text)
	for _, f := range found {
		start, end, ok := d.locate(text, nl, f)
		if !ok || start >= end {
			continue
		}
		kind := kindForGitleaks(f.RuleID)
		out = append(out, candidate{Finding{Kind: kind, Start: start, End: end}, priorityOf(kind)})
	}
	return out
}

// locate turns a gitleaks finding (line, column, matched text, secret text) back into the
// byte range of the secret. gitleaks counts a line's columns from the newline that
// precedes it (from 0 on the first line); the arithmetic is checked against the matched
// text, and a search from the start of the line takes over if a later gitleaks version
// counts differently.
func (d *Detector) locate(text string, nl []int, f report.Finding) (int, int, bool) {
	if f.Match == "" {
		return 0, 0, false
	}
	base := 0
	if f.StartLine > 0 && f.StartLine-1 < len(nl) {
		base = nl[f.StartLine-1]
	}
	ms := base + f.StartColumn - 1
	if ms < 0 || ms > len(text) || !strings.HasPrefix(text[ms:], f.Match) {
		from := min(base, len(text))
		i := strings.Index(text[from:], f.Match)
		if i < 0 {
			from = 0
			if i = strings.Index(text, f.Match); i < 0 {
				return 0, 0, false
			}
		}
		ms = from + i
	}

	off, end := d.secretWithinMatch(f)
	return ms + off, ms + end, true
}

// secretWithinMatch finds the secret inside the rule's match by re-running the rule on
// the matched text, the same way gitleaks derives the secret, so a secret that also
// occurs elsewhere in the match (a key named like its value) is still placed exactly.
func (d *Detector) secretWithinMatch(f report.Finding) (int, int) {
	rule, ok := d.leakRules[f.RuleID]
	if ok && rule.Regex != nil {
		if sm := rule.Regex.FindStringSubmatchIndex(f.Match); sm != nil {
			// A rule whose groups are named alternatives (jwt-base64 names each JWT header
			// field it recognises) marks a fragment, not the secret: mask the whole match.
			named := false
			for _, n := range rule.Regex.SubexpNames() {
				if n != "" {
					named = true
					break
				}
			}
			if named && rule.SecretGroup == 0 {
				return 0, len(f.Match)
			}
			groups := len(sm)/2 - 1
			switch {
			case rule.SecretGroup > 0 && rule.SecretGroup <= groups:
				g := rule.SecretGroup
				if sm[2*g] >= 0 && f.Match[sm[2*g]:sm[2*g+1]] == f.Secret {
					return sm[2*g], sm[2*g+1]
				}
			case rule.SecretGroup == 0:
				for g := 1; g <= groups; g++ {
					if sm[2*g] >= 0 && sm[2*g+1] > sm[2*g] {
						if f.Match[sm[2*g]:sm[2*g+1]] == f.Secret {
							return sm[2*g], sm[2*g+1]
						}
						break
					}
				}
				if groups == 0 && f.Secret == f.Match {
					return 0, len(f.Match)
				}
			}
		}
	}
	if i := strings.Index(f.Match, f.Secret); i >= 0 && f.Secret != "" {
		return i, i + len(f.Secret)
	}
	return 0, len(f.Match)
}

func newlineIndexes(text string) []int {
	var nl []int
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			nl = append(nl, i)
		}
	}
	return nl
}

// merge orders candidates and folds overlapping ones together. The merged range is the
// union, so redaction never leaves part of either detection visible; the kind is the
// most specific one involved.
func merge(cs []candidate) []Finding {
	if len(cs) == 0 {
		return nil
	}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.End != b.End {
			return a.End > b.End
		}
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return a.Kind < b.Kind
	})
	out := make([]Finding, 0, len(cs))
	cur := cs[0]
	for _, c := range cs[1:] {
		if c.Start < cur.End {
			cur.End = max(cur.End, c.End)
			if c.priority > cur.priority {
				cur.Kind, cur.priority = c.Kind, c.priority
			}
			continue
		}
		out = append(out, cur.Finding)
		cur = c
	}
	return append(out, cur.Finding)
}
