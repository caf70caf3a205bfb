package secrets

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A view is a transformed copy of a text that remembers where each of its bytes came
// from, so that a secret found in the copy is redacted in the original.
//
// Two views are scanned besides the original:
//
//   - the normalised view: Unicode NFKC (fullwidth "ｇｈｐ＿" is "ghp_", "＝" is "="),
//     invisible format characters removed (zero-width space and joiners, soft hyphen,
//     word joiner, byte order mark, bidi controls, variation selectors), every other
//     kind of space folded to ' ' and Unicode line separators to '\n'. It is what a
//     reader sees, so every rule applies to it.
//   - the joined view: the normalised view with line breaks removed between two token
//     characters (letters, digits and _-+/=.), and so are runs of spaces that were not
//     ASCII spaces (a non-breaking space inside a token). It reassembles a token split
//     over lines; see scanJoined for which of its findings count.
type view struct {
	text string
	// start[i] and end[i] are the original byte range that produced text[i]. A byte
	// copied unchanged maps to one byte; every byte of a changed NFKC segment maps to the
	// whole segment, so a secret is redacted conservatively, never partly. nil means the
	// identity mapping (the view is the original).
	start, end []int32
	// joins are the positions in text where the joined view removed a break: text[j-1]
	// and text[j] were separated in the original.
	joins []int
}

func (v *view) origStart(i int) int {
	if v.start == nil {
		return i
	}
	return int(v.start[i])
}

func (v *view) origEnd(i int) int {
	if v.end == nil {
		return i + 1
	}
	return int(v.end[i])
}

// toOriginal maps a finding's range in the view to the original text: from the start
// of the first byte's source to the end of the last one's.
func (v *view) toOriginal(start, end int) (int, int) {
	return v.origStart(start), v.origEnd(end - 1)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// invisible reports whether r renders as nothing and so may be dropped from inside a
// token without a reader noticing: format characters (Cf: U+200B zero-width space,
// U+00AD soft hyphen, U+200C/D joiners, U+2060 word joiner, U+FEFF, bidi controls, tag
// characters), variation selectors and the other default-ignorable code points
// (combining grapheme joiner, Hangul fillers).
func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// lineSeparator reports whether r ends a line in Unicode but is not '\n'.
func lineSeparator(r rune) bool { return r == 0x85 || r == 0x2028 || r == 0x2029 }

// normalise builds the normalised view. Text that is plain ASCII is its own normalised
// view (NFKC leaves ASCII alone and it holds no invisible characters).
func normalise(text string) *view {
	if isASCII(text) {
		return &view{text: text}
	}
	out := make([]byte, 0, len(text))
	start := make([]int32, 0, len(text))
	end := make([]int32, 0, len(text))
	var it norm.Iter
	it.InitString(norm.NFKC, text)
	for prev := 0; !it.Done(); {
		seg := it.Next()
		pos := it.Pos()
		if string(seg) == text[prev:pos] && !hasSpecial(seg) {
			// Unchanged: byte for byte.
			for i := range seg {
				out = append(out, seg[i])
				start, end = append(start, int32(prev+i)), append(end, int32(prev+i+1))
			}
			prev = pos
			continue
		}
		for i := 0; i < len(seg); {
			r, w := utf8.DecodeRune(seg[i:])
			var b []byte
			switch {
			case r == utf8.RuneError && w <= 1:
				b = seg[i : i+1] // invalid UTF-8 passes through untouched
			case invisible(r):
			case lineSeparator(r):
				b = []byte{'\n'}
			case r >= utf8.RuneSelf && unicode.IsSpace(r):
				b = []byte{' '}
			default:
				b = seg[i : i+w]
			}
			for _, c := range b {
				out = append(out, c)
				start, end = append(start, int32(prev)), append(end, int32(pos))
			}
			i += w
		}
		prev = pos
	}
	if string(out) == text {
		return &view{text: text}
	}
	return &view{text: string(out), start: start, end: end}
}

// hasSpecial reports whether an NFKC-stable segment still holds something normalise
// rewrites: an invisible character, a Unicode space or a line separator.
func hasSpecial(seg []byte) bool {
	for i := 0; i < len(seg); {
		if seg[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, w := utf8.DecodeRune(seg[i:])
		if invisible(r) || lineSeparator(r) || unicode.IsSpace(r) {
			return true
		}
		i += w
	}
	return false
}

// isTokenByte reports whether c can be part of a token that someone split: base64,
// base64url, JWT dots, '=' padding.
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '+' || c == '/' || c == '=' || c == '.'
}

// join builds the joined view from the normalised one, or returns nil when it would
// join nothing. A whitespace run between two token bytes is removed when it holds a line
// break, or when every byte of it came from a non-ASCII space (a non-breaking space
// splitting "ghp_…" reads as one word) — unless the fragment on either side is an
// ordinary word (see wordLike). Joining "my key" to "sk-qyt-…" on the next line would
// erase the word boundary the token's rule needs, and joining a token to the word that
// starts the next line would hide where the token ends. A token split on purpose has no
// ordinary word after the break (random material is not one), and its first fragment, if
// word-like, is the start of one of the rules' own prefixes ("ghp", "xoxb", "AKIA"),
// which prefixes lists. A full stop ends a sentence, so "days." counts as the word
// "days" (while "…J9." of a JWT split at its dot stays token material).
func join(v *view, original string, prefixes []string) *view {
	t := v.text
	var out []byte
	var start, end []int32
	var joins []int
	last := 0 // t[last:] not yet copied
	for i := 0; i < len(t); i++ {
		if !isSpaceByte(t[i]) || i == 0 || !isTokenByte(t[i-1]) {
			continue
		}
		j := i
		lineBreak, allOdd := false, true
		for j < len(t) && isSpaceByte(t[j]) {
			switch t[j] {
			case '\n', '\r', '\v', '\f':
				lineBreak = true
			}
			if t[j] != ' ' || original[v.origStart(j)] == ' ' {
				allOdd = false
			}
			j++
		}
		if j == len(t) || !isTokenByte(t[j]) || !(lineBreak || allOdd) ||
			ordinaryWord(strings.TrimRight(t[fragmentStart(t, i):i], "."), prefixes) || wordLike(t[j:fragmentEnd(t, j)]) {
			i = j - 1
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(t))
			start, end = make([]int32, 0, len(t)), make([]int32, 0, len(t))
		}
		out = append(out, t[last:i]...)
		for k := last; k < i; k++ {
			start, end = append(start, int32(v.origStart(k))), append(end, int32(v.origEnd(k)))
		}
		joins = append(joins, len(out))
		last = j
		i = j - 1
	}
	if out == nil {
		return nil
	}
	out = append(out, t[last:]...)
	for k := last; k < len(t); k++ {
		start, end = append(start, int32(v.origStart(k))), append(end, int32(v.origEnd(k)))
	}
	return &view{text: string(out), start: start, end: end, joins: joins}
}

func fragmentStart(t string, i int) int {
	for i > 0 && isTokenByte(t[i-1]) {
		i--
	}
	return i
}

func fragmentEnd(t string, j int) int {
	for j < len(t) && isTokenByte(t[j]) {
		j++
	}
	return j
}

// wordLike reports whether a fragment is an ordinary word: two or more letters, only
// the first possibly upper case ("the", "Use", "const"). Random token material almost
// never looks like that; "API", "v2", "q" and "eyJhbGci" do not count as words.
func wordLike(f string) bool {
	if len(f) < 2 || !isASCIILetter(f[0]) {
		return false
	}
	for i := 1; i < len(f); i++ {
		if f[i] < 'a' || f[i] > 'z' {
			return false
		}
	}
	return true
}

// ordinaryWord is wordLike minus the beginnings of the rules' prefixes.
func ordinaryWord(f string, prefixes []string) bool {
	if !wordLike(f) {
		return false
	}
	lower := asciiLower(f)
	for _, p := range prefixes {
		if strings.HasPrefix(p, lower) {
			return false
		}
	}
	return true
}

// trimJoined cuts a joined-view finding back to its last join when what follows that
// join does not look like token material (randomLooking), or is a name followed by '='
// or ':' (the next line of an env file): a greedy token pattern would otherwise swallow
// the identifier that starts the next line. The price: the last fragment of a token split
// into pieces shorter than 8 characters stays visible; everything before it is redacted.
func (v *view) trimJoined(start, end int) int {
	last := -1
	for _, j := range v.joins {
		if j > start && j < end {
			last = j
		}
	}
	if last < 0 {
		return end
	}
	if !randomLooking(v.text[last:end]) || end < len(v.text) && (v.text[end] == '=' || v.text[end] == ':') {
		return last
	}
	return end
}

// randomLooking reports whether a fragment looks generated: at least 8 characters, two
// of upper case, lower case and digits, and not a camelCase or PascalCase identifier
// ("accessTokenData").
func randomLooking(f string) bool {
	if len(f) < 8 {
		return false
	}
	cc := classesOf(f)
	classes := 0
	for _, b := range []bool{cc.upper, cc.lower, cc.digit} {
		if b {
			classes++
		}
	}
	return classes >= 2 && (cc.digit || cc.other || !camelCase(f))
}

// camelCase reports whether f is words of lower-case letters, each after the first
// starting with one upper-case letter ("accessTokenData", "TokenStore").
func camelCase(f string) bool {
	for i := 0; i < len(f); i++ {
		if !isASCIILetter(f[i]) {
			return false
		}
		if i > 0 && f[i] >= 'A' && f[i] <= 'Z' && f[i-1] >= 'A' && f[i-1] <= 'Z' {
			return false
		}
	}
	return true
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// spansJoin reports whether [start,end) holds bytes from both sides of a removed break.
func (v *view) spansJoin(start, end int) bool {
	for _, j := range v.joins {
		if j > start && j < end {
			return true
		}
		if j >= end {
			break
		}
	}
	return false
}

// joinedLines returns the [start,end) of each line of the joined view that holds a
// join, in order, without its line break.
func (v *view) joinedLines() [][2]int {
	var out [][2]int
	for _, j := range v.joins {
		if len(out) > 0 && j <= out[len(out)-1][1] {
			continue // same line as the previous join
		}
		start := strings.LastIndexByte(v.text[:j], '\n') + 1
		end := len(v.text)
		if k := strings.IndexByte(v.text[j:], '\n'); k >= 0 {
			end = j + k
		}
		out = append(out, [2]int{start, end})
	}
	return out
}
