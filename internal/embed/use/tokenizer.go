package use

import (
	"strings"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

// separator is sentencepiece's word boundary mark (U+2581), which stands for a space.
const separator = '▁'

// reservedPieces are the first vocabulary ids (unknown, <s>, </s>, three extras) that the
// tokenizer never produces by matching; id 0 is what an unmatched character becomes.
const reservedPieces = 6

// unknownID is the id of a character no piece starts with.
const unknownID = 0

// Tokenizer splits text into sentencepiece ids exactly as the model's JavaScript tokenizer
// does (@energetic-ai/embeddings 0.2.0, the same as
// @tensorflow-models/universal-sentence-encoder's): NFKC, spaces to U+2581 with one in
// front, then the highest-scoring segmentation into vocabulary pieces (a Viterbi pass over
// a trie of the pieces), consecutive unknown characters merged into one unknown id.
//
// Two of that implementation's quirks are kept on purpose, because the model's reference
// outputs come from it: a best score of exactly 0 counts as "no path yet", and the
// backtrack steps over a piece by its length in UTF-16 code units (JavaScript's
// String.length) while the lattice counts code points.
type Tokenizer struct {
	root   *trieNode
	u16len []int // per id, the piece's length in UTF-16 code units
}

type trieNode struct {
	children map[rune]*trieNode
	end      bool
	score    float64
	id       int32
	runes    int // length of the piece ending here, in code points
}

// NewTokenizer builds the trie over vocab (ids are indices).
func NewTokenizer(vocab []Piece) *Tokenizer {
	t := &Tokenizer{root: &trieNode{}, u16len: make([]int, len(vocab))}
	for id, p := range vocab {
		// At least 1: an empty piece would stall the backtrack (none exists in the
		// shipped vocabulary).
		t.u16len[id] = max(1, len(utf16.Encode([]rune(p.Text))))
		if id < reservedPieces {
			continue
		}
		n := t.root
		rs := []rune(p.Text)
		for i, r := range rs {
			c := n.children[r]
			if c == nil {
				if n.children == nil {
					n.children = make(map[rune]*trieNode)
				}
				c = &trieNode{runes: i + 1}
				n.children[r] = c
			}
			n = c
		}
		if len(rs) > 0 {
			// A later duplicate wins, as in the JavaScript trie.
			n.end, n.score, n.id = true, p.Score, int32(id)
		}
	}
	return t
}

type candidate struct {
	start int
	runes int
	score float64
	id    int32
}

// Encode returns text's ids.
func (t *Tokenizer) Encode(text string) []int32 {
	s := norm.NFKC.String(text)
	if s == "" {
		return nil
	}
	syms := []rune(string(separator) + strings.ReplaceAll(s, " ", string(separator)))
	n := len(syms)
	// ends[e] lists the pieces that end at symbol e, in increasing start order (the order
	// the JavaScript version visits them in).
	ends := make([][]candidate, n+1)
	for i := range n {
		node := t.root.children[syms[i]]
		found := false
		for j := i; node != nil; j++ {
			if node.end {
				ends[i+node.runes] = append(ends[i+node.runes], candidate{start: i, runes: node.runes, score: node.score, id: node.id})
				found = true
			}
			if j+1 >= n {
				break
			}
			node = node.children[syms[j+1]]
		}
		if !found {
			ends[i+1] = append(ends[i+1], candidate{start: i, runes: 1, score: 0, id: unknownID})
		}
	}
	best := make([]float64, n+1)
	words := make([]int32, n+1)
	for e := 0; e <= n; e++ {
		for _, c := range ends[e] {
			sc := c.score + best[e-c.runes]
			if best[e] == 0 || sc >= best[e] {
				best[e] = sc
				words[e] = c.id
			}
		}
	}
	var rev []int32
	for i := n; i > 0; i -= t.u16len[words[i]] {
		rev = append(rev, words[i])
	}
	out := make([]int32, 0, len(rev))
	prevUnknown := false
	for _, id := range rev {
		if !(prevUnknown && id == unknownID) {
			out = append(out, id)
		}
		prevUnknown = id == unknownID
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
