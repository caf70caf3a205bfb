package knowledge_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestLearningCountsUsesOnTheQuerysDayAndWeek: the Learning panel's series put each
// recall on its UTC day and its Monday-to-Sunday week, count a use on the query's day,
// keep buckets without recalls (empty), and list the queries that returned nothing.
func TestLearningCountsUsesOnTheQuerysDayAndWeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.arch
	clock := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	k, err := knowledge.New(knowledge.Deps{DB: e.d, Detector: testfix.Detector(t), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.Learn(ctx, arch, knowledge.LearnInput{Title: "Invoices close on the 25th", Body: "Finance closes invoices on the 25th.", Kind: "fact"})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(l.KnowledgeID)
	if _, err := k.Approve(ctx, arch.ProjectID, id, "alice"); err != nil {
		t.Fatal(err)
	}
	recall := func(at time.Time, q string, use bool) {
		t.Helper()
		clock = at
		r, err := k.Recall(ctx, arch, knowledge.RecallInput{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		if use {
			if len(r.Entries) != 1 {
				t.Fatalf("recall %q at %s: %+v", q, at, r)
			}
			if err := k.RecallUsed(ctx, arch, r.QueryID, l.KnowledgeID); err != nil {
				t.Fatal(err)
			}
		}
	}
	recall(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), "zebra husbandry", false) // Friday, returns nothing
	recall(time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC), "invoices close", false) // Sunday
	recall(time.Date(2026, 11, 30, 0, 1, 0, 0, time.UTC), "invoices close", true)    // Monday: a new week
	got, err := k.Learning(ctx, arch, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Days) != knowledge.LearningDays || len(got.Weeks) != knowledge.LearningWeeks {
		t.Fatalf("buckets: %d days, %d weeks", len(got.Days), len(got.Weeks))
	}
	day := func(i int) knowledge.Bucket { return got.Days[len(got.Days)-1-i] }
	week := func(i int) knowledge.Bucket { return got.Weeks[len(got.Weeks)-1-i] }
	for _, c := range []struct {
		name           string
		b              knowledge.Bucket
		start          string
		returned, used int64
		rate           float64
	}{
		{"today", day(0), "2026-12-01", 0, 0, 0},
		{"Monday", day(1), "2026-11-30", 1, 1, 1},
		{"Sunday", day(2), "2026-11-29", 1, 0, 0},
		{"this week", week(0), "2026-11-30", 1, 1, 1},
		{"last week", week(1), "2026-11-23", 1, 0, 0},
		{"the week of the empty query", week(2), "2026-11-16", 0, 0, 0},
	} {
		if c.b.Start.Format("2006-01-02") != c.start || c.b.Returned != c.returned || c.b.Used != c.used || c.b.Rate != c.rate {
			t.Errorf("%s: %+v, want start %s returned %d used %d rate %v", c.name, c.b, c.start, c.returned, c.used, c.rate)
		}
	}
	if len(got.Empty) != 1 || got.Empty[0].Query != "zebra husbandry" || got.Empty[0].Times != 1 {
		t.Fatalf("empty queries: %+v", got.Empty)
	}
}
