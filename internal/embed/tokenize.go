package embed

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tokenizer mirrors how GloVe's vocabulary was built (lowercased words, hyphenated
// compounds kept whole when frequent) while staying vocabulary-driven: every decision
// that could go either way ("e-mail" or "e" + "mail", "readMemory" or "read" +
// "memory") tries the longer form first and splits only when the table does not know it.

// forEachWord looks up every word of text in order and calls emit for each one found.
func forEachWord(text string, lookup func(string) (int32, bool), emit func(int32)) {
	r := resolver{lookup: lookup, emit: emit}
	start := -1
	for i, c := range text {
		if isWordRune(c) || isJoiner(c) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			r.chunk(text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		r.chunk(text[start:])
	}
}

func isWordRune(c rune) bool {
	return c < utf8.RuneSelf && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') ||
		c >= utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.IsMark(c))
}

// isJoiner: apostrophes and hyphens join a word only between word runes; at the ends of a
// chunk they are quotes and dashes and get trimmed.
func isJoiner(c rune) bool {
	switch c {
	case '\'', '-', '\u2019', '\u2018', '\u02bc', '\u2010', '\u2011':
		return true
	}
	return false
}

// ascii-fy the joiners so the rest only deals with ' and -.
var joinerReplacer = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u02bc", "'", "\u2010", "-", "\u2011", "-")

// clitics are English contractions. GloVe's tokenizer split them off ("do" + "n't") but
// this package's vocabulary has none of those pieces, so they are expanded to the word
// they stand for instead; "'s" (possessive or "is") is dropped: SIF would weigh "is"
// close to zero anyway.
var clitics = []struct{ suffix, word string }{
	{"n't", "not"},
	{"'re", "are"},
	{"'ve", "have"},
	{"'ll", "will"},
	{"'m", "am"},
	{"'d", "would"},
	{"'s", ""},
}

// irregular negations whose stem is not the base word once "n't" is cut.
var negStems = map[string]string{"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}

type resolver struct {
	lookup func(string) (int32, bool)
	emit   func(int32)
}

func (r *resolver) chunk(c string) {
	if strings.ContainsRune(c, '\u2019') || strings.ContainsRune(c, '\u2018') || strings.ContainsRune(c, '\u02bc') ||
		strings.ContainsRune(c, '\u2010') || strings.ContainsRune(c, '\u2011') {
		c = joinerReplacer.Replace(c)
	}
	c = strings.Trim(c, "'-")
	if c == "" {
		return
	}
	for _, cl := range clitics {
		n := len(cl.suffix)
		if len(c) > n && strings.EqualFold(c[len(c)-n:], cl.suffix) {
			base := c[:len(c)-n]
			if cl.suffix == "n't" {
				if s, ok := negStems[strings.ToLower(base)]; ok {
					base = s
				}
			}
			r.resolve(strings.Trim(base, "'-"))
			if cl.word != "" {
				r.word(cl.word)
			}
			return
		}
	}
	r.resolve(c)
}

// resolve emits piece as one word if known, else its parts.
func (r *resolver) resolve(piece string) {
	if piece == "" {
		return
	}
	if r.word(piece) {
		return
	}
	if strings.Contains(piece, "-") {
		for part := range strings.SplitSeq(piece, "-") {
			r.resolve(part)
		}
		return
	}
	if strings.Contains(piece, "'") {
		// "o'neill" → "oneill" if known, else "o" + "neill".
		if r.word(strings.ReplaceAll(piece, "'", "")) {
			return
		}
		for part := range strings.SplitSeq(piece, "'") {
			r.resolve(part)
		}
		return
	}
	if parts := splitCamel(piece); len(parts) > 1 {
		for _, p := range parts {
			r.word(p)
		}
		return
	}
	if folded, ok := foldDiacritics(strings.ToLower(piece)); ok {
		r.word(folded)
	}
}

// word looks w up lowercased and emits it when known.
func (r *resolver) word(w string) bool {
	idx, ok := r.lookup(strings.ToLower(w))
	if ok {
		r.emit(idx)
	}
	return ok
}

// splitCamel splits identifiers such as "readMemory" or "HTTPServer" ("HTTP", "Server")
// so code names written in notes still contribute their words.
func splitCamel(s string) []string {
	var parts []string
	runes := []rune(s)
	start := 0
	for i := 1; i < len(runes); i++ {
		prev, cur := runes[i-1], runes[i]
		lowerToUpper := unicode.IsLower(prev) && unicode.IsUpper(cur)
		acronymEnd := unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
		if lowerToUpper || acronymEnd {
			parts = append(parts, string(runes[start:i]))
			start = i
		}
	}
	return append(parts, string(runes[start:]))
}

// foldDiacritics maps Latin letters with diacritics to their base letters ("café" →
// "cafe"): the vocabulary is ASCII. It reports false when nothing changed.
func foldDiacritics(s string) (string, bool) {
	if isASCII(s) {
		return s, false
	}
	var b strings.Builder
	changed := false
	for _, c := range s {
		f := foldRune(c)
		if f != c {
			changed = true
		}
		b.WriteRune(f)
	}
	return b.String(), changed
}

func foldRune(c rune) rune {
	switch {
	case strings.ContainsRune("àáâãäåāăą", c):
		return 'a'
	case strings.ContainsRune("çćĉċč", c):
		return 'c'
	case strings.ContainsRune("ďđ", c):
		return 'd'
	case strings.ContainsRune("èéêëēĕėęě", c):
		return 'e'
	case strings.ContainsRune("ĝğġģ", c):
		return 'g'
	case strings.ContainsRune("ìíîïĩīĭįı", c):
		return 'i'
	case strings.ContainsRune("ñńņňŉ", c):
		return 'n'
	case strings.ContainsRune("òóôõöøōŏő", c):
		return 'o'
	case strings.ContainsRune("ŕŗř", c):
		return 'r'
	case strings.ContainsRune("śŝşšș", c):
		return 's'
	case strings.ContainsRune("ţťțŧ", c):
		return 't'
	case strings.ContainsRune("ùúûüũūŭůűų", c):
		return 'u'
	case strings.ContainsRune("ýÿŷ", c):
		return 'y'
	case strings.ContainsRune("źżž", c):
		return 'z'
	case c == 'ł':
		return 'l'
	}
	return c
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
