package desk_test

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	sqlfiles "github.com/relayroom/relayroom/sql"
)

// TestSearchFoldsAccents: customers write in many languages and agents type without
// accents (or with others). A word is found whichever way it was written or typed:
// "cafe" finds "Café", "ELAN" finds "Élan", "crème" finds "creme".
func TestSearchFoldsAccents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.scope("acme", "ana@acme.test")
	support := fx.inbox("acme", "support")
	add := func(subject, body, ts string) string {
		t.Helper()
		var id int64
		err := fx.d.Operator(ctx, func(tx *pg.Tx) error {
			var err error
			id, _, err = desk.AddConversation(ctx, tx, fx.q, fx.acme, desk.NewConversation{InboxID: support, Subject: subject,
				Status: desk.StatusOpen, CustomerEmail: "chloe@client.test", CreatedAt: at(ts),
				Messages: []desk.NewMessage{{Type: desk.TypeCustomer, Body: body, CreatedAt: at(ts)}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return desk.PrefixConversation + itoa(id)
	}
	accented := add("Réservation au Café Élan", "L'équipe a payé deux fois la crème brûlée. Straße 5, Œuvre.", "2026-11-09T15:00:00Z")
	plain := add("Creme brulee recipe", "Where is the creme brulee recipe?", "2026-11-09T14:00:00Z")
	search := func(t *testing.T, q string) []string {
		t.Helper()
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: q})
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		return convIDs(r)
	}

	t.Run("a word written with accents is found without them, or with other ones", func(t *testing.T) {
		for _, q := range []string{"cafe", "CAFÉ", "cafè", "ELAN", "reservation equipe paye", "strasse", "oeuvre", "caf"} {
			if got := search(t, q); !slices.Equal(got, []string{accented}) {
				t.Errorf("%q found %v, want the accented conversation", q, got)
			}
		}
	})
	t.Run("a word written without accents is found with them", func(t *testing.T) {
		for _, q := range []string{"crème brûlée", "creme", "BRÛLÉE"} {
			if got := search(t, q); !slices.Equal(got, []string{accented, plain}) {
				t.Errorf("%q found %v, want both conversations", q, got)
			}
		}
		if got := search(t, "crème recipe"); !slices.Equal(got, []string{plain}) {
			t.Errorf("every word must still match: %v", got)
		}
	})
	t.Run("a conversation imported from CSV is found without accents", func(t *testing.T) {
		file := "subject,customer_email,body,created_at,status\nFacture erronée,zoe@client.test,Le montant facturé est faux,2026-10-01T10:00:00Z,open\n"
		if sum, err := desk.ImportCSV(audit.AsOperator(ctx, "ops"), fx.d, fx.acme, "support", strings.NewReader(file), now, nil); err != nil || sum.Created != 1 {
			t.Fatalf("%+v %v", sum, err)
		}
		r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: "erronee facture"})
		if err != nil || len(r.Conversations) != 1 || r.Conversations[0].Subject != "Facture erronée" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("saved replies are found without accents", func(t *testing.T) {
		if _, err := fx.apply(ctx, desk.WorkspaceSpec{Workspace: "acme", SavedReplies: []desk.SavedReplySpec{
			{Slug: "delai", Title: "Délai de remboursement", Body: "Le remboursement arrive sous 14 jours ouvrés."}}}); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"delai", "jours ouvres", "DÉLAI"} {
			r, err := fx.svc.FindSavedReplies(ctx, ana, desk.FindSavedRepliesInput{Query: q})
			if err != nil || len(r.SavedReplies) != 1 || r.SavedReplies[0].Title != "Délai de remboursement" {
				t.Errorf("%q: %+v %v", q, r, err)
			}
		}
	})
	t.Run("search text stored before accents were folded is folded by the upgrade", func(t *testing.T) {
		// What 000014..000070 stored: the words as written, lower-cased.
		old := add("Ancien dossier", "x", "2026-11-09T13:00:00Z")
		id := strings.TrimPrefix(old, desk.PrefixConversation)
		testfix.Exec(t, fx.d, `UPDATE desk_conversation SET search = strip(to_tsvector('simple', 'Ancien dossier de Noël, ǅemal à Zürich'))
			WHERE org_id = $1 AND id = $2::bigint`, fx.acme, id)
		if got := search(t, "noel"); len(got) != 0 {
			t.Fatalf("before the upgrade %v; the test no longer stores the old form", got)
		}
		updated := testfix.Scalar[time.Time](t, fx.d, `SELECT updated_at FROM desk_conversation WHERE org_id = $1 AND id = $2::bigint`, fx.acme, id)
		up, err := fs.ReadFile(sqlfiles.Migrations(), "000072_desk_search_fold_stored.up.sql")
		if err != nil {
			t.Fatal(err)
		}
		testfix.Exec(t, fx.d, string(up))
		for _, q := range []string{"noel", "NOËL", "zurich", "dzemal", "ancien dossier"} {
			if got := search(t, q); !slices.Equal(got, []string{old}) {
				t.Errorf("%q found %v after the upgrade", q, got)
			}
		}
		if got := search(t, "cafe"); !slices.Equal(got, []string{accented}) {
			t.Errorf("a conversation written since is unchanged by it: %v", got)
		}
		if after := testfix.Scalar[time.Time](t, fx.d, `SELECT updated_at FROM desk_conversation WHERE org_id = $1 AND id = $2::bigint`, fx.acme, id); !after.Equal(updated) {
			t.Errorf("updated_at moved from %v to %v", updated, after)
		}
	})
}
