package desk_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// searchPlanConversations adds 40 conversations to acme: "alpha" in 24 of them (subject or
// a public message; every fourth in the restricted billing inbox), "quokka" in 3 spread
// among them, "alpha" and "quokka" only in a private note of two more, and several
// sharing an updated_at so that the id breaks ties.
func searchPlanConversations(t *testing.T, fx *fixture) {
	t.Helper()
	support, billing := fx.inbox("acme", "support"), fx.inbox("acme", "billing")
	statuses := []string{desk.StatusOpen, desk.StatusPending, desk.StatusResolved}
	err := fx.d.Operator(context.Background(), func(tx *pg.Tx) error {
		for i := range 40 {
			// Pairs of conversations share their times (i/2).
			ts := at("2026-10-01T10:00:00Z").Add(time.Duration(i/2) * time.Hour)
			subject, body := fmt.Sprintf("Question %d", i), "Nothing to see here."
			switch {
			case i == 7 || i == 21 || i == 33:
				body = "The quokka import stalls, alpha channel."
			case i == 38 || i == 39:
				// below: only a note says alpha and quokka
			case i%5 == 0:
				subject = fmt.Sprintf("Alpha question %d", i)
			case i%5 == 1 || i%5 == 3:
				body = "Alphanumeric keys fail."
			}
			inbox := support
			if i%4 == 0 {
				inbox = billing
			}
			c := desk.NewConversation{InboxID: inbox, Subject: subject, Status: statuses[i%3], CustomerEmail: fmt.Sprintf("p%d@customer.test", i),
				CreatedAt: ts, Messages: []desk.NewMessage{{Type: desk.TypeCustomer, Body: body, CreatedAt: ts}}}
			if i == 38 || i == 39 {
				c.Messages = append(c.Messages, desk.NewMessage{Type: desk.TypeNote, Body: "alpha quokka", CreatedAt: ts.Add(time.Minute), AuthorID: fx.user("bo@acme.test")})
			}
			id, _, err := desk.AddConversation(context.Background(), tx, fx.q, fx.orgs["acme"], c)
			if err != nil {
				return err
			}
			fx.conv[fmt.Sprintf("plan-%d", i)] = desk.PrefixConversation + itoa(id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// searchAll pages through a search to its end and returns every page's ids.
func searchAll(t *testing.T, svc *desk.Service, sc tenancy.Scope, in desk.SearchInput) [][]string {
	t.Helper()
	var pages [][]string
	for {
		r, err := svc.SearchConversations(context.Background(), sc, in)
		if err != nil {
			t.Fatalf("%+v: %v", in, err)
		}
		pages = append(pages, convIDs(r))
		if r.NextCursor == nil {
			return pages
		}
		if len(pages) > 100 {
			t.Fatalf("%+v: no end", in)
		}
		in.Cursor = *r.NextCursor
	}
}

// TestSearchPlans checks that search answers the same pages whichever of its plans runs:
// the ordered walk's first rows (a page found there), the full-text index's candidates
// sorted (at most the cap), or the walk to the end (more than the cap). A tiny cap sends
// every search through the later plans; caps around each query's number of matches test
// the boundaries. The reference is a cap larger than the workspace, where the first rows
// are all of it.
func TestSearchPlans(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	searchPlanConversations(t, fx)
	// Hundreds of calls a minute: no rate limit.
	unlimited := desk.Limits{Window: time.Minute, MemberReads: 1 << 30, MemberWrites: 1 << 30, WorkspaceReads: 1 << 30, WorkspaceWrites: 1 << 30}
	limits := map[string]desk.Limits{desk.PlanGrowth: unlimited, desk.PlanScale: unlimited}
	withCap := func(n int) *desk.Service {
		svc, err := desk.New(desk.Deps{DB: fx.d, Q: fx.q, CursorKey: []byte(strings.Repeat("k", 32)), Secrets: testfix.Detector(t),
			Limits: limits, Now: fx.clock.Now, SearchCandidates: n})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	reference := withCap(1 << 20)
	people := map[string]tenancy.Scope{"owner": fx.scope("acme", "ana@acme.test"), "member of billing": fx.scope("acme", "bo@acme.test"),
		"member": fx.scope("acme", "cy@acme.test")}
	inputs := []desk.SearchInput{
		{Query: "alpha"}, {Query: "alpha", Limit: 1}, {Query: "alpha", Limit: 7}, {Query: "alpha", Status: desk.StatusOpen, Limit: 2},
		{Query: "alpha", InboxID: new(fx.res.Desk["acme"].Inboxes["support"].ID), Limit: 3}, {Query: "quokka", Limit: 1}, {Query: "quokka alpha"},
		{Query: "alp qu", Limit: 2}, {Query: "question", Limit: 5}, {Query: "nowhere"},
	}
	caps := map[int]*desk.Service{}
	for _, n := range []int{1, 2, 3, 5, 8, 21, 55} {
		caps[n] = withCap(n)
	}
	for who, sc := range people {
		for _, in := range inputs {
			want := searchAll(t, reference, sc, in)
			matches := 0
			for _, p := range want {
				matches += len(p)
			}
			// The boundaries: a cap of exactly the matches, one fewer, one more.
			for _, n := range []int{matches - 1, matches, matches + 1} {
				if _, ok := caps[n]; n > 0 && !ok {
					caps[n] = withCap(n)
				}
			}
			for n, svc := range caps {
				t.Run(fmt.Sprintf("%s/%+v/cap %d", who, in, n), func(t *testing.T) {
					if got := searchAll(t, svc, sc, in); !slices.EqualFunc(got, want, slices.Equal) {
						t.Fatalf("got %v, want %v", got, want)
					}
				})
			}
		}
	}
	t.Run("a private note never matches, whatever the plan", func(t *testing.T) {
		for n, svc := range caps {
			for _, q := range []string{"alpha", "quokka"} {
				for _, p := range searchAll(t, svc, people["owner"], desk.SearchInput{Query: q, Limit: 50}) {
					if slices.Contains(p, fx.conv["plan-38"]) || slices.Contains(p, fx.conv["plan-39"]) {
						t.Fatalf("cap %d, %q: a note matched: %v", n, q, p)
					}
				}
			}
		}
	})
	t.Run("the reference is every visible match in order", func(t *testing.T) {
		got := searchAll(t, reference, people["owner"], desk.SearchInput{Query: "quokka", Limit: 50})
		want := []string{fx.conv["plan-33"], fx.conv["plan-21"], fx.conv["plan-7"]}
		if len(got) != 1 || !slices.Equal(got[0], want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
