package embed

import (
	"encoding/json"
	"os"
	"sort"
	"testing"
)

// Embedder-only retrieval on the rooms paraphrase set (internal/rooms/testdata,
// docs/rooms.md "Paraphrase retrieval"): every query ranks all entries by cosine, no
// database, no lexical half. docs/embeddings.md's table holds these numbers; the floors
// are the Universal Sentence Encoder's measured hit@3 less about two pairs.
const (
	useMinHit3Tune    = 0.53 // measured 47/84
	useMinHit3Heldout = 0.53 // measured 24/41
)

func TestParaphrasesEmbedderOnly(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../rooms/testdata/paraphrases.json")
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Pairs []struct{ Entry, Query, Split string }
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	entries, queries := make([]string, len(set.Pairs)), make([]string, len(set.Pairs))
	for i, p := range set.Pairs {
		entries[i], queries[i] = p.Entry, p.Query
	}
	for _, e := range []Embedder{testUSE(), testBuiltin()} {
		ev, qv := embedAll(t, e, entries...), embedAll(t, e, queries...)
		hits := map[string]*[3]int{"tune": {}, "heldout": {}} // n, hit@1, hit@3
		for i, p := range set.Pairs {
			rank := make([]int, len(ev))
			for j := range rank {
				rank[j] = j
			}
			sort.SliceStable(rank, func(a, b int) bool { return Cosine(qv[i], ev[rank[a]]) > Cosine(qv[i], ev[rank[b]]) })
			h := hits[p.Split]
			h[0]++
			if rank[0] == i {
				h[1]++
			}
			if rank[0] == i || rank[1] == i || rank[2] == i {
				h[2]++
			}
		}
		for _, split := range []string{"tune", "heldout"} {
			h := hits[split]
			t.Logf("%s %s: hit@1 %d, hit@3 %d of %d (%.2f)", e.Name(), split, h[1], h[2], h[0], float64(h[2])/float64(h[0]))
		}
		if e.Name() != USEName {
			continue
		}
		if h := hits["tune"]; float64(h[2])/float64(h[0]) < useMinHit3Tune {
			t.Errorf("tune hit@3 %d of %d, below %.2f", h[2], h[0], useMinHit3Tune)
		}
		if h := hits["heldout"]; float64(h[2])/float64(h[0]) < useMinHit3Heldout {
			t.Errorf("held-out hit@3 %d of %d, below %.2f", h[2], h[0], useMinHit3Heldout)
		}
	}
}
