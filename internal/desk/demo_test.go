package desk_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
)

func TestSeedDemo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	inboxes := []string{fx.res.Desk["acme"].Inboxes["support"].ID, fx.res.Desk["acme"].Inboxes["billing"].ID}
	members := []uuid.UUID{fx.users["ana@acme.test"], fx.users["bo@acme.test"]}
	seed := func() int {
		var n int
		err := fx.d.Operator(ctx, func(tx *pg.Tx) (err error) {
			n, err = desk.SeedDemo(ctx, tx, fx.acme, "America/Los_Angeles", now, inboxes, members)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("sixty conversations, then none on a second run", func(t *testing.T) {
		if n := seed(); n != desk.DemoConversations {
			t.Fatalf("first seed added %d", n)
		}
		if n := seed(); n != 0 {
			t.Fatalf("second seed added %d", n)
		}
	})
	ana := fx.scope("acme", "ana@acme.test")
	t.Run("the contract's example is there, unanswered, with a note", func(t *testing.T) {
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "CSV import", Status: "open"})
		if err != nil || len(r.Conversations) == 0 || r.Conversations[0].Subject != "CSV import fails" {
			t.Fatalf("%+v %v", r, err)
		}
		c, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: r.Conversations[0].ID, IncludePrivateNotes: true})
		if err != nil || len(c.Messages) != 3 || c.Messages[2].Type != "note" || c.Conversation.FirstReplyAt != nil {
			t.Fatalf("%+v %v", c, err)
		}
	})
	t.Run("reports have data over the last month", func(t *testing.T) {
		for _, m := range desk.Metrics {
			r, err := fx.svc.GetReport(ctx, ana, desk.ReportInput{Metric: m, StartDate: "2026-10-11", EndDate: "2026-11-10"})
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, p := range r.Points {
				if p.Value != nil && *p.Value > 0 {
					seen++
				}
			}
			if seen < 5 {
				t.Fatalf("%s: only %d days with data", m, seen)
			}
		}
	})
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	t.Run("the defaults read back as written", func(t *testing.T) {
		got, err := desk.ParseLimits(desk.FormatLimits(desk.DefaultLimits()))
		if err != nil || desk.FormatLimits(got) != desk.FormatLimits(desk.DefaultLimits()) || got[desk.PlanScale] != desk.DefaultLimits()[desk.PlanScale] {
			t.Fatalf("%v %v", got, err)
		}
	})
	t.Run("refuses what it cannot enforce", func(t *testing.T) {
		for _, bad := range []string{"", "growth=1/1/1/1", "growth=1/1/1/1,scale=0/1/1/1", "growth=1/1/1,scale=1/1/1/1", "starter=1/1/1/1,growth=1/1/1/1,scale=1/1/1/1", "growth=a/1/1/1,scale=1/1/1/1"} {
			if _, err := desk.ParseLimits(bad); err == nil {
				t.Errorf("%q accepted", bad)
			}
		}
	})
}
