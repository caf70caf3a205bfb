package audit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

const cast = `
organisations:
  - {slug: acme, name: Acme Corp}
  - {slug: globex, name: Globex}
  - {slug: initech, name: Initech}
agents:
  - {org: acme, slug: architect, name: Architect}
  - {org: globex, slug: qa-lead, name: QA Lead}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true}
      - {agent: globex/qa-lead, part: qa-lead}
    guests:
      - {org: globex, status: active}
`

func TestAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testfix.Seed(t, cast)
	acme, globex, initech := b.Result.Organisations["acme"].ID, b.Result.Organisations["globex"].ID, b.Result.Organisations["initech"].ID
	project := b.Result.Projects["escalations"].ID
	svc := audit.New(b.DB)
	history := func(t *testing.T, reader pg.Tenant, o audit.Object) []audit.Entry {
		t.Helper()
		rows, err := svc.History(ctx, reader, o)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	t.Run("an event is written with the change's transaction and read back newest first", func(t *testing.T) {
		t.Parallel()
		obj := uuid.NewString()
		for _, action := range []string{"created", "renamed"} {
			err := b.DB.InTenant(ctx, pg.Tenant{OrgID: acme}, func(tx *pg.Tx) error {
				return audit.Record(ctx, tx, audit.Event{Actor: audit.Actor{OrgID: acme, Name: "Ana"}, OrgID: acme,
					Kind: audit.KindAgent, ObjectID: obj, Action: action, Detail: map[string]string{"name": action}})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		rows := history(t, pg.Tenant{OrgID: acme}, audit.Object{OrgID: acme, Kind: audit.KindAgent, ID: obj})
		if len(rows) != 2 || rows[0].Action != "renamed" || rows[0].Actor != "Ana" || rows[0].ActorOrg != "Acme Corp" || rows[0].Detail["name"] != "renamed" {
			t.Fatalf("history = %+v", rows)
		}
	})

	t.Run("a change that fails leaves no event", func(t *testing.T) {
		t.Parallel()
		obj := uuid.NewString()
		boom := errors.New("the change failed")
		err := b.DB.InTenant(ctx, pg.Tenant{OrgID: acme}, func(tx *pg.Tx) error {
			if err := audit.Record(ctx, tx, audit.Event{Actor: audit.Actor{OrgID: acme, Name: "Ana"}, OrgID: acme,
				Kind: audit.KindAgent, ObjectID: obj, Action: "created"}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if n := b.Count(t, `SELECT count(*) FROM audit_event WHERE object_id = $1`, obj); n != 0 {
			t.Fatalf("%d events left by a failed change", n)
		}
	})

	t.Run("an intended event is recorded once, by the service's transaction", func(t *testing.T) {
		t.Parallel()
		obj := uuid.NewString()
		ictx := audit.Intend(ctx, audit.Event{Actor: audit.Actor{OrgID: acme, Name: "Ana"}, OrgID: acme, Kind: audit.KindProject, ObjectID: obj, Action: "renamed"})
		if audit.Written(ictx) {
			t.Fatal("written before any transaction")
		}
		for range 2 {
			if err := b.DB.InTenant(ictx, pg.Tenant{OrgID: acme}, func(tx *pg.Tx) error { return audit.RecordIntended(ictx, tx) }); err != nil {
				t.Fatal(err)
			}
		}
		if !audit.Written(ictx) || len(history(t, pg.Tenant{OrgID: acme}, audit.Object{OrgID: acme, Kind: audit.KindProject, ID: obj})) != 1 {
			t.Fatal("the intended event was not recorded exactly once")
		}
	})

	t.Run("owner, actor and party read an object's history; nobody else", func(t *testing.T) {
		t.Parallel()
		obj := uuid.NewString()
		o := audit.Object{OrgID: acme, Kind: audit.KindAgreement, ID: obj}
		// The host invites Globex, then Globex's person accepts in the room.
		err := b.DB.InTenant(ctx, pg.Tenant{OrgID: acme}, func(tx *pg.Tx) error {
			return audit.Record(ctx, tx, audit.Event{Actor: audit.Actor{OrgID: acme, Name: "Ana"}, OrgID: acme, PartyOrgID: globex, Kind: audit.KindAgreement, ObjectID: obj, Action: "invited"})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(history(t, pg.Tenant{OrgID: globex}, o)) != 1 {
			t.Fatal("the party does not read the history of its agreement")
		}
		if len(history(t, pg.Tenant{OrgID: initech}, o)) != 0 {
			t.Fatal("another company reads the history")
		}
		// A row written by the host without naming the party stays the host's.
		other := uuid.NewString()
		err = b.DB.InTenant(ctx, pg.Tenant{OrgID: acme}, func(tx *pg.Tx) error {
			return audit.Record(ctx, tx, audit.Event{Actor: audit.Actor{OrgID: acme, Name: "Ana"}, OrgID: acme, Kind: audit.KindAgent, ObjectID: other, Action: "created"})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(history(t, pg.Tenant{OrgID: globex}, audit.Object{OrgID: acme, Kind: audit.KindAgent, ID: other})) != 0 {
			t.Fatal("a guest reads the host's own history")
		}
	})

	t.Run("a guest writes into the host's history only in a room it is admitted to", func(t *testing.T) {
		t.Parallel()
		obj := uuid.NewString()
		ev := audit.Event{Actor: audit.Actor{OrgID: globex, Name: "Gus"}, OrgID: acme, ProjectID: project, Kind: audit.KindProject, ObjectID: obj, Action: "accepted"}
		if err := b.DB.InTenant(ctx, pg.Tenant{OrgID: globex}, func(tx *pg.Tx) error { return audit.Record(ctx, tx, ev) }); err == nil {
			t.Fatal("a guest wrote into the host's history outside the room")
		}
		if err := b.DB.InTenant(ctx, pg.Tenant{OrgID: globex, ProjectID: project}, func(tx *pg.Tx) error { return audit.Record(ctx, tx, ev) }); err != nil {
			t.Fatalf("in the room: %v", err)
		}
		// Another organisation's name cannot be borrowed as the actor.
		forged := ev
		forged.Actor.OrgID = acme
		if err := b.DB.InTenant(ctx, pg.Tenant{OrgID: globex, ProjectID: project}, func(tx *pg.Tx) error { return audit.Record(ctx, tx, forged) }); err == nil {
			t.Fatal("a guest recorded an event as the host")
		}
		// Host and guest both read it; the guest's own action is visible to it.
		if len(history(t, pg.Tenant{OrgID: acme}, audit.Object{OrgID: acme, Kind: audit.KindProject, ID: obj})) != 1 ||
			len(history(t, pg.Tenant{OrgID: globex}, audit.Object{OrgID: acme, Kind: audit.KindProject, ID: obj})) != 1 {
			t.Fatal("host or guest does not read the guest's action")
		}
	})

	t.Run("the request role cannot rewrite history", func(t *testing.T) {
		t.Parallel()
		err := b.DB.InTenant(ctx, pg.Tenant{OrgID: acme}, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM audit_event`)
			return err
		})
		if err == nil {
			t.Fatal("the request role deleted audit events")
		}
	})
}

// TestOperatorActor: the operator's name comes from the environment; whatever it holds,
// the actor recorded is text the table takes, so the change it records is not refused.
func TestOperatorActor(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"root@bastion":           "operator root@bastion",
		"":                       "operator",
		"ro\x00ot\xff@host":      "operator root@host",
		"ops\x1b[31m\n\u202eli":  "operator ops[31mli",
		strings.Repeat("é", 300): "operator " + strings.Repeat("é", audit.MaxActorName-len("operator ")),
	} {
		if got := audit.OperatorActor(name); got != want {
			t.Errorf("OperatorActor(%q) = %q, want %q", name, got, want)
		}
	}
}
