package secrets

import (
	"math"
	"net/url"
	"strings"
	"unicode"
)

// acceptPrefixed vets a credential with one of our own prefixes. The prefix is specific
// enough that anything of the right length counts, except an obvious placeholder such as
// "sk-qyt-xxxxxxxxxxxxxxxx" or "qyt_at_YOUR_TOKEN_HERE" in documentation.
func acceptPrefixed(prefixLen, minBody int) func(string, []int, int, int) (int, int, bool) {
	return func(text string, _ []int, start, end int) (int, int, bool) {
		body := text[start+prefixLen : end]
		if len(body) < minBody || looksLikePlaceholderToken(body) {
			return 0, 0, false
		}
		return start, end, true
	}
}

// acceptRandom vets a provider key whose prefix alone is too short to trust (sk-ant-):
// the body must be long and mix upper case, lower case and digits, as random keys do and
// hyphenated prose ("sk-ant-style-keys-are-long") does not.
func acceptRandom(prefixLen, minBody int) func(string, []int, int, int) (int, int, bool) {
	return func(text string, _ []int, start, end int) (int, int, bool) {
		body := text[start+prefixLen : end]
		if len(body) < minBody || !mixedClasses(body) || looksLikePlaceholderToken(body) {
			return 0, 0, false
		}
		return start, end, true
	}
}

// acceptOpenAI rejects the sk- keys of other vendors and of this product (they have their
// own rules), then applies the random-body test.
func acceptOpenAI(text string, _ []int, start, end int) (int, int, bool) {
	s := text[start:end]
	if strings.HasPrefix(s, "sk-ant-") || strings.HasPrefix(s, "sk-qyt-") {
		return 0, 0, false
	}
	body := s[len("sk-"):]
	for _, p := range []string{"proj-", "svcacct-", "admin-"} {
		if strings.HasPrefix(body, p) {
			body = body[len(p):]
			break
		}
	}
	if len(body) < 32 || !mixedClasses(body) || looksLikePlaceholderToken(body) {
		return 0, 0, false
	}
	return start, end, true
}

// acceptAWSSecret keeps 40-character values next to an AWS secret-key name, except
// AWS's own documentation example (…EXAMPLEKEY), which is published and not a secret.
func acceptAWSSecret(text string, _ []int, start, end int) (int, int, bool) {
	v := text[start:end]
	if strings.HasSuffix(v, "EXAMPLEKEY") || !mixedClasses(v) {
		return 0, 0, false
	}
	return start, end, true
}

// acceptURLCredentials keeps the password of scheme://user:password@host unless it is a
// placeholder, a variable, or just the user name again (postgres:postgres@localhost is
// the stock development default, not a leak).
func acceptURLCredentials(text string, sm []int, start, end int) (int, int, bool) {
	user := text[sm[2]:sm[3]]
	pass := text[start:end]
	if strings.EqualFold(user, pass) || trivialValue(pass, 4) {
		return 0, 0, false
	}
	return start, end, true
}

// acceptEnv vets NAME=value: the name must say it holds a secret and the value must be a
// real value rather than empty, a placeholder, a reference or a path. The reported range
// is the value without its quotes.
//
// Two strictnesses. A shell-style line (an UPPER_SNAKE name, '=' with no space around
// it, as in .env files, "export" and "docker -e") is trusted: any non-trivial value
// counts, symbols and all. Anything else that merely has this shape — a query parameter,
// a properties file, and above all program code ("token = tokenID",
// `BearerToken = "Bearer"`) — counts only when the value itself looks generated.
func acceptEnv(text string, sm []int, start, end int) (int, int, bool) {
	return acceptAssignment(text, sm, start, end, false)
}

// acceptConfig vets "name: value" in YAML, JSON and similar ("api_key": "…",
// password: …). Colons are everywhere in prose and code, so this form is never trusted
// on its name alone: the value must look generated.
func acceptConfig(text string, sm []int, start, end int) (int, int, bool) {
	return acceptAssignment(text, sm, start, end, true)
}

func acceptAssignment(text string, sm []int, start, end int, colon bool) (int, int, bool) {
	name := text[sm[2]:sm[3]]
	if !secretName(name) {
		return 0, 0, false
	}
	quoted := false
	if end-start >= 2 {
		if q := text[start]; (q == '"' || q == '\'') && text[end-1] == q {
			start, end, quoted = start+1, end-1, true
		}
	}
	query := text[sm[0]] == '?' || text[sm[0]] == '&'
	if !quoted {
		// A query string or form body: the value ends where the next parameter starts.
		if i := nextParam(text[start:end], query); i >= 0 {
			end = start + i
		}
	}
	// A value inside a string literal ends at an escaped line break ("key=value\nabc=def").
	if i := strings.Index(text[start:end], `\n`); i >= 0 {
		end = start + i
	}
	v := text[start:end]
	core := strings.TrimRight(v, ".,;:)]}!?")
	shell := !colon && !query && text[sm[3]:sm[4]] == "=" && isUpperIdentifier(name)
	if trivialValue(v, 6) || codeLike(core, shell) || strings.EqualFold(v, name) {
		return 0, 0, false
	}
	if colon && !quoted && sm[5] < len(text) && strings.IndexByte(",})", text[sm[5]]) >= 0 && isIdentifier(core) {
		// {Key: SVCParamIPv4Hint, …}: a field in a composite literal holding a constant.
		return 0, 0, false
	}
	if !shell {
		// A bare "key" is a cache key, an idempotency key, a map key far more often than
		// a credential; under it a digest or a UUID is just that.
		if strings.EqualFold(name, "key") && (hexDigest(core) || uuidLike(core)) {
			return 0, 0, false
		}
		if strings.Contains(core, "%") {
			// Judge what a URL-encoded value decodes to: "val%20ue" is "val ue".
			if dec, err := url.QueryUnescape(core); err == nil {
				core = dec
			}
		}
		if !generated(core) || namesASecret(core) {
			return 0, 0, false
		}
	}
	return start, end, true
}

// namesASecret reports whether a value spells out what it stands for ("hostkey1",
// "caching_sha2_password", "fake-secret-key"): generated secrets do not contain words.
func namesASecret(v string) bool {
	lower := strings.ToLower(v)
	for _, w := range []string{"key", "token", "secret", "passw", "cred", "auth"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// nextParam returns where "&name=" (or, in a URL, the "#" fragment) starts in an
// unquoted value, or -1. Outside a URL '#' is part of the value: shells only start a
// comment at a word boundary.
func nextParam(v string, inURL bool) int {
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '#':
			if inURL {
				return i
			}
		case '&':
			j := i + 1
			for j < len(v) && (isASCIILetter(v[j]) || isASCIIDigit(v[j]) || v[j] == '_' || v[j] == '.' || v[j] == '-') {
				j++
			}
			if j > i+1 && j < len(v) && v[j] == '=' {
				return i
			}
		}
	}
	return -1
}

// generated reports whether a value looks machine-made rather than like a word, an
// identifier or a message: at least 8 characters, letters and digits both, no spaces,
// and enough distinct characters (Shannon entropy, scaled down for short values whose
// maximum is lower).
func generated(v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, " \t") || wordy(v) {
		return false
	}
	var letter, digit bool
	for i := 0; i < len(v); i++ {
		switch {
		case isASCIILetter(v[i]):
			letter = true
		case isASCIIDigit(v[i]):
			digit = true
		}
	}
	if !letter || !digit {
		return false
	}
	return shannon(v) >= min(3.0, 0.85*math.Log2(float64(len(v))))
}

func shannon(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// secretName reports whether an assignment's name says its value is a secret: the last
// word of the name (split at _ . - and camelCase) is KEY, SECRET, TOKEN, PASSWORD and the
// like, and is not one of the many keys and tokens that are not credentials (a primary
// key, a page token).
func secretName(name string) bool {
	words := nameWords(name)
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	// SECRET_KEY_BASE, API_TOKEN_VALUE, SIGNING_KEY_B64: a trailing word that only says
	// how the secret is encoded.
	switch last {
	case "BASE", "VALUE", "B64", "BASE64", "HEX", "RAW", "DATA", "STRING", "STR":
		if len(words) < 2 {
			return false
		}
		words = words[:len(words)-1]
		last = words[len(words)-1]
	}
	prev := ""
	if len(words) >= 2 {
		prev = words[len(words)-2]
	}
	switch last {
	case "KEY":
		switch prev {
		case "PUBLIC", "PUB", "PUBLISHABLE", "PRIMARY", "PARTITION", "SORT", "CACHE", "IDEMPOTENCY",
			"FOREIGN", "ROUTING", "OBJECT", "HASH", "RANGE", "SHARD", "DEDUP", "DEDUPLICATION", "MAP",
			"LOOKUP", "UNIQUE", "COMPOSITE", "RESOURCE", "ENTITY", "LOCK", "HOT", "SORTING", "GROUP",
			"MESSAGE", "ORDERING", "TRANSLATION", "I18N", "LABEL", "STORAGE", "REGISTRY", "QUEUE":
			return false
		}
		return true
	case "TOKEN", "TOKENS":
		switch prev {
		case "PAGE", "NEXT", "CONTINUATION", "CURSOR", "SYNC", "RESUME", "CSRF", "XSRF", "CANCEL",
			"CANCELLATION", "PUBLIC", "MAX", "MIN", "NUM", "COUNT":
			return false
		}
		return true
	case "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PWD", "PASS", "PASSPHRASE", "CREDENTIAL",
		"CREDENTIALS", "CREDS", "APIKEY", "SECRETKEY", "AUTHTOKEN", "ACCESSTOKEN", "PRIVATEKEY",
		"ACCESSKEY", "CLIENTSECRET", "AUTHKEY", "SIGNINGKEY", "MASTERKEY", "PAT":
		return true
	}
	for _, suffix := range []string{"PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "PASSPHRASE"} {
		if strings.HasSuffix(last, suffix) {
			return true
		}
	}
	return false
}

// nameWords upper-cases a name and splits it into words at '_', '.', '-' and at camelCase
// boundaries ("apiKey" → API, KEY; "DB_PASSWORD" → DB, PASSWORD).
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToUpper(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == '_' || r == '.' || r == '-':
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(rs[i-1]):
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// isPlaceholderWord reports whether a whole value (lower-cased, letters and digits only)
// is one that stands in for a secret in documentation and templates.
func isPlaceholderWord(s string) bool {
	switch s {
	case "changeme", "changeit", "placeholder", "example", "sample", "dummy", "test", "testing",
		"secret", "secrets", "password", "passwd", "pass", "pwd", "token", "apikey", "key", "none",
		"null", "nil", "true", "false", "empty", "redacted", "todo", "tbd", "fixme", "default",
		"value", "string", "notset", "unset", "undefined", "required", "optional", "disabled",
		"enabled", "mysecret", "mypassword", "mytoken", "mykey", "myapikey", "secretkey",
		"yourkey", "yourtoken", "yoursecret", "yourpassword", "yourapikey", "hidden", "masked",
		"omitted", "removed", "foobar", "foo", "bar", "baz",
		// Stock development credentials, printed in every quick-start guide.
		"postgres", "mysql", "guest", "admin", "root", "minioadmin", "rabbitmq", "redis":
		return true
	}
	return false
}

// containsPlaceholderFragment reports whether a lower-cased value contains a fragment
// that marks it as a stand-in wherever it occurs; a random secret contains none of them.
func containsPlaceholderFragment(lower string) bool {
	for _, f := range []string{"your_", "your-", "yourtoken", "yourkey", "yoursecret",
		"yourpassword", "yourapi", "<", ">", "changeme", "change_me", "change-me", "placeholder",
		"example", "xxxx", "****", "...", "…", "redacted", "replace_me", "replace-me",
		"replaceme", "insert_", "insert-", "dummy", "_here", "-here"} {
		if strings.Contains(lower, f) {
			return true
		}
	}
	return false
}

// trivialValue reports whether an assigned value cannot be a live secret: too short,
// empty after punctuation, one repeated character, a variable or template reference, a
// placeholder, our own redaction marker, a path or file name, a URL without credentials,
// or a short number.
func trivialValue(v string, minLen int) bool {
	// Sentence punctuation after a value ("set TOKEN=<token>.") decides nothing.
	core := strings.TrimRight(v, ".,;:)]}!?")
	if len(core) < minLen {
		return true
	}
	if !strings.ContainsFunc(core, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return true
	}
	if oneRune(core) {
		return true
	}
	switch {
	case strings.HasPrefix(core, "$"), // $VAR, ${VAR}, $(cmd), ${{ secrets.X }}
		strings.Contains(core, "${"), strings.Contains(core, "{{"), // templated: "prefix-${{ matrix.os }}"
		strings.HasPrefix(core, "%") && strings.HasSuffix(core, "%"),
		strings.HasPrefix(core, "{{"),
		strings.HasPrefix(core, "[REDACTED"),
		strings.HasPrefix(core, "/"), strings.HasPrefix(core, "./"), strings.HasPrefix(core, "../"),
		strings.HasPrefix(core, "~/"):
		return true
	}
	lower := strings.ToLower(core)
	if containsPlaceholderFragment(lower) {
		return true
	}
	squashed := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, lower)
	if isPlaceholderWord(squashed) {
		return true
	}
	// Lower-case words only, naming what should go there: "my-secret-token", "api_key".
	if onlyLowerWords(core) {
		for _, w := range []string{"secret", "token", "key", "password", "passwd", "pass", "api", "cred"} {
			if strings.Contains(lower, w) {
				return true
			}
		}
	}
	// Another variable's name: API_KEY=OPENAI_API_KEY in a mapping.
	if isUpperIdentifier(core) && strings.Contains(core, "_") {
		return true
	}
	if allDigits(core) && len(core) < 8 {
		return true
	}
	// Keyboard and alphabet runs (abcdef, 123456, qwerty) and one unit repeated
	// (test1234test1234, abcabcabc) are what people type when they need any value.
	for _, run := range []string{"abcdefghijklmnopqrstuvwxyz", "0123456789", "qwertyuiopasdfghjklzxcvbnm"} {
		if strings.Contains(run, lower) {
			return true
		}
	}
	if repeated(lower) {
		return true
	}
	if i := strings.Index(lower, "://"); i > 0 && !strings.Contains(lower[i:], "@") {
		return true
	}
	if fileName(lower) {
		return true
	}
	return false
}

// codeLike recognises a program expression on the right of '=' ("os.getenv(",
// "process.env.API_KEY", "[]byte{0x00,", "&Claims{", "ed25519.PrivateKey"): the
// assignment names a secret but does not contain one. On a shell-style line only the
// unmistakable forms count, since a password may well start with '[' or contain a dot.
func codeLike(v string, shell bool) bool {
	if v == "" {
		return false
	}
	if !shell && strings.IndexByte("[&*{(", v[0]) >= 0 {
		return true
	}
	i := 0
	for i < len(v) && (v[i] == '_' || v[i] == '.' || isASCIILetter(v[i]) || (i > 0 && isASCIIDigit(v[i]))) {
		i++
	}
	if i == 0 || !isASCIILetter(v[0]) && v[0] != '_' {
		return false
	}
	ident, rest := v[:i], v[i:]
	if strings.HasPrefix(rest, "(") || !shell && (strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, "{")) {
		return true
	}
	// A dotted path of identifiers (process.env.API_KEY, settings.token). In shell style
	// only without digits: "Summer.2024" or "ab3.Cd9" there is a password.
	if rest != "" || !strings.Contains(ident, ".") || shell && strings.ContainsAny(ident, "0123456789") {
		return false
	}
	for _, part := range strings.Split(ident, ".") {
		if part == "" || isASCIIDigit(part[0]) {
			return false
		}
	}
	return true
}

// looksLikePlaceholderToken catches documentation stand-ins behind a real prefix:
// sk-qyt-xxxxxxxxxxxxxxxxxxxx, qyt_at_YOUR_ACCESS_TOKEN, sk-proj-……
func looksLikePlaceholderToken(body string) bool {
	lower := strings.ToLower(body)
	if containsPlaceholderFragment(lower) || strings.Contains(lower, "your") {
		return true
	}
	distinct := map[rune]struct{}{}
	for _, r := range body {
		distinct[r] = struct{}{}
	}
	return len(distinct) < 6
}

// mixedClasses reports whether s has upper case, lower case and digits, as any random
// base62/base64 string of this length does.
func mixedClasses(s string) bool {
	c := classesOf(s)
	return c.upper && c.lower && c.digit
}

// charClasses says which kinds of ASCII characters a string holds.
type charClasses struct{ upper, lower, digit, other bool }

func classesOf(s string) charClasses {
	var cc charClasses
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'A' && c <= 'Z':
			cc.upper = true
		case c >= 'a' && c <= 'z':
			cc.lower = true
		case c >= '0' && c <= '9':
			cc.digit = true
		default:
			cc.other = true
		}
	}
	return cc
}

func oneRune(s string) bool {
	for _, r := range s {
		if r != rune(s[0]) {
			return false
		}
	}
	return true
}

func onlyLowerWords(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isUpperIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c == '_' || i > 0 && isASCIIDigit(c)) {
			return false
		}
	}
	return s != ""
}

func isIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isASCIILetter(c) || c == '_' || i > 0 && isASCIIDigit(c)) {
			return false
		}
	}
	return s != ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isASCIIDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// fileName recognises a bare file reference: KEY_FILE-like values such as "id_ed25519.pub"
// or "service-account.json".
func fileName(lower string) bool {
	dot := strings.LastIndexByte(lower, '.')
	if dot <= 0 {
		return false
	}
	switch lower[dot+1:] {
	case "pem", "json", "key", "crt", "cer", "p12", "pfx", "pub", "txt", "env", "yaml", "yml", "jks", "keystore", "gpg", "asc":
	default:
		return false
	}
	for i := 0; i < dot; i++ {
		c := lower[i]
		if !(c >= 'a' && c <= 'z' || isASCIIDigit(c) || c == '_' || c == '-' || c == '.' || c == '/') {
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isASCIIDigit(c byte) bool  { return c >= '0' && c <= '9' }

// acceptPrivateKey trims a footerless key block whose last "line" is really the first word
// of the prose after it ("…ND9\nThe report says"): a base64 line ends at a line end, the
// end of a JSON string or the end of the text, never mid-line.
func acceptPrivateKey(text string, _ []int, start, end int) (int, int, bool) {
	m := text[start:end]
	if strings.Contains(m, "-----END") || end == len(text) {
		return start, end, true
	}
	switch text[end] {
	case '\n', '\r', '"', '\'', '\\':
		return start, end, true
	}
	cut := max(strings.LastIndex(m, "\n"), strings.LastIndex(m, `\n`))
	if cut < 0 {
		return start, end, true
	}
	kept := strings.TrimRight(m[:cut], " \t\r")
	kept = strings.TrimSuffix(kept, `\r`)
	// Keep the whole match if cutting would leave no key material: the header line plus
	// at least one full base64 line must remain.
	if strings.LastIndex(kept, "-----") > len(kept)-40 {
		return start, end, true
	}
	return start, start + len(kept), true
}

// repeated reports whether s is one shorter unit written two or more times.
func repeated(s string) bool {
	for k := 1; k <= len(s)/2; k++ {
		if len(s)%k == 0 && strings.Repeat(s[:k], len(s)/k) == s {
			return true
		}
	}
	return false
}

// wordy reports whether v is lower-case words and numbers joined by separators
// ("rotate_every_90_days", "oidc-pkce-s256-with-par", "read-write-2025-q3"): a name or a
// slug, not generated material.
func wordy(v string) bool {
	parts := strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("_-.:/", r) })
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if len(p) > 12 {
			return false
		}
		// letters then digits (v2, s256, q3), all lower case, or digits alone
		i := 0
		for i < len(p) && p[i] >= 'a' && p[i] <= 'z' {
			i++
		}
		for i < len(p) && isASCIIDigit(p[i]) {
			i++
		}
		if i != len(p) {
			return false
		}
	}
	return true
}

// hexDigest reports whether v is lower- or upper-case hex of a digest's length (MD5,
// SHA-1/git, SHA-256, SHA-512), optionally with an "algo:" prefix.
func hexDigest(v string) bool {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	switch len(v) {
	case 32, 40, 64, 128:
	default:
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(isASCIIDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// uuidLike reports whether v has the 8-4-4-4-12 hex shape of a UUID.
func uuidLike(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(isASCIIDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
