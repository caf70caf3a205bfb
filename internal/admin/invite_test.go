package admin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestInvitationMakesAMemberOnce: an invitation makes a member and nothing more; any
// other link the person holds (one sent again, an older one with another role) never
// changes the role an owner set since.
func TestInvitationMakesAMemberOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, owner := seededAdmin(t, demo, testfix.Options{})
	acme := owner.OrgID
	invite := func(t *testing.T, email, role string) string {
		t.Helper()
		out, err := svc.Invite(ctx, owner, email, role)
		if err != nil {
			t.Fatal(err)
		}
		return out.URL[strings.LastIndex(out.URL, "/")+1:]
	}
	role := func(t *testing.T, email string) string {
		t.Helper()
		return testfix.Value[string](t, b, `SELECT om.role FROM org_member om JOIN app_user u ON u.id = om.user_id
			WHERE om.org_id = $1 AND u.email = $2`, acme, email)
	}
	signedIn := func(t *testing.T, email string) admin.Joiner {
		t.Helper()
		return admin.Joiner{SignedInEmail: email, SignedIn: testfix.Value[uuid.UUID](t, b, `SELECT id FROM app_user WHERE email = $1`, email)}
	}

	t.Run("a link sent again no longer works once one was accepted", func(t *testing.T) {
		t.Parallel()
		first, resent := invite(t, "zoe@acme.test", "admin"), invite(t, "zoe@acme.test", "admin")
		if err := svc.AcceptInvitation(ctx, first, admin.Joiner{Name: "Zoe", Password: "long enough pw"}); err != nil {
			t.Fatal(err)
		}
		b.Exec(t, `UPDATE org_member SET role = 'member' WHERE org_id = $1
			AND user_id = (SELECT id FROM app_user WHERE email = 'zoe@acme.test')`, acme) // an owner demotes her
		err := svc.AcceptInvitation(ctx, resent, signedIn(t, "zoe@acme.test"))
		if e, ok := apperr.As(err); !ok || e.Code != apperr.NotFound {
			t.Fatalf("the spare link: %v", err)
		}
		if r := role(t, "zoe@acme.test"); r != "member" {
			t.Fatalf("zoe is %q again", r)
		}
	})
	t.Run("a member's older link does not change their role", func(t *testing.T) {
		t.Parallel()
		older := invite(t, "yan@acme.test", "member")
		// Made an owner meanwhile another way (the admin CLI, say) while the link waits.
		b.Exec(t, `WITH u AS (INSERT INTO app_user (id, email, name) VALUES (gen_random_uuid(), 'yan@acme.test', 'Yan') RETURNING id)
			INSERT INTO org_member (org_id, user_id, role) SELECT $1, id, 'owner' FROM u`, acme)
		err := svc.AcceptInvitation(ctx, older, signedIn(t, "yan@acme.test"))
		if e, ok := apperr.As(err); !ok || e.Code != apperr.Conflict || e.Message != admin.MsgInvitationMember {
			t.Fatalf("the older link: %v", err)
		}
		if r := role(t, "yan@acme.test"); r != "owner" {
			t.Fatalf("yan, an owner, is %q", r)
		}
	})
	t.Run("a link stops working when its sender may no longer give its role", func(t *testing.T) {
		t.Parallel()
		b.Exec(t, `WITH u AS (INSERT INTO app_user (id, email, name) VALUES (gen_random_uuid(), 'ada@acme.test', 'Ada') RETURNING id)
			INSERT INTO org_member (org_id, user_id, role) SELECT $1, id, 'admin' FROM u`, acme)
		ada := admin.OrgActor{OrgID: acme, UserID: testfix.Value[uuid.UUID](t, b, `SELECT id FROM app_user WHERE email = 'ada@acme.test'`), Name: "Ada", Role: "admin"}
		out, err := svc.Invite(ctx, ada, "xia@acme.test", "admin")
		if err != nil {
			t.Fatal(err)
		}
		link := out.URL[strings.LastIndex(out.URL, "/")+1:]
		setAda := func(t *testing.T, set string) {
			t.Helper()
			b.Exec(t, `UPDATE org_member SET `+set+` WHERE org_id = $1 AND user_id = $2`, acme, ada.UserID)
		}
		refused := func(t *testing.T, when string) {
			t.Helper()
			if _, err := svc.Invitation(ctx, link); err == nil || !strings.Contains(err.Error(), admin.MsgInvitationSenderCannot) {
				t.Fatalf("%s, the link's page: %v", when, err)
			}
			err := svc.AcceptInvitation(ctx, link, admin.Joiner{Name: "Xia", Password: "long enough pw"})
			if e, ok := apperr.As(err); !ok || e.Code != apperr.NotFound || e.Message != admin.MsgInvitationSenderCannot {
				t.Fatalf("%s, accepting: %v", when, err)
			}
		}
		setAda(t, "role = 'member'") // an owner demotes the admin who sent it
		refused(t, "sender demoted")
		setAda(t, "role = 'admin', deactivated_at = now()")
		refused(t, "sender deactivated")
		setAda(t, "deactivated_at = NULL") // an admin again: the link is hers to give once more
		if err := svc.AcceptInvitation(ctx, link, admin.Joiner{Name: "Xia", Password: "long enough pw"}); err != nil {
			t.Fatal(err)
		}
		if r := role(t, "xia@acme.test"); r != "admin" {
			t.Fatalf("xia is %q", r)
		}
	})
	t.Run("two links of one person accepted at once make one member", func(t *testing.T) {
		t.Parallel()
		for round := range 8 {
			// Someone with an account already (of another organisation), signed in.
			email := fmt.Sprintf("twice%d@acme.test", round)
			b.Exec(t, `INSERT INTO app_user (id, email, name) VALUES (gen_random_uuid(), $1, 'Twice')`, email)
			links := []string{invite(t, email, "member"), invite(t, email, "admin")}
			j := signedIn(t, email)
			errs := make(chan error, 2)
			for _, l := range links {
				go func() { errs <- svc.AcceptInvitation(ctx, l, j) }()
			}
			var ok, refused int
			for range 2 {
				err := <-errs
				switch e, isApp := apperr.As(err); {
				case err == nil:
					ok++
				case isApp && (e.Code == apperr.Conflict || e.Code == apperr.NotFound || e.Code == apperr.Forbidden):
					refused++ // a member already, the link retired, or the account made meanwhile
				default:
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if ok != 1 || refused != 1 {
				t.Fatalf("round %d: %d accepted, %d refused", round, ok, refused)
			}
		}
	})
	t.Run("an account made while a new person accepts is refused, never overwritten", func(t *testing.T) {
		t.Parallel()
		// Another invitation of this email is being accepted by a new person: their
		// account is written, not yet committed, when this link is accepted as a new
		// person too. The acceptance must not take the other's account as its own.
		email := "both@example.test"
		link := invite(t, email, "member")
		first, err := auth.HashPassword("the first person's password")
		if err != nil {
			t.Fatal(err)
		}
		hold := b.Holder(t)
		if _, err := hold.Exec(ctx, `INSERT INTO app_user (id, email, name, password_hash) VALUES (gen_random_uuid(), $1, 'First', $2)`, email, first); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- svc.AcceptInvitation(ctx, link, admin.Joiner{Name: "Second", Password: "another password"})
		}()
		b.AwaitLockWaiter(t, done)
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if e, ok := apperr.As(<-done); !ok || e.Code != apperr.Forbidden || !strings.Contains(e.Message, "has an account") {
			t.Fatalf("the second acceptance: %v", e)
		}
		hash := testfix.Value[string](t, b, `SELECT password_hash FROM app_user WHERE email = $1`, email)
		if err := auth.VerifyPassword(hash, "the first person's password"); err != nil {
			t.Fatalf("the first person's password no longer works: %v", err)
		}
		if name := testfix.Value[string](t, b, `SELECT name FROM app_user WHERE email = $1`, email); name != "First" {
			t.Fatalf("the account's name is now %q", name)
		}
		if n := testfix.Value[int64](t, b, `SELECT count(*) FROM org_member om JOIN app_user u ON u.id = om.user_id WHERE u.email = $1`, email); n != 0 {
			t.Fatalf("the refused acceptance made %d memberships", n)
		}
	})
}

// TestAnInvitationWithdrawnWhileItIsAcceptedMakesNoMember: an owner withdraws a link while
// the invited person's acceptance is under way (it read the link and waits for the
// organisation's turn). The acceptance compared the link's expiry, which a withdrawal moves
// to its own moment, with the acceptance's earlier start, and made the member anyway.
func TestAnInvitationWithdrawnWhileItIsAcceptedMakesNoMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, owner := seededAdmin(t, demo, racing)
	acme := owner.OrgID
	out, err := svc.Invite(ctx, owner, "mallory@example.test", "admin")
	if err != nil {
		t.Fatal(err)
	}
	link := out.URL[strings.LastIndex(out.URL, "/")+1:]
	holder := b.Holder(t) // the organisation's turn for role changes (OrgOwnersLock)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock(7277, hashtext($1::uuid::text))`, acme); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		accepted <- svc.AcceptInvitation(ctx, link, admin.Joiner{Name: "Mallory", Password: "long enough pw"})
	}()
	b.AwaitLockWaiter(t, accepted)
	if err := svc.WithdrawInvitation(ctx, owner, out.ID); err != nil {
		t.Fatalf("withdraw: %v", err)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err == nil {
		t.Fatal("the withdrawn invitation was accepted")
	}
	if n := b.Count(t, `SELECT count(*) FROM org_member om JOIN app_user u ON u.id = om.user_id
		WHERE om.org_id = $1 AND u.email = 'mallory@example.test'`, acme); n != 0 {
		t.Fatalf("the withdrawn invitation made %d members", n)
	}
}
