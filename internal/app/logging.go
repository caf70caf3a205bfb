package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/httpapi"
)

// WithRequestID returns ctx carrying the request id that every log line of the request shows.
func WithRequestID(ctx context.Context, id string) context.Context {
	return httpapi.WithRequestID(ctx, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string { return httpapi.RequestID(ctx) }

// requestIDHandler adds request_id to every record logged with a request's context, so a
// request's lines can be found together without each caller remembering to add it.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" && !hasAttr(r, "request_id") {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// hasAttr reports whether r has a top-level attribute named key: a line whose caller gave
// the request id itself got it twice, which strict JSON readers refuse.
func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// NewLogger writes JSON lines to w at the given level. Every line passes through
// redactHandler, so no credential reaches it whichever call site logged it.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(requestIDHandler{redactHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})}})
}

// redactHandler masks credentials in a record's message and in every string, error and
// Stringer attribute (groups included) before the record is written. Paths are not the
// only way in: a header value, an error quoting its input or a request id can carry one.
type redactHandler struct{ slog.Handler }

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	msg := RedactCredentials(r.Message)
	clean := msg == r.Message
	if clean {
		r.Attrs(func(a slog.Attr) bool {
			clean = plainAttr(a)
			return clean
		})
	}
	if clean {
		// The common case (every request line): nothing to mask, so the record is written
		// as it came instead of being copied attribute by attribute.
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactHandler{h.Handler.WithAttrs(red)}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{h.Handler.WithGroup(name)}
}

// plainAttr reports whether a is written unchanged by redactAttr, judged without
// calling anything of a's value: a string without a credential, a group of plain
// attributes, or a value redactAttr passes through (numbers, times, plain structs). An
// error, a Stringer or a LogValuer is never plain: the text it gives is only known by
// calling it, and redactAttr must read the very text that is written.
func plainAttr(a slog.Attr) bool {
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		return RedactCredentials(s) == s
	case slog.KindGroup:
		for _, ga := range a.Value.Group() {
			if !plainAttr(ga) {
				return false
			}
		}
		return true
	case slog.KindLogValuer:
		return false
	case slog.KindAny:
		switch a.Value.Any().(type) {
		case error, fmt.Stringer:
			return false
		}
	}
	return true
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, RedactCredentials(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		default:
			return slog.Attr{Key: a.Key, Value: v}
		}
		if r := RedactCredentials(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// credentialPattern finds a credential in decoded text, whatever the case of its prefix:
// the prefixes auth issues (agent keys, connect codes, CI tokens), every qyt_xx_ token kind
// (OAuth access and refresh tokens, and kinds added later), and qyt- alone, so that an agent
// key whose "sk" was mangled still has its body masked. The body is base62.
var credentialPattern = regexp.MustCompile(`(?i)(` + strings.Join([]string{
	regexp.QuoteMeta(auth.AgentKeyPrefix),
	regexp.QuoteMeta(auth.ConnectCodePrefix),
	regexp.QuoteMeta(auth.CITokenPrefix),
	`qyt_[a-z]{2}_`,
	`qyt-`,
}, "|") + `)[0-9a-z]+`)

// maxDecodeRounds bounds how many layers of percent-encoding RedactCredentials peels. Text
// still holding escapes after that many layers is not logged at all: nothing legitimate is
// encoded so deeply, and decoding further would let one request cost quadratic time.
const maxDecodeRounds = 8

// tooDeeplyEncoded replaces text that maxDecodeRounds could not fully decode.
const tooDeeplyEncoded = "[redacted: too deeply percent-encoded]"

// secretQueryParams are the query parameters whose values are credentials without a
// credential's prefix: an attachment link's signature works as a key to the file until it
// expires, an OAuth code is exchanged for a token, and a password, token or key a client
// put in a URL is its mistake but would be the operator's log's secret. Compared without
// case, the name decoded (the handler's own reading decodes it too).
var secretQueryParams = []string{"sig", "signature", "code", "password", "passwd", "pwd", "pass", "secret",
	"client_secret", "token", "access_token", "refresh_token", "id_token", "key", "api_key", "apikey", "auth", "authorization"}

// secretQueryParam reports whether a raw query key names a secret.
func secretQueryParam(rawKey string) bool {
	k := rawKey
	if strings.IndexByte(k, '%') >= 0 || strings.IndexByte(k, '+') >= 0 {
		var err error
		if k, err = url.QueryUnescape(k); err != nil {
			return true // a key that does not decode cannot be judged: its value is not logged
		}
	}
	for _, name := range secretQueryParams {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// LoggedURI is a request's path and query as the request log writes them: the values of
// secret parameters (secretQueryParams) replaced by "[redacted]" (RedactCredentials then
// masks the prefixed credentials anywhere).
func LoggedURI(u *url.URL) string {
	if u.RawQuery == "" {
		return u.RequestURI()
	}
	pairs := strings.Split(u.RawQuery, "&")
	masked := false
	for i, pair := range pairs {
		if key, _, ok := strings.Cut(pair, "="); ok && secretQueryParam(key) {
			pairs[i], masked = key+"=[redacted]", true
		}
	}
	if !masked {
		return u.RequestURI()
	}
	return u.EscapedPath() + "?" + strings.Join(pairs, "&")
}

// MaxHeaderBytes bounds a request's line and headers (Go's default is 1 MiB): the longest
// URL a client sends is an authorization request's, a few KiB.
const MaxHeaderBytes = 64 << 10

// maxLoggedPath bounds the path a request's log line holds: an unauthenticated 404 with a
// long URL wrote a log line of twice its size (masking lengthens a credential).
const maxLoggedPath = 2 << 10

// loggedPath is a request's URI as its log line holds it: credentials masked first (a
// credential cut in two would not be recognised), then cut at maxLoggedPath.
func loggedPath(u *url.URL) string {
	p := RedactCredentials(LoggedURI(u))
	if len(p) <= maxLoggedPath {
		return p
	}
	cut := maxLoggedPath
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", p[:cut], len(p))
}

// RedactCredentials masks every credential in s, keeping its prefix (lower case) so a
// reader knows which kind was there. Credentials are found after percent-decoding (as many
// layers as there are, up to maxDecodeRounds, mixed freely) and case-insensitively, and
// masked in the original text: the rest of s keeps its own encoding.
func RedactCredentials(s string) string {
	plain := strings.IndexByte(s, '%') < 0
	if plain && !mayHoldCredential(s) {
		return s // the common case: nothing to decode, no credential's shape
	}
	if plain {
		// Nothing to decode (every threads URL: its connect code is in the path): the
		// matches' offsets are s's own, with no per-byte map to build.
		return maskMatches(s, credentialPattern.FindAllStringSubmatchIndex(s, -1), func(i int) int { return i }, func(i int) int { return i + 1 }, s)
	}
	units, ok := percentDecode(s)
	if !ok {
		return tooDeeplyEncoded
	}
	decoded := make([]byte, len(units))
	for i, u := range units {
		decoded[i] = u.b
	}
	if !mayHoldCredential(string(decoded)) {
		return s
	}
	return maskMatches(s, credentialPattern.FindAllSubmatchIndex(decoded, -1), func(i int) int { return units[i].start }, func(i int) int { return units[i].end }, string(decoded))
}

// maskMatches replaces in s each credential matched in decoded (the text the pattern ran
// on) by its lower-case prefix and "[redacted]"; start and end map a byte of decoded to
// the span of s it came from.
func maskMatches(s string, matches [][]int, start, end func(int) int, decoded string) string {
	if matches == nil {
		return s
	}
	var b strings.Builder
	last := 0 // in s
	for _, m := range matches {
		from, to := start(m[0]), end(m[1]-1)
		b.WriteString(s[last:from])
		b.WriteString(strings.ToLower(decoded[m[2]:m[3]]))
		b.WriteString("[redacted]")
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}

// decodedByte is one byte of decoded text and the span of the original text it came from.
type decodedByte struct {
	b          byte
	start, end int
}

// percentDecode decodes s layer by layer (%2571 is %71 is q), remembering where each
// decoded byte came from. ok is false when escapes remain after maxDecodeRounds.
func percentDecode(s string) (units []decodedByte, ok bool) {
	units = make([]decodedByte, len(s))
	for i := 0; i < len(s); i++ {
		units[i] = decodedByte{s[i], i, i + 1}
	}
	for round := 0; round <= maxDecodeRounds; round++ {
		w, changed := 0, false
		for r := 0; r < len(units); w++ {
			if units[r].b == '%' && r+2 < len(units) && isHex(units[r+1].b) && isHex(units[r+2].b) {
				u := decodedByte{unhex(units[r+1].b)<<4 | unhex(units[r+2].b), units[r].start, units[r+2].end}
				units[w] = u
				r += 3
				changed = true
				continue
			}
			units[w] = units[r]
			r++
		}
		units = units[:w]
		if !changed {
			return units, true
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// mayHoldCredential reports whether credentialPattern can match in s, without running
// it: every match holds "qyt" in any case followed by "-" and a letter or digit, or by "_",
// two letters, "_" and a letter or digit. A byte outside ASCII right after "qyt-" or
// "qyt_" is a maybe: under (?i) the pattern's letters also match ſ and the Kelvin sign.
// Text without that shape, such as a path whose credential is already masked
// ("qyt_cc_[redacted]", written again by the logger's redaction), skips the pattern.
func mayHoldCredential(s string) bool {
	for i := 0; i+4 < len(s); i++ {
		if s[i]|0x20 != 'q' || s[i+1]|0x20 != 'y' || s[i+2]|0x20 != 't' {
			continue
		}
		rest := s[i+3:]
		switch rest[0] {
		case '-':
			if alnumOrWide(rest[1]) {
				return true
			}
		case '_':
			tail := rest[1:min(len(rest), 5)]
			if strings.IndexFunc(tail, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0 {
				return true
			}
			if len(tail) == 4 && isLetter(tail[0]) && isLetter(tail[1]) && tail[2] == '_' && alnumOrWide(tail[3]) {
				return true
			}
		}
	}
	return false
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// alnumOrWide: c may start what the pattern's (?i)[0-9a-z] matches.
func alnumOrWide(c byte) bool { return '0' <= c && c <= '9' || isLetter(c) || c >= utf8.RuneSelf }

// rejectionInterval is how often refused requests are summarised per address.
const rejectionInterval = 10 * time.Second

// maxRejectionAddresses bounds the addresses counted apart in one interval; the refusals
// of any further address are counted together under otherAddresses.
const maxRejectionAddresses = 1000

const otherAddresses = "other"

// rejectionLog keeps refused requests (401 and 429: no credential, a wrong one, a blocked
// caller) from flooding the log: the first refusal from an address in an interval is
// logged in full, the others are counted, and when the interval ends one line per address
// gives the count. A flood of 3,000 wrong keys in 10 s writes two lines, not 3,000.
type rejectionLog struct {
	log      *slog.Logger
	interval time.Duration

	mu     sync.Mutex
	since  time.Time
	counts map[string]map[int]int // address → status → refusals after the first
	timer  *time.Timer
}

func newRejectionLog(log *slog.Logger, interval time.Duration) *rejectionLog {
	return &rejectionLog{log: log, interval: interval, counts: map[string]map[int]int{}}
}

// Log writes a refused request's line (the attributes line returns, followed by extra) if
// it is the first from address in this interval, and otherwise counts it.
func (l *rejectionLog) Log(ctx context.Context, address string, status int, line func(extra ...slog.Attr) []slog.Attr) {
	l.mu.Lock()
	byStatus, seen := l.counts[address]
	if !seen && len(l.counts) >= maxRejectionAddresses {
		address = otherAddresses
		byStatus, seen = l.counts[address]
	}
	if seen {
		byStatus[status]++
		l.mu.Unlock()
		return
	}
	l.counts[address] = map[int]int{}
	if l.timer == nil {
		l.since = time.Now()
		l.timer = time.AfterFunc(l.interval, l.Flush)
	}
	l.mu.Unlock()
	// The same "request" line as any other, naming the address its count will be under.
	l.log.LogAttrs(ctx, slog.LevelInfo, "request", line(slog.String("address", address),
		slog.String("note", "further refusals from this address are counted for "+l.interval.String()))...)
}

// Flush writes the counts of the current interval and starts a new one.
func (l *rejectionLog) Flush() {
	l.mu.Lock()
	counts, since := l.counts, l.since
	l.counts = map[string]map[int]int{}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	for address, byStatus := range counts {
		n := 0
		statuses := make([]any, 0, len(byStatus))
		for status, c := range byStatus {
			n += c
			statuses = append(statuses, slog.Int(strconv.Itoa(status), c))
		}
		if n == 0 {
			continue
		}
		l.log.Info("requests refused", "address", address, "count", n, slog.Group("statuses", statuses...),
			"since", since.UTC().Format(time.RFC3339), "seconds", int(time.Since(since).Round(time.Second).Seconds()))
	}
}

// LibraryLogger is the process's default logger for serve: libraries that log through
// slog's default (the OAuth server library announces each route it registers) write the
// same JSON lines, their lines below WARN at DEBUG: their chatter is not the operator's
// business at the default level, their warnings and errors are. So is the OAuth
// library's WARN for each request it refuses with a 4xx (a code mistyped, a grant
// replayed): a client's mistake, which the request's own access line already records
// and sums up per address; one line per refusal let anyone write the operator's log at
// will.
func LibraryLogger(log *slog.Logger) *slog.Logger {
	return slog.New(libraryHandler{log.Handler()})
}

type libraryHandler struct{ slog.Handler }

func (h libraryHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, libraryLevel(l))
}

func (h libraryHandler) Handle(ctx context.Context, r slog.Record) error {
	l := libraryLevel(r.Level)
	if l == slog.LevelWarn && r.Message == "request error" && clientRefusal(r) {
		l = slog.LevelDebug
		if !h.Handler.Enabled(ctx, l) {
			return nil
		}
	}
	if l != r.Level {
		r = r.Clone()
		r.Level = l
	}
	return h.Handler.Handle(ctx, r)
}

// clientRefusal says whether the OAuth library's "request error" record is a 4xx
// answer: its status_code attribute, or none (the authorization endpoint's refusals,
// which redirect to the client with the error).
func clientRefusal(r slog.Record) bool {
	client := true
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "status_code" {
			client = a.Value.Kind() == slog.KindInt64 && a.Value.Int64() < 500
			return false
		}
		return true
	})
	return client
}

func (h libraryHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return libraryHandler{h.Handler.WithAttrs(as)}
}

func (h libraryHandler) WithGroup(name string) slog.Handler {
	return libraryHandler{h.Handler.WithGroup(name)}
}

func libraryLevel(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}
