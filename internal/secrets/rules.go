package secrets

import (
	"fmt"
	"regexp"
	"strings"
)

// Kinds this package names itself. Any other gitleaks rule reports its rule id verbatim
// (for example "gitlab-pat"), which is stable across gitleaks releases.
const (
	KindAWSAccessKey          = "aws_access_key"
	KindAWSSecretKey          = "aws_secret_key"
	KindGitHubToken           = "github_token"
	KindSlackToken            = "slack_token"
	KindSlackWebhook          = "slack_webhook_url"
	KindJWT                   = "jwt"
	KindPrivateKey            = "private_key"
	KindOpenAIKey             = "openai_api_key"
	KindAnthropicKey          = "anthropic_api_key"
	KindGoogleAPIKey          = "google_api_key"
	KindStripeKey             = "stripe_api_key"
	KindURLCredentials        = "url_credentials"
	KindEnvSecret             = "env_secret"
	KindConfigSecret          = "config_secret"
	KindRelayroomAgentKey     = "relayroom_agent_key"
	KindRelayroomAccessToken  = "relayroom_access_token"
	KindRelayroomRefreshToken = "relayroom_refresh_token"
	KindRelayroomConnectCode  = "relayroom_connect_code"
	// KindRelayroomPersonalToken is a desk personal access token (qyt_pt_…, internal/desk).
	KindRelayroomPersonalToken = "relayroom_personal_token"
)

// kindForGitleaks maps gitleaks rule ids onto this package's kind names, so that a kind
// means the same thing whichever rule found it.
func kindForGitleaks(ruleID string) string {
	switch ruleID {
	case "aws-access-token":
		return KindAWSAccessKey
	case "github-pat", "github-oauth", "github-app-token", "github-refresh-token", "github-fine-grained-pat":
		return KindGitHubToken
	case "slack-webhook-url":
		return KindSlackWebhook
	case "jwt", "jwt-base64":
		return KindJWT
	case "private-key":
		return KindPrivateKey
	case "openai-api-key":
		return KindOpenAIKey
	case "anthropic-api-key", "anthropic-admin-api-key":
		return KindAnthropicKey
	case "gcp-api-key":
		return KindGoogleAPIKey
	case "stripe-access-token":
		return KindStripeKey
	}
	if strings.HasPrefix(ruleID, "slack-") {
		// bot, user, app, legacy and config tokens: one kind, they grant the same thing.
		return KindSlackToken
	}
	return ruleID
}

// priorityOf ranks kinds for merging overlaps: our own credentials first (their prefixes
// cannot be anything else), then named providers, then passwords in URLs, then other
// gitleaks rules, and the assignment rules last, since a variable's name says least
// about what its value is.
func priorityOf(kind string) int {
	switch kind {
	case KindRelayroomAgentKey, KindRelayroomAccessToken, KindRelayroomRefreshToken, KindRelayroomConnectCode,
		KindRelayroomPersonalToken:
		return 100
	case KindAWSAccessKey, KindAWSSecretKey, KindGitHubToken, KindSlackToken, KindSlackWebhook,
		KindJWT, KindPrivateKey, KindOpenAIKey, KindAnthropicKey, KindGoogleAPIKey, KindStripeKey:
		return 80
	case KindURLCredentials:
		return 60
	case KindEnvSecret:
		return 20
	case KindConfigSecret:
		return 15
	}
	return 50
}

// minJoinedPriority is the lowest priority a finding of the joined view may have: every
// kind but the assignment rules (env_secret, config_secret), which rely on a line's
// layout that joining destroys.
const minJoinedPriority = 50

// droppedGitleaksRules are removed from gitleaks' set before the detector is built.
//
// generic-api-key flags any "key/token/secret/password: <10+ chars>" whose value has
// some entropy; what it finds beyond the other rules is mostly hex digests, UUIDs and
// identifiers next to the word "key" (see docs/secrets.md for the measurement), and it
// is the slowest rule in the set. Its useful cases, real values assigned to secret
// names, are covered by env_secret and config_secret, which filter placeholders.
//
// private-key matches lazily from any "-----BEGIN … PRIVATE KEY-----" to the next
// "KEY-----", whatever lies between: a header merely mentioned in prose stretches to the
// next real key and would redact every paragraph in between. Our private_key rule wants
// key material right after the header.
func droppedGitleaksRules() []string { return []string{"generic-api-key", "private-key"} }

// ownRule is one detector of ours.
type ownRule struct {
	kind     string
	re       *regexp.Regexp
	group    int      // capture group that holds the secret; 0 means the whole match
	keywords []string // lower-case; the rule only runs when one occurs in the text
	// accept vets a match; it may narrow [start,end) (e.g. strip quotes). nil accepts all.
	accept func(text string, sm []int, start, end int) (int, int, bool)
	// multiline rules run over the whole text; the others line by line.
	multiline bool
	// delim, when set, is the byte every match of an assignment rule hinges on ('=' or
	// ':'). Such a rule is evaluated only where that byte occurs, with anchored copies of
	// its pattern (at a line start: body; elsewhere: sep then body), so a match costs
	// time proportional to its length instead of a try at every position of the line.
	delim       byte
	atLineStart *regexp.Regexp
	afterSep    *regexp.Regexp
}

type ownRuleSpec struct {
	kind      string
	pattern   string
	group     int
	keywords  []string
	accept    func(text string, sm []int, start, end int) (int, int, bool)
	multiline bool
	// delim, sep and body describe an assignment rule: pattern is
	// (?m)(?:^|sep)body, and every match has delim between the name and the value.
	delim byte
	sep   string
	body  string
}

// Patterns. Token bodies run over base62 plus '-' and '_' and stop at anything else, so
// sentence punctuation after a key is left alone; minimum lengths are checked in code.
const (
	// Agent keys: sk-qyt- then a base62 body; '_' and '-' are allowed inside it so the
	// auth package may separate an id part and a checksum without this rule changing.
	patAgentKey = `\bsk-qyt-[A-Za-z0-9][A-Za-z0-9_-]*`
	// OAuth access/refresh tokens and connect codes: qyt_at_/qyt_rt_/qyt_cc_ then a
	// base62 or base64url body.
	patAccessToken  = `\bqyt_at_[A-Za-z0-9][A-Za-z0-9_-]*`
	patRefreshToken = `\bqyt_rt_[A-Za-z0-9][A-Za-z0-9_-]*`
	patConnectCode  = `\bqyt_cc_[A-Za-z0-9][A-Za-z0-9_-]*`
	// Desk personal access tokens (internal/desk, /desk/mcp and the ingest API): qyt_pt_
	// then a base62 body, the shape of an agent key.
	patPersonalToken = `\bqyt_pt_[A-Za-z0-9][A-Za-z0-9_-]*`
	// The threads endpoint carries its connect code in the path: /mcp/<code>?part=<part>.
	// That URL is how a code gets pasted around, prefixed or not.
	patConnectURL = `/mcp/([A-Za-z0-9_-]{12,})\?part=`

	// OpenAI: legacy sk-<48 alnum>, and sk-proj-/sk-svcacct-/sk-admin-/sk-None- keys of
	// 100+ base64url characters. gitleaks only knows keys carrying the T3BlbkFJ marker.
	patOpenAI = `\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9][A-Za-z0-9_-]*`
	// Anthropic: sk-ant-api03-…, sk-ant-admin01-…, sk-ant-oat01-…; gitleaks insists on the
	// exact 93+AA layout of one generation.
	patAnthropic = `\bsk-ant-[A-Za-z0-9][A-Za-z0-9_-]*`

	// AWS secret access keys have no prefix: only the name next to them identifies them.
	patAWSSecret = `(?i)(?:\baws[_.-]?(?:secret[_.-]?(?:access[_.-]?)?key|sak)|\bsecret[_.-]?access[_.-]?key)["']?[ \t]*(?:=|:|=>|:=)[ \t]*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`

	// A PEM private key block: the header, optional RFC 1421 headers (encrypted keys),
	// then base64 lines, with or without the footer, with real newlines or with the \n
	// escapes of a JSON string. gitleaks' rule needs the footer and 64 characters; a
	// truncated paste is still a leaked key.
	patPrivateKey = `-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----` +
		`(?:` + pemNL + `[A-Za-z-]+:[^\r\n\\]*)*` +
		`(?:(?:` + pemNL + `)+|[ \t]*)` +
		`[A-Za-z0-9+/=]{40,}` +
		`(?:` + pemNL + `[A-Za-z0-9+/=]+)*` +
		`(?:(?:` + pemNL + `)+-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)?`
	// A line break inside a key: a real one, or the \n (\\n when escaped twice) of a key
	// stored in a JSON string.
	pemNL = `[ \t]*(?:\r?\n|(?:\\+r)?\\+n)[ \t]*`

	// scheme://user:password@host — the password part.
	patURLCredentials = `\b[A-Za-z][A-Za-z0-9+.-]{1,20}://([^\s:/?#@"'<>\x60]+):([^\s/?#@"'<>\x60]+)@[A-Za-z0-9\[]`

	// NAME=value at the start of a line or after a separator (shell "export", "docker -e",
	// a query string, a quoted compose entry). The name is vetted in code (it must end in
	// KEY, SECRET, TOKEN, PASSWORD, …) and so is the value (not empty, not a placeholder).
	// Shells allow no space around '='; .env and properties files and aligned code do,
	// any number of blanks (a limit would be a bypass: "API_TOKEN   =   value").
	// Full pattern: (?m)(?:^|envSep)envBody.
	envSep  = `[\s;&|(?"'\x60,{]`
	envBody = `([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*("[^"\r\n]*"|'[^'\r\n]*'|[^\s"'\x60]+)`

	// name: value, as in YAML, JSON ("name": "value") and header-like lines. The name is
	// vetted like an env name; the value must look generated (acceptConfig).
	// Full pattern: (?m)(?:^|configSep)configBody.
	configSep  = `[\s{,(\[]`
	configBody = `["']?([A-Za-z_][A-Za-z0-9_.-]*)["']?[ \t]*:[ \t]*("[^"\r\n]*"|'[^'\r\n]*'|[^\s"'\x60,}\]]+)`
)

func ownRuleSpecs() []ownRuleSpec {
	return []ownRuleSpec{
		{kind: KindRelayroomAgentKey, pattern: patAgentKey, keywords: []string{"sk-qyt-"}, accept: acceptPrefixed(len("sk-qyt-"), 16)},
		{kind: KindRelayroomAccessToken, pattern: patAccessToken, keywords: []string{"qyt_at_"}, accept: acceptPrefixed(len("qyt_at_"), 16)},
		{kind: KindRelayroomRefreshToken, pattern: patRefreshToken, keywords: []string{"qyt_rt_"}, accept: acceptPrefixed(len("qyt_rt_"), 16)},
		{kind: KindRelayroomConnectCode, pattern: patConnectCode, keywords: []string{"qyt_cc_"}, accept: acceptPrefixed(len("qyt_cc_"), 16)},
		{kind: KindRelayroomPersonalToken, pattern: patPersonalToken, keywords: []string{"qyt_pt_"}, accept: acceptPrefixed(len("qyt_pt_"), 16)},
		{kind: KindRelayroomConnectCode, pattern: patConnectURL, group: 1, keywords: []string{"/mcp/"}, accept: acceptPrefixed(0, 12)},
		{kind: KindOpenAIKey, pattern: patOpenAI, keywords: []string{"sk-"}, accept: acceptOpenAI},
		{kind: KindAnthropicKey, pattern: patAnthropic, keywords: []string{"sk-ant-"}, accept: acceptRandom(len("sk-ant-"), 32)},
		{kind: KindAWSSecretKey, pattern: patAWSSecret, group: 1, keywords: []string{"secret", "aws_sak", "aws-sak", "aws.sak", "awssak"}, accept: acceptAWSSecret},
		{kind: KindPrivateKey, pattern: patPrivateKey, keywords: []string{"-----begin"}, accept: acceptPrivateKey, multiline: true},
		{kind: KindURLCredentials, pattern: patURLCredentials, group: 2, keywords: []string{"://"}, accept: acceptURLCredentials},
		{kind: KindEnvSecret, pattern: `(?m)(?:^|` + envSep + `)` + envBody, sep: envSep, body: envBody, group: 2, keywords: []string{"="}, accept: acceptEnv, delim: '='},
		{kind: KindConfigSecret, pattern: `(?m)(?:^|` + configSep + `)` + configBody, sep: configSep, body: configBody, group: 2, keywords: []string{":"}, accept: acceptConfig, delim: ':'},
	}
}

func compileOwnRules() ([]ownRule, error) {
	specs := ownRuleSpecs()
	rules := make([]ownRule, 0, len(specs))
	for _, s := range specs {
		re, err := regexp.Compile(s.pattern)
		if err != nil {
			return nil, fmt.Errorf("secrets: compile %s rule: %w", s.kind, err)
		}
		r := ownRule{kind: s.kind, re: re, group: s.group, keywords: s.keywords, accept: s.accept, multiline: s.multiline, delim: s.delim}
		if s.delim != 0 {
			if r.atLineStart, err = regexp.Compile(`\A(?:` + s.body + `)`); err != nil {
				return nil, fmt.Errorf("secrets: compile anchored %s rule: %w", s.kind, err)
			}
			if r.afterSep, err = regexp.Compile(`\A` + s.sep + `(?:` + s.body + `)`); err != nil {
				return nil, fmt.Errorf("secrets: compile anchored %s rule: %w", s.kind, err)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// scanOwn runs our rules. Every rule but the private-key one matches within a line, so
// it runs only on the lines that contain one of its keywords: Go's regexp has no literal
// prefix to skip ahead with for patterns like NAME=value, and scanning a few lines rather
// than the whole text is what keeps a keyword-dense note cheap.
func (d *Detector) scanOwn(text string, out []candidate) []candidate {
	lower := asciiLower(text) // same length as text, so offsets carry over
	var lines [][2]int
	for i := range d.own {
		r := &d.own[i]
		if !containsAny(lower, r.keywords) {
			continue
		}
		if r.multiline {
			out = r.match(text, 0, len(text), out)
			continue
		}
		if r.delim != 0 {
			out = r.matchAtDelims(text, out)
			continue
		}
		if lines == nil {
			lines = lineSpans(text)
		}
		for _, ln := range lines {
			if containsAny(lower[ln[0]:ln[1]], r.keywords) {
				out = r.match(text, ln[0], ln[1], out)
			}
		}
	}
	return out
}

// match applies the rule to text[from:to], reporting offsets in text.
func (r *ownRule) match(text string, from, to int, out []candidate) []candidate {
	for _, sm := range r.re.FindAllStringSubmatchIndex(text[from:to], -1) {
		for j := range sm {
			if sm[j] >= 0 {
				sm[j] += from
			}
		}
		out = r.found(text, sm, out)
	}
	return out
}

// found appends the finding of one match (submatch offsets sm in text): the rule's group,
// narrowed or refused by its accept function; an empty or absent group is no finding.
func (r *ownRule) found(text string, sm []int, out []candidate) []candidate {
	start, end := sm[2*r.group], sm[2*r.group+1]
	if start < 0 {
		return out
	}
	ok := true
	if r.accept != nil {
		start, end, ok = r.accept(text, sm, start, end)
	}
	if !ok || start >= end {
		return out
	}
	return append(out, candidate{Finding{Kind: r.kind, Start: start, End: end}, priorityOf(r.kind)})
}

// matchAtDelims evaluates an assignment rule at each occurrence of its delimiter: it
// walks back over the name (optionally quoted, any blanks before the delimiter)
// and matches the anchored pattern from there to the end of the line. The patterns can
// only match that way — separator, name, delimiter, value — so this finds what re
// would, without re's cost on long lines of prose.
func (r *ownRule) matchAtDelims(text string, out []candidate) []candidate {
	for i := 0; i < len(text); i++ {
		j := strings.IndexByte(text[i:], r.delim)
		if j < 0 {
			break
		}
		i += j
		lineEnd := len(text)
		if k := strings.IndexByte(text[i:], '\n'); k >= 0 {
			lineEnd = i + k
		}
		s := i
		for s > 0 && (text[s-1] == ' ' || text[s-1] == '\t') {
			s--
		}
		if s > 0 && (text[s-1] == '"' || text[s-1] == '\'') {
			s--
		}
		nameEnd := s
		for s > 0 && nameEnd-s < maxNameLen && isNameByte(text[s-1]) {
			s--
		}
		if s == nameEnd {
			continue
		}
		// The name may be quoted ("api_key": …), so the body may start one byte earlier.
		sm := r.matchFrom(text, s, lineEnd)
		if sm == nil && s > 0 && (text[s-1] == '"' || text[s-1] == '\'') {
			sm = r.matchFrom(text, s-1, lineEnd)
		}
		if sm != nil {
			out = r.found(text, sm, out)
		}
	}
	return out
}

// matchFrom matches the rule's body starting at text[s], preceded by a separator unless s
// starts a line, and returns submatch offsets in text.
func (r *ownRule) matchFrom(text string, s, lineEnd int) []int {
	from, re := s, r.atLineStart
	if s > 0 && text[s-1] != '\n' {
		from, re = s-1, r.afterSep
	}
	sm := re.FindStringSubmatchIndex(text[from:lineEnd])
	for k := range sm {
		if sm[k] >= 0 {
			sm[k] += from
		}
	}
	return sm
}

// maxNameLen bounds how far back a variable name is looked for; no real one is longer.
const maxNameLen = 128

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// lineSpans returns the [start,end) of every line, without its '\n'.
func lineSpans(text string) [][2]int {
	spans := make([][2]int, 0, strings.Count(text, "\n")+1)
	start := 0
	for {
		i := strings.IndexByte(text[start:], '\n')
		if i < 0 {
			return append(spans, [2]int{start, len(text)})
		}
		spans = append(spans, [2]int{start, start + i})
		start += i + 1
	}
}

// asciiLower lower-cases ASCII letters only. strings.ToLower would turn invalid UTF-8
// into U+FFFD and shift every offset after it.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func containsAny(s string, words []string) bool {
	if len(words) == 0 {
		return true
	}
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
