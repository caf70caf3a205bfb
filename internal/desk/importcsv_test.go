package desk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/testfix"
)

func TestImportCSV(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	imp := func(file string) (desk.ImportSummary, error) {
		return desk.ImportCSV(audit.AsOperator(ctx, "ops"), fx.d, fx.acme, "support", strings.NewReader(file), now, nil)
	}
	good := "\uFEFFsubject,customer_email,body,created_at,status\n" +
		"Cannot import contacts,Jo@Example.com,\"The importer says \"\"bad header\"\", line 1.\",2026-10-01T10:00:00Z,resolved\n" +
		"Zeppelin export,max@example.com,Where is the zeppelin export?,2026-10-02T11:00:00-07:00,open\n"

	t.Run("imports each row as a conversation with its customer message", func(t *testing.T) {
		sum, err := imp(good)
		if err != nil || sum != (desk.ImportSummary{Rows: 2, Created: 2}) {
			t.Fatalf("%+v %v", sum, err)
		}
		r, err := fx.svc.SearchConversations(ctx, fx.scope("acme", "ana@acme.test"), desk.SearchInput{Query: "zeppelin"})
		if err != nil || len(r.Conversations) != 1 || r.Conversations[0].CustomerEmail != "max@example.com" || r.Conversations[0].CreatedAt != "2026-10-02T18:00:00Z" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("the operator's import is in the workspace's history", func(t *testing.T) {
		if n := testfix.Scalar[int64](t, fx.d, `SELECT count(*) FROM audit_event WHERE org_id = $1 AND object_kind = 'desk_inbox'
			AND action = 'imported' AND actor_name = 'operator ops' AND detail->>'created' = '2'`, fx.acme); n != 1 {
			t.Fatalf("%d audit events for the import, want 1", n)
		}
	})
	t.Run("importing the same file again creates nothing", func(t *testing.T) {
		sum, err := imp(good)
		if err != nil || sum != (desk.ImportSummary{Rows: 2, Existing: 2}) {
			t.Fatalf("%+v %v", sum, err)
		}
	})
	t.Run("a row repeated in the file is counted, and one repeated with another status is reported", func(t *testing.T) {
		// The second line of such a pair was dropped: a 2-row file reported 1 row, and a
		// status changed in the repeat was neither applied nor mentioned.
		head := "customer_email,subject,body,created_at,status\n"
		row := "rep@example.com,Repeated row,Same body,2026-10-03T10:00:00Z,"
		sum, err := imp(head + row + "open\n" + row + "open\n")
		if err != nil || sum != (desk.ImportSummary{Rows: 2, Created: 1, Existing: 1}) {
			t.Fatalf("an exact repeat: %+v %v", sum, err)
		}
		_, err = imp(head + row + "open\n" + row + "resolved\n")
		var ie *desk.ImportError
		if !errors.As(err, &ie) || len(ie.Problems) != 1 || ie.Problems[0].Line != 3 || !strings.Contains(ie.Problems[0].Reason, "the same conversation as line 2 with another status") {
			t.Fatalf("a repeat with another status: %v", err)
		}
	})
	t.Run("every bad row is reported by line, and nothing is imported", func(t *testing.T) {
		bad := "customer_email,subject,body,created_at,status\n" +
			"ok@example.com,Fine row,Fine body,2026-10-01T10:00:00Z,open\n" +
			"not-an-email,Subject,Body,2026-10-01T10:00:00Z,open\n" +
			"a@example.com,,Body,2026-10-01T10:00:00Z,open\n" +
			"b@example.com,Subject,Body,yesterday,closed\n" +
			"c@example.com,Subject,Body,2099-01-01T00:00:00Z,open\n" +
			"d@example.com,Subject\n" +
			"e@example.com,Subject,Body,0001-01-01T00:00:00Z,open\n"
		_, err := imp(bad)
		var ie *desk.ImportError
		if !errors.As(err, &ie) {
			t.Fatalf("%v", err)
		}
		lines := []int{}
		for _, p := range ie.Problems {
			lines = append(lines, p.Line)
		}
		if !slices.Equal(lines, []int{3, 4, 5, 6, 7, 8}) || !strings.Contains(ie.Problems[2].Reason, "created_at") || !strings.Contains(ie.Problems[2].Reason, "status") ||
			!strings.Contains(ie.Problems[5].Reason, "created_at is before 1990-01-01") {
			t.Fatalf("%+v", ie.Problems)
		}
		r, _ := fx.svc.SearchConversations(ctx, fx.scope("acme", "ana@acme.test"), desk.SearchInput{Query: "Fine row"})
		if len(r.Conversations) != 0 {
			t.Fatal("a file with bad rows was partly imported")
		}
	})
	t.Run("header, encoding and size are checked", func(t *testing.T) {
		var many strings.Builder
		many.WriteString("customer_email,subject,body,created_at,status\n")
		for i := range desk.MaxImportRows + 1 {
			fmt.Fprintf(&many, "u%d@example.com,S,B,2026-10-01T10:00:00Z,open\n", i)
		}
		for _, c := range []struct{ file, want string }{
			{"email,subject,body,created_at,status\n", `unknown column "email"`},
			{"customer_email,subject,body,created_at\n", `missing column "status"`},
			{"customer_email,subject,body,created_at,status\nx@example.com,S\xff,B,2026-10-01T10:00:00Z,open\n", "line 2: not valid UTF-8"},
			{many.String(), fmt.Sprintf("line %d: more than %d rows", desk.MaxImportRows+2, desk.MaxImportRows)},
			{strings.Repeat("x", desk.MaxImportBytes+1), "larger than 10 MB"},
		} {
			_, err := imp(c.file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want %q, got %v", c.want, err)
			}
		}
	})
	t.Run("a file of many bad lines lists the first problems and counts the rest", func(t *testing.T) {
		// A file that is not UTF-8 at all listed one problem a line: five million for 10 MB.
		_, err := imp(strings.Repeat("\xff\xfe\n", 5000))
		var ie *desk.ImportError
		if !errors.As(err, &ie) || len(ie.Problems) != desk.MaxImportProblems+1 ||
			ie.Problems[desk.MaxImportProblems].Reason != fmt.Sprintf("and %d more problem(s) not listed: fix these first", 5000-desk.MaxImportProblems) {
			t.Fatalf("%d problems: %v", len(ie.Problems), err)
		}
	})
	t.Run("a quote out of place is reported by line, not a crash", func(t *testing.T) {
		head := "customer_email,subject,body,created_at,status\n"
		for _, c := range []struct{ file, want string }{
			{head + "jo\"e@example.com,S,B,2026-10-01T10:00:00Z,open\n", `line 2: bare " in non-quoted-field`},
			{head + "ok@example.com,S,B,2026-10-01T10:00:00Z,open\n\"never closed,S,B\n", `line 3: extraneous or missing " in quoted-field`},
		} {
			_, err := imp(c.file)
			var ie *desk.ImportError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want %q, got %v", c.want, err)
			}
		}
	})
	t.Run("a file of several chunks: progress, rows known before, a row repeated across chunks", func(t *testing.T) {
		// 1,201 rows: row 0 repeats as row 1,100 (another chunk), rows 10-19 were imported
		// before; each row is stored as one conversation with its customer message.
		row := func(i int) string {
			return fmt.Sprintf("chunk%d@example.com,Chunked question %d,Body of wombat%dx,2026-09-%02dT10:00:00Z,%s\n",
				i, i, i, 1+i%28, []string{"open", "pending", "resolved"}[i%3])
		}
		var before, file strings.Builder
		before.WriteString("customer_email,subject,body,created_at,status\n")
		file.WriteString("customer_email,subject,body,created_at,status\n")
		for i := 10; i < 20; i++ {
			before.WriteString(row(i))
		}
		for i := range 1200 {
			file.WriteString(row(i))
			if i == 1099 {
				file.WriteString(row(0))
			}
		}
		if sum, err := imp(before.String()); err != nil || sum.Created != 10 {
			t.Fatalf("%+v %v", sum, err)
		}
		var progress []int
		sum, err := desk.ImportCSV(ctx, fx.d, fx.acme, "support", strings.NewReader(file.String()), now, func(done, total int) {
			if total != 1201 { // the file's lines, the repeat included
				t.Errorf("total %d", total)
			}
			progress = append(progress, done)
		})
		// 1,201 rows: 10 imported before, one a repeat of row 0 in the file.
		if err != nil || sum != (desk.ImportSummary{Rows: 1201, Created: 1190, Existing: 11}) {
			t.Fatalf("%+v %v", sum, err)
		}
		if !slices.Equal(progress, []int{501, 1001}) { // the repeat is done from the start
			t.Fatalf("progress %v", progress)
		}
		ana := fx.scope("acme", "ana@acme.test")
		for _, i := range []int{0, 15, 499, 500, 1199} {
			r, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: fmt.Sprintf("wombat%dx", i)})
			if err != nil || len(r.Conversations) != 1 {
				t.Fatalf("row %d by its body: %+v %v", i, r, err)
			}
			c := r.Conversations[0]
			if bySubject, err := fx.svc.SearchConversations(ctx, ana, desk.SearchInput{Query: fmt.Sprintf("chunked question %d", i)}); err != nil ||
				!slices.Contains(convIDs(bySubject), c.ID) {
				t.Fatalf("row %d by its subject: %v %v", i, convIDs(bySubject), err)
			}
			g, err := fx.svc.GetConversation(ctx, ana, desk.GetConversationInput{ConversationID: c.ID})
			if err != nil {
				t.Fatal(err)
			}
			created := fmt.Sprintf("2026-09-%02dT10:00:00Z", 1+i%28)
			if g.Conversation.CreatedAt != created || g.Conversation.UpdatedAt != created || g.Conversation.FirstReplyAt != nil ||
				g.Conversation.ResolvedAt != nil || g.Conversation.Status != []string{"open", "pending", "resolved"}[i%3] ||
				len(g.Messages) != 1 || g.Messages[0].Type != desk.TypeCustomer || g.Messages[0].Body != fmt.Sprintf("Body of wombat%dx", i) ||
				g.Messages[0].CreatedAt != created || g.Messages[0].AuthorID != nil {
				t.Fatalf("row %d: %+v", i, g)
			}
		}
		if sum, err := imp(file.String()); err != nil || sum != (desk.ImportSummary{Rows: 1201, Existing: 1201}) {
			t.Fatalf("again: %+v %v", sum, err)
		}
	})
}
