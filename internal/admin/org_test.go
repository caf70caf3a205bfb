package admin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestOrgAdminChangesCarryTheirAudit: a company admin change and its audit event are one
// transaction: when the event cannot be written, the change is undone too.
func TestOrgAdminChangesCarryTheirAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, owner := seededAdmin(t, demo, testfix.Options{})

	t.Run("an event that cannot be written undoes the change", func(t *testing.T) {
		t.Parallel()
		nameless := owner
		nameless.Name = "" // audit.Record refuses an event without its actor's name
		if _, err := svc.CreateAgent(ctx, nameless, admin.AgentSpec{Slug: "ghost", Name: "Ghost"}); err == nil {
			t.Fatal("created without its audit event")
		}
		if n := b.Count(t, `SELECT count(*) FROM agent WHERE slug = 'ghost'`); n != 0 {
			t.Fatal("the agent was stored without its audit event")
		}
		if _, err := svc.RotateOrgAgentKey(ctx, nameless, b.Result.Agents["acme/architect"].ID); err == nil {
			t.Fatal("rotated without its audit event")
		}
		if n := b.Count(t, `SELECT count(*) FROM agent_key WHERE agent_id = $1 AND revoked_at IS NULL`, b.Result.Agents["acme/architect"].ID); n != 1 {
			t.Fatalf("the key was rotated without its audit event (%d active)", n)
		}
	})

	t.Run("a change is written with exactly one event", func(t *testing.T) {
		t.Parallel()
		out, err := svc.CreateAgent(ctx, owner, admin.AgentSpec{Slug: "scribe", Name: "Scribe"})
		if err != nil || out.Key == "" {
			t.Fatalf("create: %v", err)
		}
		if n := b.Count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1 AND action = 'created'`, out.ID.String()); n != 1 {
			t.Fatalf("%d events", n)
		}
	})

	t.Run("a member is refused before anything is read", func(t *testing.T) {
		t.Parallel()
		member := owner
		member.Role = "member"
		_, err := svc.OrgAgents(ctx, member)
		if e, ok := apperr.As(err); !ok || e.Code != apperr.Forbidden {
			t.Fatalf("err = %v", err)
		}
		var in *admin.InputError
		if errors.As(err, &in) {
			t.Fatal("a refusal is not a field error")
		}
	})
}

// ownedBy makes an organisation whose owners are the people named (each name@own.test),
// and returns its id and theirs, in order.
func ownedBy(t *testing.T, svc *admin.Service, names ...string) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	f := admin.File{Organisations: []admin.OrgSpec{{Slug: "own", Name: "Own"}}}
	for _, n := range names {
		f.Users = append(f.Users, admin.UserSpec{Email: n + "@own.test", Name: n, Org: "own", Role: "owner"})
	}
	res, err := svc.Apply(context.Background(), f, admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, len(names))
	for i, n := range names {
		ids[i] = res.Users[n+"@own.test"].ID
	}
	return res.Organisations["own"].ID, ids
}

// TestTwoOwnersDemotingEachOtherLeaveOne: the last-owner rule holds when two owners demote
// each other at the same moment: one change is made, the other refused.
func TestTwoOwnersDemotingEachOtherLeaveOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, _ := seededAdmin(t, demo, racing) // both changes and the test's polls at once
	org, owners := ownedBy(t, svc, "x", "y")
	x, y := owners[0], owners[1]
	// Both changes are held at their UPDATE, after whatever each read before it.
	holder := b.Holder(t)
	if _, err := holder.Exec(ctx, `SELECT 1 FROM org_member WHERE org_id = $1 FOR UPDATE`, org); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() {
		done <- svc.SetRole(ctx, admin.OrgActor{OrgID: org, UserID: x, Name: "X", Role: "owner"}, y, "member")
	}()
	go func() {
		done <- svc.SetRole(ctx, admin.OrgActor{OrgID: org, UserID: y, Name: "Y", Role: "owner"}, x, "member")
	}()
	b.AwaitLockWaiters(t, 2, done)
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var refused int
	for range 2 {
		err := <-done
		var in *admin.InputError
		switch {
		case err == nil:
		case errors.As(err, &in) && in.Fields["role"] == admin.MsgLastOwner:
			refused++
		case apperr.CodeOf(err) == apperr.Forbidden: // the other's change came first: no longer an owner
			refused++
		default:
			t.Fatalf("set role: %v", err)
		}
	}
	if n := b.Count(t, `SELECT count(*) FROM org_member WHERE org_id = $1 AND role = 'owner'`, org); n != 1 || refused != 1 {
		t.Fatalf("%d owners left, %d changes refused; want 1 and 1", n, refused)
	}
}

// TestARoleChangeIsMadeWithTheActorsRoleOfNow: a person demoted a moment ago (their page
// still shows them as an owner) cannot go on changing roles as one.
func TestARoleChangeIsMadeWithTheActorsRoleOfNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, _ := seededAdmin(t, demo, testfix.Options{})
	org, owners := ownedBy(t, svc, "a", "b", "c")
	a, bb, c := owners[0], owners[1], owners[2]
	var err error
	if err = svc.SetRole(ctx, admin.OrgActor{OrgID: org, UserID: a, Name: "A", Role: "owner"}, bb, "member"); err != nil {
		t.Fatal(err)
	}
	err = svc.SetRole(ctx, admin.OrgActor{OrgID: org, UserID: bb, Name: "B", Role: "owner"}, c, "member")
	if e, ok := apperr.As(err); !ok || e.Code != apperr.Forbidden {
		t.Fatalf("B, a member now, demoting C: %v", err)
	}
	if n := b.Count(t, `SELECT count(*) FROM org_member WHERE org_id = $1 AND role = 'owner'`, org); n != 2 {
		t.Fatalf("%d owners, want A and C", n)
	}
}

// TestADeactivatedOwnerIsNotTheOwnerLeft: an organisation keeps an owner who can act. The
// count of owners took in deactivated ones, so the only active owner could demote
// themself beside a deactivated owner and leave nobody able to act for the organisation.
func TestADeactivatedOwnerIsNotTheOwnerLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, _ := seededAdmin(t, demo, testfix.Options{})
	org, owners := ownedBy(t, svc, "a", "b")
	a, bb := owners[0], owners[1]
	testfix.Exec(t, b.DB, `UPDATE org_member SET deactivated_at = now() WHERE org_id = $1 AND user_id = $2`, org, bb)
	err := svc.SetRole(ctx, admin.OrgActor{OrgID: org, UserID: a, Name: "A", Role: "owner"}, a, "admin")
	if err == nil || !strings.Contains(err.Error(), admin.MsgLastOwner) {
		t.Fatalf("the only active owner demoting themself: %v", err)
	}
	// Demoting the deactivated owner leaves the active one: it is allowed.
	if err := svc.SetRole(ctx, admin.OrgActor{OrgID: org, UserID: a, Name: "A", Role: "owner"}, bb, "member"); err != nil {
		t.Fatalf("the active owner demoting the deactivated one: %v", err)
	}
}

// TestAnAgreementRevokedWhileItIsAcceptedStaysRevoked: a revocation and the guest's
// acceptance of a pending agreement at once are made one after the other, never both on
// what each read before the other: a revocation that answered success is not undone by
// an acceptance, whether the host made it on the dashboard or the operator with the CLI
// (`admin agreement set --status revoked`, which took no turn with the dashboard's).
func TestAnAgreementRevokedWhileItIsAcceptedStaysRevoked(t *testing.T) {
	t.Parallel()
	for name, revoke := range map[string]func(context.Context, *admin.Service, admin.OrgActor, uuid.UUID, uuid.UUID) error{
		"by the host": func(ctx context.Context, svc *admin.Service, host admin.OrgActor, project, guest uuid.UUID) error {
			return svc.RevokeAgreement(ctx, host, project, guest)
		},
		"by the operator": func(ctx context.Context, svc *admin.Service, _ admin.OrgActor, _, _ uuid.UUID) error {
			_, err := svc.SetAgreementStatus(ctx, "acme/escalations", "globex", "revoked")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			file := strings.Replace(demo, "{org: globex, status: active,", "{org: globex, status: pending,", 1)
			file = strings.Replace(file, "users:\n", "users:\n  - {email: gus@globex.test, name: Gus, org: globex, role: owner, password: \"correct horse\"}\n", 1)
			b, svc, host := seededAdmin(t, file, racing) // both changes and the test's polls at once
			globex := b.Result.Organisations["globex"].ID
			project := b.Result.Projects["escalations"].ID
			guest := admin.OrgActor{OrgID: globex, UserID: b.Result.Users["gus@globex.test"].ID, Name: "Gus", Role: "owner"}
			// The revocation is held at its update, after what it read; the acceptance starts then.
			revoked, accepted := inTurn(t, b,
				func() error { return revoke(ctx, svc, host, project, globex) },
				func() error { return svc.AcceptAgreement(ctx, guest, project, globex) },
				`SELECT 1 FROM agreement WHERE project_id = $1 AND guest_org_id = $2 FOR UPDATE`, project, globex)
			if revoked != nil {
				t.Fatalf("revoke: %v", revoked)
			}
			if apperr.CodeOf(accepted) != apperr.Conflict {
				t.Fatalf("the acceptance of a revoked agreement: %v", accepted)
			}
			if status := testfix.Value[string](t, b, `SELECT status FROM agreement WHERE project_id = $1 AND guest_org_id = $2`, project, globex); status != "revoked" {
				t.Fatalf("the revoked agreement is %q", status)
			}
		})
	}
}

// TestAdminCreationsAtOnceAreRefusedAsInTurn: an agent created twice with one slug, or two
// agents added under one part, at the same moment. Each passed its duplicate check before
// the other wrote: the second creation overwrote the first agent (both "created"), and the
// second addition failed on the part's unique key as a 503. One is made, the other is
// refused with its field error, as when they come one after the other.
func TestAdminCreationsAtOnceAreRefusedAsInTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refusedOn := func(t *testing.T, field string, errs ...error) {
		t.Helper()
		var made, refused int
		for _, err := range errs {
			var in *admin.InputError
			switch {
			case err == nil:
				made++
			case errors.As(err, &in) && in.Fields[field] != "":
				refused++
			default:
				t.Fatalf("want a %s field error, got %v", field, err)
			}
		}
		if made != 1 || refused != 1 {
			t.Fatalf("%d made, %d refused; want 1 and 1", made, refused)
		}
	}
	t.Run("one slug", func(t *testing.T) {
		t.Parallel()
		b, svc, owner := seededAdmin(t, demo, racing)
		// The agent table is held, so a creation that passed its check waits at its write.
		holder := b.Holder(t)
		if _, err := holder.Exec(ctx, `LOCK TABLE agent IN SHARE MODE`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		for _, name := range []string{"Billing bot", "Support bot"} {
			go func() {
				_, err := svc.CreateAgent(ctx, owner, admin.AgentSpec{Slug: "bot", Name: name})
				done <- err
			}()
		}
		b.AwaitLockWaiters(t, 2, nil)
		if err := holder.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		refusedOn(t, "slug", <-done, <-done)
		if n := b.Count(t, `SELECT count(*) FROM audit_event WHERE action = 'created' AND detail->>'slug' = 'bot'`); n != 1 {
			t.Fatalf("%d creations recorded", n)
		}
	})
	t.Run("one part", func(t *testing.T) {
		t.Parallel()
		b, svc, owner := seededAdmin(t, demo, racing)
		project := b.Result.Projects["escalations"].ID
		var agents []uuid.UUID
		for _, slug := range []string{"one", "two"} {
			out, err := svc.CreateAgent(ctx, owner, admin.AgentSpec{Slug: slug, Name: slug})
			if err != nil {
				t.Fatal(err)
			}
			agents = append(agents, out.ID)
		}
		holder := b.Holder(t)
		if _, err := holder.Exec(ctx, `SELECT 1 FROM project WHERE id = $1 FOR UPDATE`, project); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		for _, id := range agents {
			go func() {
				done <- svc.AddOrgMember(ctx, owner, project, admin.MemberInput{AgentID: id, Part: "reviewer", Access: "write"})
			}()
		}
		b.AwaitLockWaiters(t, 2, nil)
		if err := holder.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		refusedOn(t, "part", <-done, <-done)
	})
}

// TestTheOperatorsGrantsKeepARevocationMadeMeanwhile: `admin agreement set --grants` keeps
// the agreement's status. It read the status in a transaction of its own and wrote it
// back, so a revocation the host made in between was undone: the guest was active again.
func TestTheOperatorsGrantsKeepARevocationMadeMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, host := seededAdmin(t, demo, racing)
	globex := b.Result.Organisations["globex"].ID
	project := b.Result.Projects["escalations"].ID
	// The host's revocation is held at its update; the operator's change starts then.
	revoked, set := inTurn(t, b,
		func() error { return svc.RevokeAgreement(ctx, host, project, globex) },
		func() error {
			_, err := svc.SetAgreement(ctx, "acme/escalations", admin.GuestSpec{Org: "globex", Status: "active", Grants: []string{"read_memory"}}, true, false)
			return err
		},
		`SELECT 1 FROM agreement WHERE project_id = $1 AND guest_org_id = $2 FOR UPDATE`, project, globex)
	if revoked != nil {
		t.Fatalf("revoke: %v", revoked)
	}
	if set != nil {
		t.Fatalf("set grants: %v", set)
	}
	got := testfix.Value[string](t, b, `SELECT status || ' ' || array_to_string(grants, ',') FROM agreement WHERE project_id = $1 AND guest_org_id = $2`, project, globex)
	if got != "revoked read_memory" {
		t.Fatalf("the agreement is %q, want revoked with the new grants", got)
	}
}

// TestTheOperatorsMemberUpdateKeepsAnAccessLoweredMeanwhile: `admin member add
// --nickname` keeps the part's access. It read the access in a transaction of its own and
// wrote it back, so a host's lowering of the part in between was undone.
func TestTheOperatorsMemberUpdateKeepsAnAccessLoweredMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, svc, host := seededAdmin(t, demo, racing)
	project := b.Result.Projects["escalations"].ID
	// The host's change is held at its update; the operator's starts then.
	lowered, set := inTurn(t, b,
		func() error {
			return svc.SetOrgMemberAccess(ctx, host, project, admin.MemberInput{Part: "architect", Access: "read"})
		},
		func() error {
			_, err := svc.SetMember(ctx, "acme/escalations", admin.MemberSpec{Agent: "acme/architect", Nickname: "Arch", Access: "write"},
				admin.MemberKeep{Part: true, Main: true, Access: true, Capabilities: true})
			return err
		},
		`SELECT 1 FROM membership WHERE project_id = $1 AND part = 'architect' FOR UPDATE`, project)
	if lowered != nil {
		t.Fatalf("lower: %v", lowered)
	}
	if set != nil {
		t.Fatalf("set nickname: %v", set)
	}
	got := testfix.Value[string](t, b, `SELECT access || ' ' || array_to_string(capabilities, ',') || ' ' || coalesce(nickname, '')
		FROM membership WHERE project_id = $1 AND part = 'architect'`, project)
	if got != "read  Arch" {
		t.Fatalf("the part is %q, want read, no capabilities, and the new nickname", got)
	}
}
