package knowledge

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// similarityWords are the material of the compared strings: whole words, their typos and
// prefixes, digits, case and repeats, so that extents overlap in every way.
var similarityWords = strings.Fields(`deploy deployment deployed rollback roll back cloudfront cloudfrnt
CloudFront invoice invoices refund refunds payment database failover runbook Runbook RUNBOOK press officer
credible ahmed baghdad the a an of to in is it on at x y z ab abc abcd v2 2026 404 ZX-4471 acme_corp
e-mail re-run mississippi missisippi banana bananas nana ana aaa aaaa zzz q`)

var similaritySeparators = []string{" ", " ", " ", "  ", ", ", ". ", "-", "_", "/", "\t", "\n", "(", ")", "'", "\"", ":", "!"}

func randomText(rng *rand.Rand, words int) string {
	var b strings.Builder
	for i := range words {
		if i > 0 || rng.IntN(4) == 0 {
			b.WriteString(similaritySeparators[rng.IntN(len(similaritySeparators))])
		}
		w := similarityWords[rng.IntN(len(similarityWords))]
		if rng.IntN(6) == 0 && len(w) > 2 {
			// A typo: one byte dropped.
			k := rng.IntN(len(w))
			w = w[:k] + w[k+1:]
		}
		b.WriteString(w)
	}
	return b.String()
}

// TestWordSimilarityMatchesPgTrgm holds wordSimilarity to pg_trgm's word_similarity,
// bit for bit (both are float4), on ASCII queries and texts of recall's shapes.
func TestWordSimilarityMatchesPgTrgm(t *testing.T) {
	t.Parallel()
	_, url := pgtest.Open(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_trgm"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(44, 1))
	var qs, texts []string
	fixed := [][2]string{
		{"word", "two words"}, {"cloudfrnt", "Serve assets through CloudFront"}, {"", "text"}, {"q", ""},
		{"!!", "a b c"}, {"press officer credible", "the press officer was credible, said the officer"},
		{"aaa", "aaaa aaa aa a"}, {"ab ab ab", "ab"}, {"Runbook", "runbook RUNBOOK run book"},
	}
	for _, p := range fixed {
		qs, texts = append(qs, p[0]), append(texts, p[1])
	}
	// 40 queries, each against 100 texts: recall's ranking reuses one query's tables from
	// text to text (similarity.of), so the comparison does too.
	queries := make([]string, 40)
	for i := range queries {
		queries[i] = randomText(rng, 1+rng.IntN(4))
	}
	for i := range 4000 {
		qs = append(qs, queries[i%len(queries)])
		texts = append(texts, randomText(rng, rng.IntN(60)))
	}
	rows, err := conn.Query(ctx, "SELECT word_similarity(q, t) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(q, t, o) ORDER BY o", qs, texts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[float32])
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	byQuery := map[string]*similarity{}
	for i, w := range want {
		if w > 0 {
			nonzero++
		}
		m := byQuery[qs[i]]
		if m == nil {
			m = newSimilarity(qs[i])
			byQuery[qs[i]] = m
		}
		if got := m.of(texts[i]); got != w {
			t.Fatalf("wordSimilarity(%q, %q) = %v, pg_trgm says %v", qs[i], texts[i], got, w)
		}
	}
	if nonzero < len(want)/2 {
		t.Fatalf("only %d of %d pairs share a trigram: the comparison proves little", nonzero, len(want))
	}
}

func TestIsASCII(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"": true, "deploy rollback": true, "café": false, "\x7f": true, "naïve x": false} {
		if got := isASCII(s); got != want {
			t.Errorf("isASCII(%q) = %v, want %v", s, got, want)
		}
	}
}

// BenchmarkWordSimilarity is recall's ranking of one candidate in the server: an entry of
// the load test's size (a six-word title and a 30-word body) against a three-word query.
func BenchmarkWordSimilarity(b *testing.B) {
	rng := rand.New(rand.NewPCG(44, 2))
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = randomText(rng, 36)
	}
	m := newSimilarity("press officer credible")
	b.ResetTimer()
	for i := range b.N {
		m.of(texts[i%len(texts)])
	}
}
