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

// trigrams appends the trigrams of s as pg_trgm makes them, in order: every maximal run of
// ASCII letters and digits is a word, lower-cased, padded with two spaces before and one
// after, and each three consecutive bytes of the padded word is a trigram (packed in a
// uint32). Duplicates stay: their positions matter to wordSimilarity.
func trigrams(dst []uint32, s string) []uint32 {
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		// The padded word is "  " + lower(word) + " ": a sliding window of three bytes.
		a, b := uint32(' '), uint32(' ')
		for k := i; k <= j; k++ {
			c := uint32(' ')
			if k < j {
				c = uint32(lowerByte(s[k]))
			}
			dst = append(dst, a<<16|b<<8|c)
			a, b = b, c
		}
		i = j
	}
	return dst
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// smlr is pg_trgm's similarity of an extent: count shared trigrams over the union of the
// query's distinct trigrams (n1) and the extent's (n2), in float4 as pg_trgm computes it.
func smlr(count, n1, n2 int) float32 {
	return float32(count) / float32(n1+n2-count)
}

// wordSimilarity is pg_trgm's word_similarity(q, text) for ASCII q and text: the greatest
// similarity between the query's set of trigrams and any contiguous extent of the text's
// trigrams. It follows pg_trgm's own search (iterate_word_similarity): each text trigram
// that the query holds ends a candidate extent, whose start is moved right while that
// raises the similarity; the result is the best similarity seen, not always the exact
// maximum over all extents, and reproducing that search is what makes the numbers equal.
func wordSimilarity(q, text string) float32 {
	qt := trigrams(make([]uint32, 0, len(q)+8), q)
	if len(qt) == 0 {
		return 0
	}
	tt := trigrams(make([]uint32, 0, len(text)+8), text)
	// Number the distinct trigrams: the query's first (found), then the text's others.
	ids := make(map[uint32]int32, len(qt)+len(tt))
	for _, t := range qt {
		if _, ok := ids[t]; !ok {
			ids[t] = int32(len(ids))
		}
	}
	n1 := len(ids)
	pos := make([]int32, len(tt)) // the id of each text trigram
	for i, t := range tt {
		id, ok := ids[t]
		if !ok {
			id = int32(len(ids))
			ids[t] = id
		}
		pos[i] = id
	}
	found := func(id int32) bool { return int(id) < n1 }
	last := make([]int32, len(ids)) // each trigram's last position in the extent, -1 outside
	for i := range last {
		last[i] = -1
	}
	var (
		best         float32
		count, n2    int
		lower, upper = -1, -1
	)
	for i, id := range pos {
		if lower >= 0 || found(id) {
			if last[id] < 0 {
				n2++
				if found(id) {
					count++
				}
			}
			last[id] = int32(i)
		}
		if !found(id) {
			continue
		}
		upper = i
		if lower == -1 {
			lower, n2 = i, 1
		}
		cur := smlr(count, n1, n2)
		// Try each later start of the extent, keeping the one of greatest similarity.
		tcount, tn2, prev := count, n2, lower
		for tl := lower; tl <= upper; tl++ {
			if s := smlr(tcount, n1, tn2); s > cur {
				cur, n2, lower, count = s, tn2, tl, tcount
			}
			if tid := pos[tl]; last[tid] == int32(tl) {
				tn2--
				if found(tid) {
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
	for _, c := range cands {
		sim := c.Similarity
		if c.Ascii != nil && *c.Ascii {
			sim = wordSimilarity(query, c.Title+" "+c.Body)
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
