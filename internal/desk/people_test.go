package desk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestPeopleImport checks the dashboard's import: the preview is ImportCSV's judgement
// without a write, and ImportAs is ImportCSV's import with its role check, its inbox
// scoped to the workspace, and an audit row per chunk that created something.
func TestPeopleImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	owner := fx.ana
	member := desk.Member{OrgID: fx.acme, UserID: fx.users["bo@acme.test"], Name: "Bo", Role: desk.RoleMember}
	convs := `SELECT count(*) FROM desk_conversation WHERE org_id = $1`
	bad := "customer_email,subject,body,created_at,status\n" +
		"ok@example.com,Fine row,Fine body,2026-10-01T10:00:00Z,open\n" +
		"ok@example.com,Fine row,Fine body,2026-10-01T10:00:00Z,open\n" +
		"not-an-email,Subject,Body,2026-10-01T10:00:00Z,open\n" +
		"b@example.com,Subject,Body,yesterday,closed\n"

	t.Run("the preview reports the import's problems by line and its good rows, writing nothing", func(t *testing.T) {
		before := testfix.Scalar[int](t, fx.d, convs, fx.acme)
		p, err := desk.PreviewCSV([]byte(bad), now)
		if err != nil {
			t.Fatal(err)
		}
		_, err = desk.ImportCSV(ctx, fx.d, fx.acme, "support", strings.NewReader(bad), now, nil)
		var ie *desk.ImportError
		if !errors.As(err, &ie) || !slices.Equal(ie.Problems, p.Problems) || len(p.Problems) != 2 || p.Problems[0].Line != 4 {
			t.Fatalf("preview %+v, import %v", p.Problems, err)
		}
		// Line 3 repeats line 2: a good row, counted as existing when imported.
		if p.Good != 2 || len(p.Rows) != 2 || p.Rows[0].Line != 2 || p.Rows[1].Line != 3 || p.Rows[0].CustomerEmail != "ok@example.com" {
			t.Fatalf("good rows: %+v", p)
		}
		if testfix.Scalar[int](t, fx.d, convs, fx.acme) != before {
			t.Fatal("a preview or a bad file wrote rows")
		}
	})

	t.Run("a member may not import; another workspace's inbox is not found", func(t *testing.T) {
		good := "customer_email,subject,body,created_at,status\nx@example.com,S,B,2026-10-01T10:00:00Z,open\n"
		if _, err := fx.svc.ImportAs(ctx, member, "inbox_1", []byte(good), now, nil); apperr.CodeOf(err) != apperr.Forbidden {
			t.Fatalf("member: %v", err)
		}
		if _, err := fx.svc.ImportAs(ctx, owner, "inbox_3", []byte(good), now, nil); apperr.CodeOf(err) != apperr.NotFound {
			t.Fatalf("Globex has inbox_3, Acme does not: %v", err)
		}
		if testfix.Scalar[int](t, fx.d, `SELECT count(*) FROM desk_conversation WHERE customer_email = 'x@example.com'`) != 0 {
			t.Fatal("a refused import wrote rows")
		}
	})

	t.Run("each chunk that creates conversations is audited on the inbox; a second import creates nothing", func(t *testing.T) {
		var file strings.Builder
		file.WriteString("customer_email,subject,body,created_at,status\n")
		rows := desk.ImportProgressEvery + 3
		for i := range rows {
			fmt.Fprintf(&file, "p%d@example.com,People %d,Body %d,2026-10-01T10:00:00Z,open\n", i, i, i)
		}
		var steps []int
		sum, err := fx.svc.ImportAs(ctx, owner, "inbox_1", []byte(file.String()), now, func(done, total int) { steps = append(steps, done) })
		if err != nil || sum != (desk.ImportSummary{Rows: rows, Created: rows}) || !slices.Equal(steps, []int{desk.ImportProgressEvery}) {
			t.Fatalf("%+v %v %v", sum, err, steps)
		}
		audited := `SELECT count(*) FROM audit_event WHERE org_id = $1 AND object_kind = 'desk_inbox' AND object_id = 'inbox_1' AND action = 'imported'`
		if n := testfix.Scalar[int](t, fx.d, audited, fx.acme); n != 2 {
			t.Fatalf("%d audit rows for two chunks", n)
		}
		if sum, err := fx.svc.ImportAs(ctx, owner, "inbox_1", []byte(file.String()), now, nil); err != nil || sum.Created != 0 || sum.Existing != rows {
			t.Fatalf("again: %+v %v", sum, err)
		}
		if n := testfix.Scalar[int](t, fx.d, audited, fx.acme); n != 2 {
			t.Fatalf("an import that created nothing was audited: %d rows", n)
		}
	})
}

// TestSavedReplySlugs: admin apply names a reply made on the dashboard by its slug
// reply-N, and makes no new reply under a slug the dashboard will give a later one.
func TestSavedReplySlugs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	initech := fx.orgs["initech"]
	ida := desk.Member{OrgID: initech, UserID: fx.users["ida@initech.test"], Name: "Ida", Role: desk.RoleOwner}
	apply := func(slug, title string) (desk.WorkspaceOut, error) {
		return fx.apply(ctx, desk.WorkspaceSpec{Workspace: "initech", SavedReplies: []desk.SavedReplySpec{{Slug: slug, Title: title, Body: "Body."}}})
	}
	first, err := fx.svc.CreateSavedReply(ctx, ida, "Made on the dashboard", "Body.")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strings.CutPrefix(first, desk.PrefixReply)

	t.Run("apply updates the dashboard's reply by its slug", func(t *testing.T) {
		out, err := apply("reply-"+n, "Renamed by apply")
		if err != nil || out.SavedReplies["reply-"+n].ID != first {
			t.Fatalf("%+v %v", out, err)
		}
	})
	t.Run("apply makes no new reply under a slug the dashboard will give", func(t *testing.T) {
		var k int
		if _, err := fmt.Sscan(n, &k); err != nil {
			t.Fatal(err)
		}
		later := fmt.Sprintf("reply-%d", k+2)
		if _, err := apply(later, "Taken from the dashboard"); err == nil || !strings.Contains(err.Error(), "give a new reply another slug") {
			t.Fatalf("apply made %s: %v", later, err)
		}
		for range 2 {
			if _, err := fx.svc.CreateSavedReply(ctx, ida, "Made on the dashboard", "Body."); err != nil {
				t.Fatalf("the dashboard cannot make a reply: %v", err)
			}
		}
	})
}

// restrictSupport restricts acme's Support inbox to the members ids, as its owner Ana
// does on the dashboard, failing the test if that is refused.
func (fx *fixture) restrictSupport(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	support := fx.res.Desk["acme"].Inboxes["support"].ID
	if err := fx.svc.SetInboxAccess(context.Background(), fx.ana, support, true, ids); err != nil {
		t.Fatalf("restrict the support inbox to %d members: %v", len(ids), err)
	}
}

// openSupport opens acme's Support inbox to the whole workspace, as Ana.
func (fx *fixture) openSupport(t *testing.T) {
	t.Helper()
	support := fx.res.Desk["acme"].Inboxes["support"].ID
	if err := fx.svc.SetInboxAccess(context.Background(), fx.ana, support, false, nil); err != nil {
		t.Fatalf("open the support inbox: %v", err)
	}
}

// TestApplyLeavesWhatItDoesNotName: applying a file again leaves an inbox's access and
// forwarding address as they are unless the file names them. Before, an inbox entry
// without members opened an inbox restricted on the dashboard to the whole workspace,
// private notes included, and one without an address cleared it.
func TestApplyLeavesWhatItDoesNotName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	acme := fx.orgs["acme"]
	cy := fx.scope("acme", "cy@acme.test")
	apply := func(t *testing.T, in desk.InboxSpec) {
		t.Helper()
		if _, err := fx.apply(ctx, desk.WorkspaceSpec{Workspace: "acme", Inboxes: []desk.InboxSpec{in}}); err != nil {
			t.Fatal(err)
		}
	}
	cySees := func() bool {
		_, err := fx.svc.GetConversation(ctx, cy, desk.GetConversationInput{ConversationID: fx.conv["csv"]})
		return err == nil
	}
	forwarding := func(t *testing.T) string {
		t.Helper()
		return testfix.Scalar[string](t, fx.d, `SELECT coalesce(forwarding_address, '') FROM desk_inbox WHERE org_id = $1 AND slug = 'support'`, acme)
	}
	apply(t, desk.InboxSpec{Slug: "support", Name: "Support", ForwardingAddress: new("support@mail.acme.test")})
	fx.restrictSupport(t, fx.users["bo@acme.test"])
	if cySees() {
		t.Fatal("a member not listed sees the restricted inbox")
	}

	t.Run("an inbox without members or address keeps both", func(t *testing.T) {
		apply(t, desk.InboxSpec{Slug: "support", Name: "Support desk"})
		if cySees() {
			t.Fatal("applying the file opened the inbox restricted on the dashboard")
		}
		if a := forwarding(t); a != "support@mail.acme.test" {
			t.Fatalf("forwarding address %q", a)
		}
	})
	t.Run("members: [] opens it, and an empty address clears it", func(t *testing.T) {
		apply(t, desk.InboxSpec{Slug: "support", Name: "Support desk", Members: []string{}, ForwardingAddress: new("")})
		if !cySees() {
			t.Fatal("the inbox is still restricted")
		}
		if a := forwarding(t); a != "" {
			t.Fatalf("forwarding address %q, want none", a)
		}
	})
}

// TestOpeningAnInboxDropsItsList: opening a restricted inbox to the workspace forgets whom
// it was restricted to. The list was passed as a NULL array, which dropped nobody: the
// dashboard went on naming them as listed on an inbox everyone sees.
func TestOpeningAnInboxDropsItsList(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	fx.restrictSupport(t, fx.users["bo@acme.test"])
	fx.openSupport(t)
	if n := testfix.Scalar[int](t, fx.d, `SELECT count(*) FROM desk_inbox_member m JOIN desk_inbox i ON i.org_id = m.org_id AND i.id = m.inbox_id
		WHERE i.org_id = $1 AND i.slug = 'support'`, fx.acme); n != 0 {
		t.Fatalf("%d members still listed on the opened inbox", n)
	}
}

// TestRestrictingAnInboxToManyMembers: the access_changed event named every member, and
// the audit trail's detail holds 4 KiB: restricting an inbox to a couple of hundred
// members failed the whole change. The event names those that fit, then how many more.
func TestRestrictingAnInboxToManyMembers(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	testfix.Exec(t, fx.d, `WITH u AS (
		INSERT INTO app_user (id, email, name)
		SELECT gen_random_uuid(), 'many' || n || '@acme.test', 'Support agent with a longish name ' || n FROM generate_series(1, 250) n
		RETURNING id)
		INSERT INTO org_member (org_id, user_id, role) SELECT $1, id, 'member' FROM u`, fx.acme)
	ids := testfix.Column[uuid.UUID](t, fx.d, `SELECT id FROM app_user WHERE email LIKE 'many%@acme.test'`)
	if len(ids) != 250 {
		t.Fatalf("%d members, want 250", len(ids))
	}
	fx.restrictSupport(t, ids...)
	detail := testfix.Scalar[string](t, fx.d, `SELECT detail->>'visible to' FROM audit_event WHERE action = 'access_changed' ORDER BY at DESC LIMIT 1`)
	if !strings.Contains(detail, " more") || len(detail) > 4096 {
		t.Fatalf("the event's list: %d bytes, %.120s", len(detail), detail)
	}
}

// TestADeactivatedMemberIsNotOfferedAnInbox: an inbox's page offered every member,
// deactivated ones too, so an admin could restrict an inbox to someone who can no longer
// act. A deactivated member is offered only while listed (to be taken off), and cannot
// be added by a forged form.
func TestADeactivatedMemberIsNotOfferedAnInbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newFixture(t)
	ana := fx.ana
	support := fx.res.Desk["acme"].Inboxes["support"].ID
	bo, cy := fx.users["bo@acme.test"], fx.users["cy@acme.test"]
	fx.restrictSupport(t, bo)
	testfix.Exec(t, fx.d, `UPDATE org_member SET deactivated_at = now() WHERE org_id = $1 AND user_id = ANY($2)`, fx.acme, []uuid.UUID{bo, cy})
	offered := func(t *testing.T) map[uuid.UUID]db.DeskInboxAccessListRow {
		t.Helper()
		page, err := fx.svc.Inbox(ctx, ana, support)
		if err != nil {
			t.Fatal(err)
		}
		out := map[uuid.UUID]db.DeskInboxAccessListRow{}
		for _, m := range page.Members {
			out[m.UserID] = m
		}
		return out
	}

	t.Run("a deactivated member not listed is not offered", func(t *testing.T) {
		if _, ok := offered(t)[cy]; ok {
			t.Fatal("cy, deactivated, is offered")
		}
		err := fx.svc.SetInboxAccess(ctx, ana, support, true, []uuid.UUID{bo, cy})
		if f := desk.Fields(err); f["members"] == "" {
			t.Fatalf("restricting to a deactivated member: %v", err)
		}
	})
	t.Run("a deactivated member listed is shown so, and can stay or go", func(t *testing.T) {
		if m, ok := offered(t)[bo]; !ok || !m.Listed || !m.Deactivated {
			t.Fatalf("bo: %+v (offered %v)", m, ok)
		}
		fx.restrictSupport(t, bo) // the list saved unchanged
		fx.restrictSupport(t, ana.UserID)
		if _, ok := offered(t)[bo]; ok {
			t.Fatal("bo, taken off and deactivated, is still offered")
		}
	})
}
