// Package text decides whether a string is text the service can store. PostgreSQL's
// text and jsonb hold valid UTF-8 without NUL (U+0000) and nothing else: a string that
// breaks either rule fails inside the database, where it would surface as an internal
// error. Every edge (tool arguments, URL parts, HTTP bodies and form fields) refuses such
// input first, with the endpoint's own validation error. CheckJSON also refuses an object
// that names one member twice, which two readers may read as two different documents.
package text

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The problems a string can have. Their text is a predicate, so that a caller can write
// `argument "body" must not contain …` or `?part= must be …`.
var (
	ErrNUL     = errors.New("must not contain the NUL character (U+0000)")
	ErrInvalid = errors.New("must be valid UTF-8 text (no invalid bytes, overlong encodings or lone surrogates)")
	// ErrSyntax is CheckJSON's answer for bytes that are not JSON; callers that parse
	// the document themselves report their own error instead.
	ErrSyntax = errors.New("is not valid JSON")
	// ErrDuplicate is CheckJSON's answer for an object that names one member twice.
	// encoding/json keeps the last, another reader (a gateway that checks the call, a
	// log) may keep the first: the two would act on different calls (RFC 8259 §4 leaves
	// such an object's meaning open), so it is refused.
	ErrDuplicate = errors.New("must not be given twice")
)

// MaxDepth bounds the nesting CheckJSON follows, the same as encoding/json's own limit.
const MaxDepth = 10000

// Check reports whether s is storable text. utf8.ValidString refuses invalid bytes,
// overlong encodings (such as C0 80 or E0 80 80) and encoded surrogates.
// ErrHidden is CheckShown's answer for a character that does not show as itself.
var ErrHidden = errors.New("must not hold control or formatting characters (a line break, a right-to-left override, a zero-width space…)")

// CheckShown refuses, beyond Check, a name that would show other than it is: a control
// character, or a format character such as the right-to-left override that shows
// "invoice\u202Etxt.exe" as "invoiceexe.txt". For file names and the like.
func CheckShown(s string) error {
	if err := Check(s); err != nil {
		return err
	}
	if strings.IndexFunc(s, Hidden) >= 0 {
		return ErrHidden
	}
	return nil
}

// Hidden reports whether r does not show as itself: a control character, or a format
// character such as the right-to-left override.
func Hidden(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

func Check(s string) error {
	if !utf8.ValidString(s) {
		return ErrInvalid
	}
	if strings.IndexByte(s, 0) >= 0 {
		return ErrNUL
	}
	return nil
}

// CheckJSON checks every string of a JSON document, object keys included, on its raw
// bytes: encoding/json silently turns invalid UTF-8 and lone surrogate escapes into
// U+FFFD, so after decoding the fault can no longer be seen. On a bad string it returns
// the string's path (`limit`, `lesson.title`, `tags[1]`; "" for the root; a bad key
// is named by the path of the key itself) and ErrNUL or ErrInvalid; on a member named
// twice in one object, that member's path and ErrDuplicate; on bytes it cannot
// walk, ErrSyntax. It is not a full JSON validator (it skips over numbers loosely):
// callers decode the document with encoding/json as well.
func CheckJSON(raw []byte) (path string, err error) {
	return check(&scanner{data: raw})
}

// check walks the whole document of s.
func check(s *scanner) (path string, err error) {
	s.space()
	if err := s.value(0); err != nil {
		return s.path, err
	}
	s.space()
	if s.pos != len(s.data) {
		return "", ErrSyntax
	}
	return "", nil
}

// Join extends a path by an object member, as CheckJSON names paths.
func Join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Index extends a path by an array item, as CheckJSON names paths.
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// scanner walks a JSON document once, checking strings as it goes.
type scanner struct {
	data []byte
	pos  int
	path string // where the first problem was found
	// segs is where the scan is: the path is spelled out only for a problem. Spelled at
	// every level, a document of deeply nested arrays cost the square of its depth: one
	// 3.6 MB request held a core for 22 s and a gigabyte of memory.
	segs []seg
	// namesOnly: report only a member named twice (CheckNames), not a string's text.
	namesOnly bool
}

// seg is one step of a path: an object member's name, or an array item's index.
type seg struct {
	name  string
	index int // -1 for a member
}

// where spells the scan's path as Join and Index do.
func (s *scanner) where() string {
	p := ""
	for _, g := range s.segs {
		if g.index < 0 {
			p = Join(p, g.name)
		} else {
			p = Index(p, g.index)
		}
	}
	return p
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if depth > MaxDepth || s.pos >= len(s.data) {
		return ErrSyntax
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"' && s.namesOnly:
		return s.skip()
	case c == '"':
		_, err := s.str(true)
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return ErrSyntax
}

func (s *scanner) object(depth int) error {
	s.pos++ // {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	var seen names
	for {
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return ErrSyntax
		}
		start := s.pos
		key, err := s.str(false)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				// The key is named as written, its escapes kept: decoding it is what failed.
				s.path = Join(s.where(), string(s.data[start+1:s.pos-1]))
			}
			return err
		}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return ErrSyntax
		}
		if !seen.add(key) {
			s.path = Join(s.where(), key)
			return ErrDuplicate
		}
		s.pos++
		s.space()
		s.segs = append(s.segs, seg{name: key, index: -1})
		err = s.value(depth)
		s.segs = s.segs[:len(s.segs)-1]
		if err != nil {
			return err
		}
		if done, err := s.after('}'); done || err != nil {
			return err
		}
	}
}

// names are an object's member names read so far. Most objects have a few, which a scan
// finds faster than a map; past fewNames a map keeps an object of a hundred thousand
// members (a 4 MiB body can hold them) from costing a scan per member.
type names struct {
	few  []string
	many map[string]struct{}
}

const fewNames = 16

// add records name and reports whether it was new.
func (n *names) add(name string) bool {
	if n.many != nil {
		if _, ok := n.many[name]; ok {
			return false
		}
		n.many[name] = struct{}{}
		return true
	}
	if slices.Contains(n.few, name) {
		return false
	}
	if len(n.few) < fewNames {
		n.few = append(n.few, name)
		return true
	}
	n.many = make(map[string]struct{}, 2*fewNames)
	for _, f := range n.few {
		n.many[f] = struct{}{}
	}
	n.many[name] = struct{}{}
	return true
}

func (s *scanner) array(depth int) error {
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.space()
		s.segs = append(s.segs, seg{index: i})
		err := s.value(depth)
		s.segs = s.segs[:len(s.segs)-1]
		if err != nil {
			return err
		}
		if done, err := s.after(']'); done || err != nil {
			return err
		}
	}
}

// after reads what follows a member or an item: a comma, or the closing bracket (done).
func (s *scanner) after(closing byte) (done bool, err error) {
	s.space()
	if s.pos >= len(s.data) {
		return false, ErrSyntax
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, nil
	case closing:
		s.pos++
		return true, nil
	}
	return false, ErrSyntax
}

func (s *scanner) literal(word string) error {
	if !strings.HasPrefix(string(s.data[s.pos:min(len(s.data), s.pos+len(word))]), word) {
		return ErrSyntax
	}
	s.pos += len(word)
	return nil
}

// number skips a number; its grammar is encoding/json's business, only its end matters.
func (s *scanner) number() error {
	start := s.pos
	for s.pos < len(s.data) && strings.IndexByte("+-.0123456789eE", s.data[s.pos]) >= 0 {
		s.pos++
	}
	if s.pos == start {
		return ErrSyntax
	}
	return nil
}

// CheckNames reports the first object of a JSON document that names one member twice,
// with that member's path and ErrDuplicate, and nothing about the text of its strings:
// for a document whose parts are checked by different readers (a JSON-RPC message, whose
// tool arguments CheckJSON checks on their own, as the tool's). On bytes it cannot walk it
// returns ErrSyntax.
func CheckNames(raw []byte) (path string, err error) {
	return check(&scanner{data: raw, namesOnly: true})
}

// skip reads past a string value without decoding it: CheckNames compares names only,
// and decoding every value cost a 20,000-character write 55 µs and 85 KB a request.
func (s *scanner) skip() error {
	s.pos++ // opening quote
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			return nil
		case c < 0x20:
			return ErrSyntax
		case c == '\\':
			s.pos += 2 // the escaped byte; a \u's four digits are read as ordinary bytes
		default:
			s.pos++
		}
	}
	return ErrSyntax
}

// str reads a string literal, returning its decoded value (for keys). The first text
// problem is reported (with the scan's path when record is set: a value's; a key's is
// named by its caller); the literal is still read to its end so that a key's raw form
// can be shown.
func (s *scanner) str(record bool) (string, error) {
	s.pos++ // opening quote
	var out strings.Builder
	var problem error
	fail := func(err error) {
		if problem == nil {
			problem = err
		}
	}
	for {
		if s.pos >= len(s.data) {
			return "", ErrSyntax
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if problem != nil && !s.namesOnly {
				if record {
					s.path = s.where()
				}
				return "", problem
			}
			return out.String(), nil
		case c < 0x20:
			return "", ErrSyntax
		case c == '\\':
			r, err := s.escape()
			if errors.Is(err, ErrSyntax) {
				return "", err
			}
			if err != nil {
				fail(err)
				continue
			}
			out.WriteRune(r)
		case c < utf8.RuneSelf:
			out.WriteByte(c)
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n == 1 {
				fail(ErrInvalid)
			}
			out.WriteRune(r)
			s.pos += n
		}
	}
}

// escape decodes one escape sequence at s.pos (the backslash). \u0000 is NUL; a
// surrogate escape must be a high one followed by a low one.
func (s *scanner) escape() (rune, error) {
	if s.pos+1 >= len(s.data) {
		return 0, ErrSyntax
	}
	c := s.data[s.pos+1]
	if c != 'u' {
		s.pos += 2
		switch c {
		case '"', '\\', '/':
			return rune(c), nil
		case 'b':
			return '\b', nil
		case 'f':
			return '\f', nil
		case 'n':
			return '\n', nil
		case 'r':
			return '\r', nil
		case 't':
			return '\t', nil
		}
		return 0, ErrSyntax
	}
	r, ok := s.hex4(s.pos + 2)
	if !ok {
		return 0, ErrSyntax
	}
	s.pos += 6
	switch {
	case r == 0:
		return 0, ErrNUL
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, ErrInvalid // a low surrogate with no high one before it
	case r >= 0xD800 && r <= 0xDBFF:
		if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
			lo, ok := s.hex4(s.pos + 2)
			if !ok {
				return 0, ErrSyntax
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				s.pos += 6
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
			}
		}
		return 0, ErrInvalid // a high surrogate with no low one after it
	}
	return r, nil
}

func (s *scanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[at : at+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// JSONSize is how many bytes encoding/json writes for s as a JSON string, its quotes
// included: a control character, and <, > and & (escaped for HTML), take six; a quote,
// a backslash and the control characters with a short escape (\n, \t…) two. A text of 100,000 control characters is 600 KB once encoded: bounds
// on what an answer holds count these bytes, not the characters.
func JSONSize(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		default:
			n++
		}
	}
	// U+2028 and U+2029 are escaped too (\u2028: six bytes for their three).
	return n + 3*(strings.Count(s, "\u2028")+strings.Count(s, "\u2029"))
}

// MaxEcho bounds how much of a caller's value an error repeats (a method name, a project
// reference pasted wrong): enough to recognise it, never the megabyte that was sent.
const MaxEcho = 200

// Cut is s cut to at most max bytes, at a character's start, with "…" after it when it
// was cut: for a value an error echoes, which must not grow with whatever the caller sent.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
