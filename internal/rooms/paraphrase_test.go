package rooms_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/rooms"
)

// paraphraseSet is testdata/paraphrases.json: entries with a query each that says the
// same thing in other words, and queries on topics no entry covers. Each pair and absent
// topic is in the "tune" split (looked at when choosing the search's settings) or the
// "heldout" split (never looked at while tuning): the held-out scores are the honest ones.
type paraphraseSet struct {
	Pairs []struct {
		Domain string `json:"domain"`
		Entry  string `json:"entry"`
		Query  string `json:"query"`
		Split  string `json:"split"`
	} `json:"pairs"`
	Absent []struct {
		Query string `json:"query"`
		Split string `json:"split"`
	} `json:"absent"`
}

func loadParaphrases(t testing.TB) paraphraseSet {
	t.Helper()
	raw, err := os.ReadFile("testdata/paraphrases.json")
	if err != nil {
		t.Fatal(err)
	}
	var s paraphraseSet
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Floors of the paraphrase test with the builtin embedder (the Universal Sentence
// Encoder): what the search reaches today, less about two pairs (tune 45/84, held-out
// 22/41; docs/rooms.md, "Paraphrase retrieval"), not the goal of 0.80 hit@3, which this
// model does not reach either. A change that loses quality fails here; one that gains
// should raise them. Every off-topic query of the tune split must find nothing; the
// held-out ones are reported, and at most one may find something.
const (
	minHit3Tune        = 0.50
	minHit3Heldout     = 0.48
	maxAbsentFoundHeld = 1
)

func TestReadMemoryParaphrases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	set := loadParaphrases(t)
	if len(set.Pairs) < 100 {
		t.Fatalf("the set has %d pairs, want at least 100", len(set.Pairs))
	}
	sc := e.scope("architect", e.one)
	ids := make([]string, len(set.Pairs))
	for i, p := range set.Pairs {
		r, err := e.svc.WriteMemory(context.Background(), sc, rooms.WriteMemoryInput{Content: p.Entry, Tags: []string{p.Domain}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.MemoryID
	}
	type answer struct {
		ids []string
		rel []int
		msg string
	}
	read := func(q string) answer {
		t.Helper()
		r := e.call("peter", e.one, "read_memory", map[string]any{"query": q}).obj(t)
		var a answer
		a.msg, _ = r["message"].(string)
		for _, x := range r["entries"].([]any) {
			m := x.(map[string]any)
			a.ids = append(a.ids, str(m, "id"))
			rel, err := strconv.Atoi(strings.TrimSuffix(str(m, "relevance"), "%"))
			if err != nil {
				t.Fatalf("query %q: entry without a relevance percentage: %v", q, m)
			}
			a.rel = append(a.rel, rel)
		}
		return a
	}
	answers := make([]answer, len(set.Pairs))
	for i, p := range set.Pairs {
		answers[i] = read(p.Query)
	}

	for _, split := range []struct {
		name  string
		floor float64
	}{{"tune", minHit3Tune}, {"heldout", minHit3Heldout}} {
		t.Run("hit@3 on the "+split.name+" split", func(t *testing.T) {
			var n, hit1, hit3 int
			for i, p := range set.Pairs {
				if p.Split != split.name {
					continue
				}
				n++
				for k, id := range answers[i].ids {
					if id == ids[i] && k < 3 {
						hit3++
						if k == 0 {
							hit1++
						}
					}
				}
			}
			h3 := float64(hit3) / float64(n)
			t.Logf("%s: %d pairs, hit@1 %.2f (%d), hit@3 %.2f (%d)", split.name, n, float64(hit1)/float64(n), hit1, h3, hit3)
			if h3 < split.floor {
				t.Errorf("hit@3 %.2f below %.2f", h3, split.floor)
			}
		})
	}
	t.Run("most queries share no word with their entry", func(t *testing.T) {
		// The full-text parser's view of "a word": English stems, stop words left out.
		entries, queries := make([]string, len(set.Pairs)), make([]string, len(set.Pairs))
		for i, p := range set.Pairs {
			entries[i], queries[i] = p.Entry, p.Query
		}
		disjoint := e.count(`SELECT count(*) FROM unnest($1::text[], $2::text[]) AS p(entry, query)
WHERE NOT to_tsvector('english', entry) @@ replace(plainto_tsquery('english', query)::text, ' & ', ' | ')::tsquery`, entries, queries)
		t.Logf("%d of %d queries share no word stem with their entry", disjoint, len(set.Pairs))
		if disjoint*3 < len(set.Pairs)*2 {
			t.Errorf("only %d of %d queries share no word with their entry: the set should test meaning, not words", disjoint, len(set.Pairs))
		}
	})
	t.Run("entries come in the order of their relevance", func(t *testing.T) {
		for i, a := range answers {
			for k := 1; k < len(a.rel); k++ {
				if a.rel[k] > a.rel[k-1] {
					t.Fatalf("query %q: relevance %v is not in descending order", set.Pairs[i].Query, a.rel)
				}
			}
		}
	})
	t.Run("a topic no entry covers finds nothing", func(t *testing.T) {
		var heldFound, held int
		for _, x := range set.Absent {
			a := read(x.Query)
			if a.msg == rooms.MsgNoMemory && len(a.ids) == 0 {
				continue
			}
			if x.Split == "tune" {
				t.Errorf("query %q: got %d entries (relevance %v), want %q", x.Query, len(a.ids), a.rel, rooms.MsgNoMemory)
				continue
			}
			heldFound++
			t.Logf("held-out query %q: got %d entries (relevance %v)", x.Query, len(a.ids), a.rel)
		}
		for _, x := range set.Absent {
			if x.Split == "heldout" {
				held++
			}
		}
		t.Logf("held-out off-topic queries answered with nothing: %d of %d", held-heldFound, held)
		if heldFound > maxAbsentFoundHeld {
			t.Errorf("%d held-out off-topic queries found entries, at most %d may", heldFound, maxAbsentFoundHeld)
		}
	})
}
