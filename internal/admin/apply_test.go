package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

const demo = `
organisations:
  - {slug: acme, name: Acme Corp, plan: scale, timezone: America/Los_Angeles}
  - {slug: globex, name: Globex, plan: growth}
users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner, password: "correct horse"}
agents:
  - {org: acme, slug: architect, name: Architect, model: claude-opus-4, kind: always_on}
  - {org: globex, slug: qa-lead, name: QA Lead, model: gpt-5}
projects:
  - slug: escalations
    name: Escalations
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, access: manager, capabilities: [urgent, needsHuman]}
      - {agent: globex/qa-lead, part: qa-lead, access: write}
    guests:
      - {org: globex, status: active, grants: [read_memory, write_memory, assign_tasks]}
`

func newService(t *testing.T) (*admin.Service, *tenancy.Resolver) {
	t.Helper()
	d, _ := pgtest.Open(t)
	return admin.New(d, "https://relay.example.test"), tenancy.NewResolver(d)
}

// applyDemo applies the demo file to a fresh database.
func applyDemo(t *testing.T) (*admin.Service, *tenancy.Resolver, admin.Result) {
	t.Helper()
	svc, res := newService(t)
	out, err := svc.Apply(context.Background(), parse(t, demo), admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return svc, res, out
}

func parse(t *testing.T, s string) admin.File {
	t.Helper()
	f, err := admin.ParseFile(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestApplyIssuesWorkingCredentialsOnceAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, res, first := applyDemo(t)
	key := first.Agents["acme/architect"].Key
	p := first.Projects["escalations"]
	testfix.Step(t, "apply issues an agent key and a connect code", func(t *testing.T) {
		testfix.Check(t, "the key has its prefix", strings.HasPrefix(key, "sk-qyt-"), true)
		testfix.Check(t, "the connect code has its prefix", strings.HasPrefix(p.ConnectCode, "qyt_cc_"), true)
	})
	testfix.Step(t, "apply prints each endpoint's URL", func(t *testing.T) {
		testfix.Check(t, "threads URL", p.URLs.Threads["architect"], "https://relay.example.test/mcp/"+p.ConnectCode+"?part=architect")
		testfix.Check(t, "room URL", p.URLs.Room, "https://relay.example.test/api/mcp/p/"+p.ID.String())
		testfix.Check(t, "all-rooms URL", p.URLs.AllRooms, "https://relay.example.test/api/mcp")
	})
	testfix.Step(t, "the issued key holds the part named in the URL", func(t *testing.T) {
		sc, err := res.Part(ctx, p.ConnectCode, "architect", key)
		if err != nil {
			t.Fatalf("resolve part with the issued credentials: %v", err)
		}
		testfix.Check(t, "main", sc.IsMain, true)
		testfix.Check(t, "access", sc.Access, "manager")
		testfix.Check(t, "capability urgent", sc.HasCapability("urgent"), true)
		testfix.Check(t, "organisation", sc.OrgName, "Acme Corp")
	})
	testfix.Step(t, "a guest's key enters the room as a guest with its grants", func(t *testing.T) {
		guest, err := res.RoomByKey(ctx, first.Agents["globex/qa-lead"].Key, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		testfix.Check(t, "host", guest.IsHost(), false)
		testfix.Check(t, "granted assign_tasks", guest.Granted(tenancy.GrantAssignTasks), true)
	})

	// Applying again changes nothing and prints no credential.
	second, err := svc.Apply(ctx, parse(t, demo), admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Agents["acme/architect"].Key != "" || second.Projects["escalations"].ConnectCode != "" {
		t.Fatalf("a second apply issued credentials again: %+v", second)
	}
	if second.Agents["acme/architect"].ID != first.Agents["acme/architect"].ID || second.Projects["escalations"].ID != p.ID {
		t.Fatal("a second apply created new objects instead of updating")
	}
	if _, err := res.Part(ctx, p.ConnectCode, "architect", key); err != nil {
		t.Fatalf("old credentials stopped working after a plain re-apply: %v", err)
	}

	// Rotating revokes the old credentials and issues new ones.
	third, err := svc.Apply(ctx, parse(t, demo), admin.Options{RotateKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	newKey, newCode := third.Agents["acme/architect"].Key, third.Projects["escalations"].ConnectCode
	if newKey == "" || newKey == key || newCode == "" || newCode == p.ConnectCode {
		t.Fatal("rotation did not issue new credentials")
	}
	if _, err := res.Part(ctx, p.ConnectCode, "architect", key); err == nil {
		t.Fatal("revoked credentials still accepted")
	}
	if _, err := res.Part(ctx, newCode, "architect", newKey); err != nil {
		t.Fatalf("rotated credentials refused: %v", err)
	}
}

func TestApplyRefusesABadFileWholeNamingEachProblem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _ := newService(t)
	bad := strings.Replace(demo, "- {agent: globex/qa-lead, part: qa-lead, access: write}", "- {agent: acme/nobody, part: qa-lead, access: admin}", 1)
	// Go knows "Local" (the server machine's zone); PostgreSQL, which computes the desk
	// reports' days, does not: every report of the workspace failed.
	bad = strings.Replace(bad, "timezone: America/Los_Angeles", "timezone: Local", 1)
	bad = strings.Replace(bad, "{slug: globex, name: Globex, plan: growth}", "{slug: globex, name: Globex, plan: platinum, timezone: localtime}", 1)
	_, err := svc.Apply(ctx, parse(t, bad), admin.Options{})
	var problems admin.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("want Problems, got %v", err)
	}
	testfix.CheckContains(t, "the problems", err.Error(),
		`projects[0].members[1].agent: unknown agent "acme/nobody"`,
		`projects[0].members[1].access: must be one of read, write, manager, got "admin"`,
		`organisations[1].plan: must be one of trial, starter, growth, scale, got "platinum"`,
		`organisations[0].timezone: unknown time zone "Local"`,
		`organisations[1].timezone: unknown time zone "localtime"`,
	)
	// Nothing was half-applied: the valid organisations of the bad file do not exist.
	orgs, err := svc.ListOrganisations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(orgs) != 0 {
		t.Fatalf("a refused file left %d organisations behind", len(orgs))
	}
}

func TestParseFileRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	_, err := admin.ParseFile(strings.NewReader("organisations:\n  - {slug: a, name: A, colour: red}\n"))
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("want an error naming the unknown field, got %v", err)
	}
	f, err := admin.ParseFile(strings.NewReader(`{"organisations":[{"slug":"a","name":"A"}]}`))
	if err != nil || len(f.Organisations) != 1 {
		t.Fatalf("JSON input: %v %+v", err, f)
	}
}

// TestParseFileRefusesWhatItWouldNotApply: a file is applied whole or refused, never in
// part: a second YAML document or JSON value, or a file cut at the size limit, is refused.
func TestParseFileRefusesWhatItWouldNotApply(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ file, says string }{
		"a second YAML document": {"organisations:\n  - {slug: acme, name: Acme}\n---\nagents:\n  - {org: acme, slug: a, name: A}\n", "more than one document"},
		"a second JSON value":    {`{"organisations":[{"slug":"a","name":"A"}]} {"agents":[]}`, "more than one JSON value"},
		"a file past the limit":  {"organisations:\n" + strings.Repeat("  - {slug: acme, name: Acme}\n", admin.MaxFileBytes/28+1), "larger than 8 MiB"},
		// encoding/json kept the last of a repeated key, and matched keys whatever their case.
		"a JSON key twice": {`{"organisations":[{"slug":"a","name":"A"}],"agents":[],"organisations":[{"slug":"b","name":"B"}]}`,
			"organisations: the key appears twice"},
		"a JSON key twice in an entry": {`{"organisations":[{"slug":"a","name":"A","name":"B"}]}`, "organisations[0].name: the key appears twice"},
		"a JSON key in capitals":       {`{"organisations":[{"slug":"a","NAME":"A"}]}`, `organisations[0].NAME: keys are lower case ("name")`},
		// JSON's decoder stored U+FFFD in the byte's place; YAML's refused the file.
		"a JSON file that is not UTF-8": {"{\"organisations\":[\n{\"slug\":\"a\",\"name\":\"A\xffB\"}]}", "line 2 is not valid UTF-8 text"},
		"a YAML file that is not UTF-8": {"organisations:\n  - {slug: a, name: \"A\xffB\"}\n", "line 2 is not valid UTF-8 text"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := admin.ParseFile(strings.NewReader(c.file)); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("want a refusal saying %q, got %v", c.says, err)
			}
		})
	}
	for name, file := range map[string]string{
		"a document that starts with --- is one document": "---\norganisations:\n  - {slug: acme, name: Acme}\n",
		"a document followed by an empty one is one":      "organisations:\n  - {slug: acme, name: Acme}\n---\n",
	} {
		t.Run(name, func(t *testing.T) {
			f, err := admin.ParseFile(strings.NewReader(file))
			if err != nil || len(f.Organisations) != 1 {
				t.Fatalf("%v %+v", err, f)
			}
		})
	}
}

// revokedGuest applies the demo file and revokes Globex's agreement; it returns the
// guest agent's key and the room.
func revokedGuest(t *testing.T) (svc *admin.Service, res *tenancy.Resolver, out admin.Result, key string, room uuid.UUID) {
	t.Helper()
	svc, res, out = applyDemo(t)
	if _, err := svc.SetAgreementStatus(context.Background(), "acme/escalations", "globex", "revoked"); err != nil {
		t.Fatal(err)
	}
	return svc, res, out, out.Agents["globex/qa-lead"].Key, out.Projects["escalations"].ID
}

func TestAgreementRevocationTakesEffectOnTheNextResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, res, _, key, room := revokedGuest(t)
	sc, err := res.RoomByKey(ctx, key, room)
	if err != nil {
		t.Fatal(err)
	}
	if sc.AgreementActive() || sc.Granted(tenancy.GrantReadMemory) || sc.AgreementStatus != "revoked" {
		t.Fatalf("revoked guest still granted: %+v", sc)
	}
	if _, err := svc.SetAgreementStatus(ctx, "acme/escalations", "nobody", "revoked"); err == nil {
		t.Fatal("revoking an unknown organisation's agreement succeeded")
	}
}

// TestApplyIfNewLeavesWhatPeopleChanged: a seed applied on every start (make run, the
// compose file's seed) set back what people had changed since: a revoked agreement was
// active again after a restart. ApplyIfNew changes nothing unless the file declares an
// agent or project the database lacks.
func TestApplyIfNewLeavesWhatPeopleChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, res, out, key, room := revokedGuest(t)
	status := func(t *testing.T) string {
		t.Helper()
		sc, err := res.RoomByKey(ctx, key, room)
		if err != nil {
			t.Fatal(err)
		}
		return sc.AgreementStatus
	}

	t.Run("the same file again changes nothing and names the objects", func(t *testing.T) {
		again, applied, err := svc.ApplyIfNew(ctx, parse(t, demo))
		if err != nil || applied {
			t.Fatalf("applied %v: %v", applied, err)
		}
		if s := status(t); s != "revoked" {
			t.Fatalf("the revoked agreement is %s again", s)
		}
		if again.Projects["escalations"].ID != room || again.Agents["globex/qa-lead"].ID != out.Agents["globex/qa-lead"].ID || again.Agents["globex/qa-lead"].Key != "" {
			t.Fatalf("the result: %+v", again)
		}
	})
	t.Run("an agent whose keys were revoked is nothing new", func(t *testing.T) {
		// Its keys revoked on the dashboard: the apply would issue it one, which counted as
		// new and re-applied the whole file.
		owner := admin.OrgActor{OrgID: out.Organisations["acme"].ID, UserID: out.Users["ana@acme.test"].ID, Name: "Ana", Role: "owner"}
		if n, err := svc.RevokeOrgAgentKeys(ctx, owner, out.Agents["acme/architect"].ID); err != nil || n == 0 {
			t.Fatalf("revoke: %d %v", n, err)
		}
		again, applied, err := svc.ApplyIfNew(ctx, parse(t, demo))
		if err != nil || applied {
			t.Fatalf("applied %v: %v", applied, err)
		}
		if again.Agents["acme/architect"].Key != "" {
			t.Fatal("the revoked agent was given a key")
		}
		if s := status(t); s != "revoked" {
			t.Fatalf("the revoked agreement is %s again", s)
		}
	})
	t.Run("a file that gained an agent is applied, with the new agent's key", func(t *testing.T) {
		grown := "agents:\n  - {org: acme, slug: scribe, name: Scribe, model: claude-haiku-4, kind: session}\n"
		again, applied, err := svc.ApplyIfNew(ctx, parse(t, grown))
		if err != nil || !applied {
			t.Fatalf("applied %v: %v", applied, err)
		}
		if !strings.HasPrefix(again.Agents["acme/scribe"].Key, "sk-qyt-") {
			t.Fatalf("no key for the new agent: %+v", again.Agents["acme/scribe"])
		}
	})
}

// TestPeoplesNamesAreKeptAndBounded: a file entry adding a person to a second
// organisation (email, org, role: no name) erased their name in every organisation, and
// names and nicknames had no bound: a 252-character name could not post in a room.
func TestPeoplesNamesAreKeptAndBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _, _ := applyDemo(t)

	t.Run("a person listed again without a name keeps theirs", func(t *testing.T) {
		if _, err := svc.Apply(ctx, parse(t, "users:\n  - {email: ana@acme.test, org: globex, role: member}\n"), admin.Options{}); err != nil {
			t.Fatal(err)
		}
		users, err := svc.ListUsers(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if u.Email == "ana@acme.test" && u.Name != "Ana" {
				t.Fatalf("ana in %s is named %q", u.OrgSlug, u.Name)
			}
		}
	})
	t.Run("names and nicknames are bounded and plain", func(t *testing.T) {
		long := strings.Repeat("é", admin.MaxNameRunes) // 200 characters, 400 bytes: fits
		file := "users:\n  - {email: long@acme.test, org: acme, name: \"" + long + "\"}\n" +
			"  - {email: longer@acme.test, org: acme, name: \"" + long + "x\"}\n" +
			"  - {email: lines@acme.test, org: acme, name: \"a\\nb\"}\n" +
			"projects:\n  - slug: escalations\n    name: Escalations\n    host: acme\n    members:\n" +
			"      - {agent: acme/architect, part: architect, main: true, nickname: \"red\\e[31m\"}\n"
		_, err := svc.Apply(ctx, parse(t, file), admin.Options{})
		testfix.CheckContains(t, "the problems", fmt.Sprint(err),
			"users[1].name: at most 200 characters", "users[2].name: must not hold control characters",
			"projects[0].members[0].nickname: must not hold control characters")
		if strings.Contains(fmt.Sprint(err), "users[0]") {
			t.Fatalf("a name of 200 characters refused: %v", err)
		}
	})
	t.Run("a password is one that can be typed and hashed, said before anything is written", func(t *testing.T) {
		// Built, not parsed: a file that is not UTF-8 is refused whole; RELAYROOM_PASSWORD is not.
		f := admin.File{Users: []admin.UserSpec{
			{Email: "long@acme.test", Org: "acme", Password: strings.Repeat("p", auth.MaxPasswordBytes+1)},
			{Email: "bytes@acme.test", Org: "acme", Password: "pass\xffword"},
		}}
		_, err := svc.Apply(ctx, f, admin.Options{})
		testfix.CheckContains(t, "the problems", fmt.Sprint(err), "users[0].password: at most 1024 bytes", "users[1].password: must be UTF-8 text")
	})
	t.Run("an email address is bounded, not refused by the database's index", func(t *testing.T) {
		at := "@acme.test"
		fits := strings.Repeat("a", admin.MaxEmailBytes-len(at)) + at
		file := "users:\n  - {email: " + fits + ", org: acme}\n  - {email: x" + fits + ", org: acme}\n"
		_, err := svc.Apply(ctx, parse(t, file), admin.Options{})
		testfix.CheckContains(t, "the problems", fmt.Sprint(err), "users[1].email: at most 320 characters")
		if strings.Contains(fmt.Sprint(err), "users[0]") || strings.Contains(fmt.Sprint(err), "SQLSTATE") {
			t.Fatalf("want only users[1] refused, by the file's check: %v", err)
		}
	})
}

// TestAnOrganisationKeepsWhatTheFileLeavesOut: a file that names an existing organisation
// without its plan or time zone (to rename it, say) keeps them, as `admin org create`
// does; it put a paying organisation back on trial, in UTC. A new one is trial, in UTC.
func TestAnOrganisationKeepsWhatTheFileLeavesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _, _ := applyDemo(t)
	if _, err := svc.Apply(ctx, parse(t, "organisations:\n  - {slug: acme, name: Acme Inc}\n  - {slug: initech, name: Initech}\n"), admin.Options{}); err != nil {
		t.Fatal(err)
	}
	orgs, err := svc.ListOrganisations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]admin.OrganisationLine{}
	for _, o := range orgs {
		got[o.Slug] = o
	}
	t.Run("an existing one keeps its plan and time zone, and takes the new name", func(t *testing.T) {
		if a := got["acme"]; a.Name != "Acme Inc" || a.Plan != "scale" || a.Timezone != "America/Los_Angeles" {
			t.Fatalf("acme: %+v", a)
		}
	})
	t.Run("a new one is on trial, in UTC", func(t *testing.T) {
		if i := got["initech"]; i.Plan != "trial" || i.Timezone != "UTC" {
			t.Fatalf("initech: %+v", i)
		}
	})
	t.Run("a plan or time zone given still changes", func(t *testing.T) {
		if _, err := svc.Apply(ctx, parse(t, "organisations:\n  - {slug: acme, name: Acme Inc, plan: growth, timezone: Europe/Berlin}\n"), admin.Options{}); err != nil {
			t.Fatal(err)
		}
		orgs, err := svc.ListOrganisations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range orgs {
			if o.Slug == "acme" && (o.Plan != "growth" || o.Timezone != "Europe/Berlin") {
				t.Fatalf("acme: %+v", o)
			}
		}
	})
}

// TestApplySwapsMembersParts: a file that gives two members each other's parts was
// refused ("part … is already held"): its upserts, one at a time, collided on the unique
// part before the last. The swap now applies, and a part held by a member the file does
// not declare is still refused.
func TestApplySwapsMembersParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _, out := applyDemo(t)
	swapped := strings.NewReplacer("part: architect", "part: qa-lead", "part: qa-lead", "part: architect").Replace(demo)
	t.Run("two members trade parts", func(t *testing.T) {
		again, err := svc.Apply(ctx, parse(t, swapped), admin.Options{})
		if err != nil {
			t.Fatalf("the swap: %v", err)
		}
		members, err := svc.ListMembers(ctx, "acme/escalations")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, m := range members {
			got[m.OrgSlug+"/"+m.AgentSlug] = m.Part
		}
		if got["acme/architect"] != "qa-lead" || got["globex/qa-lead"] != "architect" || len(got) != 2 {
			t.Fatalf("the parts after the swap: %v", got)
		}
		if again.Projects["escalations"].ID != out.Projects["escalations"].ID {
			t.Fatal("the swap made another project")
		}
	})
	t.Run("a part held by a member the file does not declare is refused", func(t *testing.T) {
		// globex/qa-lead holds "architect" since the swap, and this file leaves it out.
		only := strings.Replace(demo, "      - {agent: globex/qa-lead, part: qa-lead, access: write}\n", "", 1)
		if _, err := svc.Apply(ctx, parse(t, only), admin.Options{}); err == nil || !strings.Contains(err.Error(), `part "architect" is already held`) {
			t.Fatalf("a part held by an undeclared member: %v", err)
		}
	})
}

func TestApplyOneProjectSlugUnderTwoHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _ := newService(t)
	// A project's slug is unique per host: Acme's "escalations" and Globex's are two
	// projects. The file was refused as declaring a duplicate project.
	both := demo + `
  - slug: escalations
    name: Globex escalations
    host: globex
    members:
      - {agent: globex/qa-lead, part: qa-lead, main: true}
`
	t.Run("each host's project is applied and named host/slug in the output", func(t *testing.T) {
		out, err := svc.Apply(ctx, parse(t, both), admin.Options{})
		if err != nil {
			t.Fatalf("the file: %v", err)
		}
		acme, globex := out.Projects["acme/escalations"], out.Projects["globex/escalations"]
		if len(out.Projects) != 2 || acme.ID == uuid.Nil || globex.ID == uuid.Nil || acme.ID == globex.ID {
			t.Fatalf("the projects: %+v", out.Projects)
		}
		if acme.ConnectCode == "" || globex.ConnectCode == "" || acme.ConnectCode == globex.ConnectCode {
			t.Fatalf("each project gets its own connect code: %q and %q", acme.ConnectCode, globex.ConnectCode)
		}
		members, err := svc.ListMembers(ctx, "globex/escalations")
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 1 || members[0].OrgSlug != "globex" || members[0].Part != "qa-lead" {
			t.Fatalf("Globex's project's members: %+v", members)
		}
	})
	t.Run("the same host's slug twice is still refused", func(t *testing.T) {
		twice := strings.Replace(both, "host: globex", "host: acme", 1)
		if _, err := svc.Apply(ctx, parse(t, twice), admin.Options{}); err == nil || !strings.Contains(err.Error(), `projects[1].slug: duplicate project "escalations" of "acme"`) {
			t.Fatalf("one host's slug twice: %v", err)
		}
	})
}
