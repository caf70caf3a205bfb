package knowledge

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/relayroom/relayroom/db"
)

// Recall ranks its candidates by pg_trgm's word_similarity(query, title || ' ' || body);
// rr_recall (migration 000044) leaves that number to the server when the query and the
// entry are both ASCII, because making each candidate's trigrams was about half of the
// function's Postgres CPU (docs/performance.md, "Recall's ranking in the server").
// wordSimilarity computes the same float4, for ASCII strings only: pg_trgm's word
// characters and case folding follow the database's locale beyond ASCII, so any other
// text is still ranked by pg_trgm in the database.

// isASCII reports whether s is ASCII only, the text wordSimilarity handles.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// A trigram of ASCII text is three symbols of 37 (the padding space, a–z, 0–9), coded
// in 16 bits.
// symbol is the code of a lower-cased word byte or the padding space.
func symbol(c byte) uint16 {
	switch {
	case c >= 'a' && c <= 'z':
		return uint16(c-'a') + 1
	case c >= 'A' && c <= 'Z':
		return uint16(c-'A') + 1
	case c >= '0' && c <= '9':
		return uint16(c-'0') + 27
	}
	return 0
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// trigrams appends the trigrams of s as pg_trgm makes them, in order: every maximal run of
// ASCII letters and digits is a word, lower-cased, padded with two spaces before and one
// after, and each three consecutive bytes of the padded word is a trigram. Duplicates
// stay: their positions matter to the similarity.
func trigrams(dst []uint16, s string) []uint16 {
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		// A window of three symbols sliding over "  " + word + " ".
		var a, b uint16
		for k := i; k <= j; k++ {
			var c uint16
			if k < j {
				c = symbol(s[k])
			}
			dst = append(dst, (a*37+b)*37+c)
			a, b = b, c
		}
		i = j
	}
	return dst
}

// smlr is pg_trgm's similarity of an extent: count shared trigrams over the union of the
// query's distinct trigrams (n1) and the extent's (n2), in float4 as pg_trgm computes it.
func smlr(count, n1, n2 int) float32 {
	return float32(count) / float32(n1+n2-count)
}

// similarity computes word similarities against one query, reusing its tables from one
// text to the next (recall ranks about 60 candidates a call).
type similarity struct {
	query []uint16 // the query's trigrams
	// An open-addressing table numbering the current text's distinct trigrams: keys holds
	// code+1 (0 is empty), ids the numbers; its size is a power of two at least twice the
	// trigrams it may hold.
	keys []uint16
	ids  []int32
	text []uint16
	pos  []int32 // the number of each text trigram
	last []int32 // each numbered trigram's last position in the extent, -1 outside
}

func newSimilarity(q string) *similarity { return &similarity{query: trigrams(nil, q)} }

// number returns the number of trigram code in the table, giving it next if it is new.
func (m *similarity) number(code uint16, next int32) (int32, bool) {
	mask := uint32(len(m.keys) - 1)
	for h := (uint32(code) * 2654435761) >> 7 & mask; ; h = (h + 1) & mask {
		switch m.keys[h] {
		case code + 1:
			return m.ids[h], false
		case 0:
			m.keys[h], m.ids[h] = code+1, next
			return next, true
		}
	}
}

// wordSimilarity is pg_trgm's word_similarity(q, text) for ASCII q and text.
func wordSimilarity(q, text string) float32 { return newSimilarity(q).of(text) }

// of is pg_trgm's word_similarity(query, text) for an ASCII query and text: the greatest
// similarity between the query's set of trigrams and any contiguous extent of the text's
// trigrams. It follows pg_trgm's own search (iterate_word_similarity): each text trigram
// that the query holds ends a candidate extent, whose start is moved right while that
// raises the similarity; the result is the best similarity seen, not always the exact
// maximum over all extents, and reproducing that search is what makes the numbers equal.
func (m *similarity) of(text string) float32 {
	if len(m.query) == 0 {
		return 0
	}
	m.text = trigrams(m.text[:0], text)
	size := 64
	for size < 2*(len(m.query)+len(m.text)) {
		size *= 2
	}
	if cap(m.keys) < size {
		m.keys, m.ids = make([]uint16, size), make([]int32, size)
	} else {
		m.keys = m.keys[:size]
		clear(m.keys)
	}
	// Number the distinct trigrams: the query's first (those are "found"), then the text's.
	n := int32(0)
	for _, c := range m.query {
		if _, added := m.number(c, n); added {
			n++
		}
	}
	n1 := n
	m.pos = m.pos[:0]
	for _, c := range m.text {
		id, added := m.number(c, n)
		if added {
			n++
		}
		m.pos = append(m.pos, id)
	}
	m.last = m.last[:0]
	for range n {
		m.last = append(m.last, -1)
	}
	pos, last := m.pos, m.last
	var (
		best      float32
		count, n2 int
		lower     = -1
	)
	for i, id := range pos {
		found := id < n1
		if lower >= 0 || found {
			if last[id] < 0 {
				n2++
				if found {
					count++
				}
			}
			last[id] = int32(i)
		}
		if !found {
			continue
		}
		if lower == -1 {
			lower, n2 = i, 1
		}
		cur := smlr(count, int(n1), n2)
		// Try each later start of the extent ending here, keeping the best.
		tcount, tn2, prev := count, n2, lower
		for tl := lower; tl <= i; tl++ {
			if s := smlr(tcount, int(n1), tn2); s > cur {
				cur, n2, lower, count = s, tn2, tl, tcount
			}
			if tid := pos[tl]; last[tid] == int32(tl) {
				tn2--
				if tid < n1 {
					tcount--
				}
			}
		}
		best = max(best, cur)
		// Trigrams left of the new start are out of the extent.
		for tl := prev; tl < lower; tl++ {
			if tid := pos[tl]; last[tid] == int32(tl) {
				last[tid] = -1
			}
		}
	}
	return best
}

// recalled is one of recall's candidates with its score.
type recalled struct {
	db.KnowledgeRecallRow
	score float32
}

// rankRecall is what rr_recall did with its candidates before migration 000044: score each
// by word_similarity(query, title || ' ' || body) × confidence (float4, as pg_trgm and
// Postgres compute it), keep those at or above the floor, best first, ties by id (uuid
// order is byte order), at most limit. The similarity comes from pg_trgm where the
// candidate is not ASCII (KnowledgeRecall computes it there), from wordSimilarity
// otherwise.
func rankRecall(query string, cands []db.KnowledgeRecallRow, floor float32, limit int) []recalled {
	out := make([]recalled, 0, len(cands))
	var m *similarity
	for _, c := range cands {
		sim := c.Similarity
		if c.Ascii != nil && *c.Ascii {
			if m == nil {
				m = newSimilarity(query)
			}
			sim = m.of(c.Title + " " + c.Body)
		}
		if score := sim * c.Confidence; score >= floor {
			out = append(out, recalled{KnowledgeRecallRow: c, score: score})
		}
	}
	slices.SortFunc(out, func(a, b recalled) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	return out[:min(limit, len(out))]
}
