package secrets

import (
	"encoding/base64"
	"strings"
)

// Private key bodies without their "-----BEGIN … PRIVATE KEY-----" line. Deleting the
// header is the obvious way past a header-based rule, and a key body is the secret, the
// header only a label. A block of base64 counts as a key body when:
//
//   - it decodes to the start of a private key: the OpenSSH "openssh-key-v1\0" magic, or
//     DER whose outer SEQUENCE begins with a small INTEGER (the version of PKCS#1,
//     PKCS#8, SEC1 and DSA keys) or with an AlgorithmIdentifier followed by an OCTET
//     STRING (encrypted PKCS#8). Certificates (SEQUENCE, then a tbsCertificate starting
//     [0]) and public keys (AlgorithmIdentifier, then a BIT STRING) do not. This needs
//     minKeyBodyChars characters and takes any line width, one line included.
//   - or, when its start was cut off too, it is laid out as PEM is, at least
//     minPEMLines lines of exactly 64 characters, and decodes to binary rather than to
//     text (base64 of prose is not a key).
//
// A block directly under a BEGIN line that does not say PRIVATE (a certificate, a public
// key, a PGP message or signature) is public material and is skipped.
const (
	minKeyBodyChars = 40
	pemLineChars    = 64
	minPEMLines     = 3
	// binaryBelow: base64 of text decodes to (almost) all printable bytes; key material,
	// random bytes, to about 40 % printable.
	binaryBelow = 0.85
)

func isB64Byte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

// b64Chunk is one line of a block: text[start:end], '=' padding included.
type b64Chunk struct{ start, end int }

// scanKeyBodies finds base64 blocks that are private key bodies (see above).
func scanKeyBodies(text string, out []candidate) []candidate {
	for i := 0; i < len(text); {
		if !isB64Byte(text[i]) || i > 0 && (isB64Byte(text[i-1]) || strings.IndexByte("=_-.\\", text[i-1]) >= 0) {
			i++
			continue
		}
		run := i
		for run < len(text) && isB64Byte(text[run]) {
			run++
		}
		if run-i < minKeyBodyChars {
			i = run // a word, not a block: nothing to decode
			continue
		}
		chunks := b64Block(text, i)
		last := chunks[len(chunks)-1]
		if keyBody(text, chunks) {
			out = append(out, candidate{Finding{Kind: KindPrivateKey, Start: chunks[0].start, End: last.end}, priorityOf(KindPrivateKey)})
		}
		i = max(last.end, i+1)
	}
	return out
}

// b64Block reads base64 lines from text[i:], joined by real line breaks or the \n
// escapes of a JSON string, each possibly indented.
func b64Block(text string, i int) []b64Chunk {
	var chunks []b64Chunk
	for {
		j := i
		for j < len(text) && isB64Byte(text[j]) {
			j++
		}
		for n := 0; n < 2 && j < len(text) && text[j] == '='; n++ {
			j++
		}
		chunks = append(chunks, b64Chunk{i, j})
		if text[j-1] == '=' {
			return chunks // padding ends the data
		}
		k := pemBreak(text, j)
		if k == j || k >= len(text) || !isB64Byte(text[k]) || !wholeLine(text, k) {
			return chunks
		}
		i = k
	}
}

// wholeLine reports whether the line starting at text[k] is one base64 line: base64 up
// to two '=', then the end of the line (real, escaped or the end of a JSON string), and
// not an ordinary word ("that", "Placeholders") that happens to start the next line.
func wholeLine(text string, k int) bool {
	j := k
	for j < len(text) && isB64Byte(text[j]) {
		j++
	}
	if wordLike(text[k:j]) {
		return false
	}
	for n := 0; n < 2 && j < len(text) && text[j] == '='; n++ {
		j++
	}
	for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
		j++
	}
	return j == len(text) || pemBreak(text, j) != j || strings.IndexByte("\r\"'", text[j]) >= 0
}

// pemBreak skips one line break inside a key (blanks, then "\n", "\r\n" or the escaped
// "\\n"/"\\r\\n", then blanks) and returns where the next line starts, or i if there is
// none.
func pemBreak(text string, i int) int {
	j := i
	for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
		j++
	}
	switch {
	case strings.HasPrefix(text[j:], "\r\n"):
		j += 2
	case strings.HasPrefix(text[j:], "\n"):
		j++
	default:
		k := j
		for k < len(text) && text[k] == '\\' {
			k++
		}
		if k == j {
			return i
		}
		if strings.HasPrefix(text[k:], "r\\") {
			k += 2
			for k < len(text) && text[k] == '\\' {
				k++
			}
		}
		if !strings.HasPrefix(text[k:], "n") {
			return i
		}
		j = k + 1
	}
	for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
		j++
	}
	return j
}

func keyBody(text string, chunks []b64Chunk) bool {
	if underPublicHeader(text, chunks[0].start) {
		return false
	}
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(strings.TrimRight(text[c.start:c.end], "="))
	}
	data := b.String()
	if allHex(data) {
		return false // digests and ids, one per line: hex is not a key's base64
	}
	data = data[:len(data)/4*4]
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(raw) == 0 {
		return false
	}
	switch derKind(raw) {
	case derPrivate:
		return true
	case derPublic:
		return false
	}
	if strings.HasPrefix(string(raw), "openssh-key-v1\x00") {
		return true
	}
	full := 0
	for _, c := range chunks {
		if c.end-c.start == pemLineChars {
			full++
		} else {
			break
		}
	}
	return full >= minPEMLines && printableShare(raw) < binaryBelow
}

// underPublicHeader reports whether the block at text[start] sits under a BEGIN line
// that does not announce a private key, past any armour headers ("Version: …") and
// blank lines between them.
func underPublicHeader(text string, start int) bool {
	before := text[:start]
	for {
		before = strings.TrimRight(before, " \t\r\n")
		before = strings.TrimSuffix(strings.TrimSuffix(before, `\n`), `\r`)
		i := strings.LastIndexAny(before, "\n")
		if k := strings.LastIndex(before, `\n`); k > i {
			i = k + 1
		}
		line := before[i+1:]
		if strings.HasPrefix(line, "-----BEGIN ") && strings.HasSuffix(line, "-----") {
			return !strings.Contains(line, "PRIVATE")
		}
		name, _, ok := strings.Cut(line, ": ")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return false
		}
		before = before[:i+1]
	}
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isASCIIDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

type derClass int

const (
	derUnknown derClass = iota
	derPrivate
	derPublic
)

// derKind classifies the start of a DER structure (see the comment at the top).
func derKind(b []byte) derClass {
	if len(b) < 2 || b[0] != 0x30 {
		return derUnknown
	}
	outerLen, hdr, ok := derLength(b[1:])
	if !ok || outerLen < 8 {
		return derUnknown
	}
	// Trailing data past the declared end is not DER; a cut-off body is fine.
	if len(b) > 1+hdr+outerLen+2 {
		return derUnknown
	}
	in := b[1+hdr:]
	if len(in) < 3 {
		return derUnknown
	}
	switch in[0] {
	case 0x02: // INTEGER version
		if in[1] == 1 && in[2] <= 3 {
			return derPrivate
		}
	case 0x30: // SEQUENCE: tbsCertificate or AlgorithmIdentifier
		l, h, ok := derLength(in[1:])
		if !ok || len(in) < 2+h {
			return derUnknown
		}
		if in[1+h] == 0xa0 { // [0] version of a certificate
			return derPublic
		}
		if next := 1 + h + l; next < len(in) {
			switch in[next] {
			case 0x04:
				return derPrivate // EncryptedPrivateKeyInfo
			case 0x03:
				return derPublic // SubjectPublicKeyInfo
			}
		}
	}
	return derUnknown
}

// derLength reads a DER length (short form, or long form up to 3 bytes) and returns it
// with the number of bytes it took.
func derLength(b []byte) (int, int, bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	if b[0] < 0x80 {
		return int(b[0]), 1, true
	}
	n := int(b[0] & 0x7f)
	if n == 0 || n > 3 || len(b) < 1+n {
		return 0, 0, false
	}
	l := 0
	for _, c := range b[1 : 1+n] {
		l = l<<8 | int(c)
	}
	return l, 1 + n, true
}

func printableShare(b []byte) float64 {
	p := 0
	for _, c := range b {
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\r' || c == '\t' {
			p++
		}
	}
	return float64(p) / float64(len(b))
}
