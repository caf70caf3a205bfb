package desk_test

import (
	"context"
	"testing"

	"github.com/relayroom/relayroom/internal/desk"
)

// TestReadRoundTrips counts each read tool's round trips to the database: one for the
// rate-limit statement, then the tool's transaction, whose BEGIN and settings ride with
// its first statement and whose COMMIT rides with its last.
//
// On Citus each of the two transactions sends its BEGIN and its tenant's SET LOCAL
// settings as simple statements of their own, two round trips more each (internal/pg
// counts the same for one transaction), and the search reads its candidates in a
// statement of its own (one more): citus is what each read adds there.
func TestReadRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test")
	for _, c := range []struct {
		name  string
		want  int64
		citus int64
		call  func() error
	}{
		{"search", 2, 5, func() error {
			_, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "import"})
			return err
		}},
		{"get_conversation (the conversation, then its messages)", 3, 4, func() error {
			_, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: fx.conv["csv"]})
			return err
		}},
		{"list_inboxes", 2, 4, func() error {
			_, err := fx.svc.ListInboxes(ctx, ana, desk.PageInput{})
			return err
		}},
		{"find_saved_replies", 2, 4, func() error {
			_, err := fx.svc.FindSavedReplies(ctx, ana, desk.FindSavedRepliesInput{Query: "csv"})
			return err
		}},
		{"get_report", 2, 4, func() error {
			_, err := fx.svc.GetReport(ctx, ana, desk.ReportInput{Metric: desk.MetricConversationVolume, StartDate: "2026-11-01", EndDate: "2026-11-07"})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			if fx.d.Citus() {
				want += c.citus
			}
			before := fx.d.RoundTrips()
			if err := c.call(); err != nil {
				t.Fatal(err)
			}
			if n := fx.d.RoundTrips() - before; n != want {
				t.Fatalf("%d round trips, want %d", n, want)
			}
		})
	}
}
