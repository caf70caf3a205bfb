package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// demoDatabase points DATABASE_URL at a fresh database with deploy/demo.yaml applied
// through the CLI, as an operator sets one up, and returns the database's URL.
func demoDatabase(t *testing.T) string {
	t.Helper()
	dbURL := pgtest.New(t)
	t.Setenv("DATABASE_URL", dbURL)
	if code, _, stderr := runCLI(t, "admin", "apply", "-f", "../../deploy/demo.yaml"); code != 0 {
		t.Fatalf("apply the demo: exit %d: %s", code, stderr)
	}
	return dbURL
}

// adminOK runs `relayroom admin args...` and returns its stdout, failing the test unless
// it exits 0.
func adminOK(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"admin"}, args...)...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return out
}

// TestAdminCLI drives the admin commands as a script would: JSON on stdout, a key shown
// once, errors as JSON on stderr with exit 1, usage errors exit 2.
func TestAdminCLI(t *testing.T) {
	dbURL := pgtest.New(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("RELAYROOM_OPERATOR", "ops-test@bastion")
	t.Setenv("RELAYROOM_PUBLIC_URL", "https://relay.example.test")
	dir := t.TempDir()
	file := filepath.Join(dir, "demo.yaml")
	demo, err := os.ReadFile("../../deploy/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, demo, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := runCLI(t, "admin", "apply", "-f", file)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s", code, stderr)
	}
	var res struct {
		Agents   map[string]struct{ ID, Key string }
		Projects map[string]struct {
			ID          string
			ConnectCode string `json:"connect_code"`
			URLs        struct {
				Threads map[string]string
				Room    string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("apply output is not JSON: %v\n%s", err, out)
	}
	p := res.Projects["escalations"]
	if !strings.HasPrefix(res.Agents["acme/architect"].Key, "sk-qyt-") || p.URLs.Threads["qa-lead"] != "https://relay.example.test/mcp/"+p.ConnectCode+"?part=qa-lead" {
		t.Fatalf("apply output: %s", out)
	}

	code, out, _ = runCLI(t, "admin", "apply", "-f", file)
	if code != 0 || strings.Contains(out, "sk-qyt-") || strings.Contains(out, "qyt_cc_") {
		t.Fatalf("a second apply printed credentials again (exit %d): %s", code, out)
	}

	code, out, _ = runCLI(t, "admin", "agent", "rotate-key", "--agent", "acme/architect")
	if code != 0 || !strings.Contains(out, "sk-qyt-") || strings.Contains(out, res.Agents["acme/architect"].Key) {
		t.Fatalf("rotate-key: exit %d: %s", code, out)
	}

	code, out, _ = runCLI(t, "admin", "member", "list", "--project", "acme/escalations")
	var members []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &members) != nil || len(members) != 3 {
		t.Fatalf("member list: exit %d: %s", code, out)
	}
	// An operator with many organisations lists one's; a mistyped one fails, not empty.
	for _, c := range []struct {
		args []string
		key  string
	}{{[]string{"agent", "list", "--org", "globex"}, "org"}, {[]string{"user", "list", "--org", "globex"}, "org"}, {[]string{"project", "list", "--host", "acme"}, "host"}} {
		code, out, _ := runCLI(t, append([]string{"admin"}, c.args...)...)
		var lines []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) == 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, out)
		}
		for _, l := range lines {
			if l[c.key] != c.args[3] {
				t.Fatalf("%v lists %v", c.args, l)
			}
		}
		code, _, stderr := runCLI(t, "admin", c.args[0], "list", c.args[2], "nope")
		if code != 1 || !strings.Contains(stderr, `unknown organisation \"nope\"`) {
			t.Fatalf("%s list %s nope: exit %d, %s", c.args[0], c.args[2], code, stderr)
		}
	}
	// Every listing's keys are snake_case like every other admin output (they were sqlc's
	// Go field names: "OrgSlug").
	for _, args := range [][]string{{"org", "list"}, {"user", "list"}, {"agent", "list"}, {"project", "list"},
		{"member", "list", "--project", "acme/escalations"}, {"agreement", "list", "--project", "acme/escalations"}} {
		code, out, _ := runCLI(t, append([]string{"admin"}, args...)...)
		var lines []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) == 0 {
			t.Fatalf("%v: exit %d: %s", args, code, out)
		}
		for k := range lines[0] {
			if k != strings.ToLower(k) {
				t.Errorf("%v: key %q is not snake_case", args, k)
			}
		}
	}

	code, _, stderr = runCLI(t, "admin", "agreement", "revoke", "--project", "acme/escalations", "--guest", "globex")
	if code != 0 {
		t.Fatalf("agreement revoke: %s", stderr)
	}
	code, out, _ = runCLI(t, "admin", "agreement", "list", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, `"revoked"`) {
		t.Fatalf("agreement list after revoke: %s", out)
	}

	// An update changes only what its flags name: new grants leave a revoked guest revoked.
	code, _, stderr = runCLI(t, "admin", "agreement", "set", "--project", "acme/escalations", "--guest", "globex", "--grants", "read_memory")
	if code != 0 {
		t.Fatalf("agreement set: exit %d: %s", code, stderr)
	}
	code, out, _ = runCLI(t, "admin", "agreement", "list", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, `"revoked"`) || strings.Contains(out, `"active"`) || !strings.Contains(out, "read_memory") {
		t.Fatalf("agreement list after set --grants: exit %d: %s", code, out)
	}
	// The commands that change one part of an existing project keep its name.
	code, _, stderr = runCLI(t, "admin", "agreement", "set", "--project", "acme/escalations", "--guest", "globex", "--status", "active")
	if code != 0 {
		t.Fatalf("agreement set: exit %d: %s", code, stderr)
	}
	code, out, _ = runCLI(t, "admin", "agreement", "list", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, `"active"`) || !strings.Contains(out, "read_memory") {
		t.Fatalf("agreement list after set --status active: exit %d: %s", code, out)
	}
	// A flag after a stray argument would go unread: the command refuses, changing nothing.
	if code, _, _ = runCLI(t, "admin", "member", "add", "--project", "acme/escalations", "--agent", "acme/backend", "--main", "true", "--access", "read"); code != 2 {
		t.Fatalf("member add with a stray argument exits %d, want 2", code)
	}
	code, _, stderr = runCLI(t, "admin", "member", "add", "--project", "acme/escalations", "--agent", "acme/backend", "--access", "manager")
	if code != 0 {
		t.Fatalf("member add --access manager: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "admin", "member", "add", "--project", "acme/escalations", "--agent", "acme/backend", "--nickname", "Bea")
	if code != 0 {
		t.Fatalf("member add --nickname: exit %d: %s", code, stderr)
	}
	code, out, _ = runCLI(t, "admin", "member", "list", "--project", "acme/escalations")
	if err := json.Unmarshal([]byte(out), &members); code != 0 || err != nil {
		t.Fatalf("member list: exit %d: %s", code, out)
	}
	found := false
	for _, m := range members {
		if m["agent_slug"] == "backend" {
			found = true
			if m["access"] != "manager" || m["nickname"] != "Bea" {
				t.Fatalf("an update of the nickname changed the rest of the membership: %v", m)
			}
		}
	}
	if !found {
		t.Fatalf("backend is not in the member list: %s", out)
	}
	code, _, stderr = runCLI(t, "admin", "member", "add", "--project", "acme/escalations", "--agent", "acme/architect", "--part", "reviewer")
	if code != 0 {
		t.Fatalf("member add: exit %d: %s", code, stderr)
	}
	code, out, _ = runCLI(t, "admin", "member", "list", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, `"reviewer"`) {
		t.Fatalf("member list after add (the architect's part is now reviewer): exit %d: %s", code, out)
	}
	code, out, _ = runCLI(t, "admin", "project", "list")
	if code != 0 || !strings.Contains(out, `"Escalations"`) {
		t.Fatalf("the project lost its name (exit %d): %s", code, out)
	}
	code, out, stderr = runCLI(t, "admin", "knowledge", "list", "--project", "acme/escalations")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("knowledge list: exit %d: %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "admin", "project", "ci-token", "--project", "acme/escalations")
	var ci struct {
		ID      string `json:"id"`
		CIToken string `json:"ci_token"`
	}
	if err := json.Unmarshal([]byte(out), &ci); code != 0 || err != nil || !strings.HasPrefix(ci.CIToken, "qyt_ci_") || ci.ID == "" {
		t.Fatalf("project ci-token: exit %d: %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "admin", "project", "ci-token", "list", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, ci.ID) || strings.Contains(out, ci.CIToken) || strings.Contains(out, "revoked_at") {
		t.Fatalf("project ci-token list: exit %d: %s %s", code, out, stderr)
	}
	for _, want := range []string{`"revoked": true`, `"revoked": false`} {
		code, out, stderr = runCLI(t, "admin", "project", "ci-token", "revoke", "--project", "acme/escalations", "--id", ci.ID)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("project ci-token revoke, want %s: exit %d: %s %s", want, code, out, stderr)
		}
	}
	code, out, _ = runCLI(t, "admin", "project", "ci-token", "list", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, "revoked_at") {
		t.Fatalf("project ci-token list after revoke: exit %d: %s", code, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("agents:\n  - {org: nobody, slug: x, name: X}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "admin", "apply", "-f", bad)
	var failure struct {
		Error    string
		Problems []string
	}
	if code != 1 || json.Unmarshal([]byte(stderr), &failure) != nil || len(failure.Problems) != 1 || failure.Problems[0] != `agents[0].org: unknown organisation "nobody"` {
		t.Fatalf("bad file: exit %d: %s", code, stderr)
	}

	// A one-object command has no file: its problem is said without the file's words.
	code, _, stderr = runCLI(t, "admin", "agent", "create", "--org", "nobody", "--slug", "x", "--name", "X")
	failure.Problems = nil
	if code != 1 || json.Unmarshal([]byte(stderr), &failure) != nil || failure.Error != `org: unknown organisation "nobody"` || failure.Problems != nil {
		t.Fatalf("agent create in an unknown organisation: exit %d: %s", code, stderr)
	}

	if code, _, stderr = runCLI(t, "admin", "agent", "rotate-key"); code != 2 || !strings.Contains(stderr, "missing required flag(s): --agent") {
		t.Fatalf("a missing required flag exits %d, want 2: %s", code, stderr)
	}
	if code, _, _ = runCLI(t, "admin", "org", "list", "--bogus"); code != 2 {
		t.Fatalf("an unknown flag exits %d, want 2", code)
	}
	if code, _, _ = runCLI(t, "admin", "nonsense", "cmd"); code != 2 {
		t.Fatalf("an unknown command exits %d, want 2", code)
	}
	if code, _, stderr = runCLI(t, "admin", "nonsense"); code != 2 || !strings.HasPrefix(stderr, `unknown admin command "nonsense"`) {
		t.Fatalf("a lone unknown word exits %d, want 2 and its name: %.80s", code, stderr)
	}
	if code, _, stderr = runCLI(t, "admin", "org"); code != 2 || !strings.HasPrefix(stderr, "admin org needs one of: create, list") {
		t.Fatalf("a group without its command exits %d, want 2 and its commands: %.80s", code, stderr)
	}
	if code, _, stderr = runCLI(t, "admin", "org", "--help"); code != 2 || !strings.HasPrefix(stderr, "admin org needs one of: create, list") {
		t.Fatalf("a group's --help exits %d, want 2 and its commands, not an unknown command \"org --help\": %.80s", code, stderr)
	}
	if code, _, _ = runCLI(t, "admin", "org", "create", "--help"); code != 0 {
		t.Fatalf("--help exits %d, want 0", code)
	}

	// What the operator changed is in the audit trail, under their name: the CLI works
	// across tenants with the owner's role, and left no trail at all.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, c := range []struct{ kind, action string }{
		{"organisation", "created"}, {"person", "created"}, {"agent", "created"}, {"project", "created"},
		{"project", "member_set"}, {"agreement", "set"}, {"agent", "key_rotated"}, {"agreement", "status_set"},
		{"project", "ci_token_issued"}, {"project", "ci_token_revoked"},
	} {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_event WHERE object_kind = $1 AND action = $2
			AND actor_name = 'operator ops-test@bastion' AND actor_user_id IS NULL`, c.kind, c.action).Scan(&n); err != nil || n == 0 {
			t.Errorf("no %s %s event by the operator (%v)", c.kind, c.action, err)
		}
	}

	// Without RELAYROOM_PUBLIC_URL the URLs printed are the listen address's, which reach
	// only this machine: said on stderr, not only in the docs.
	t.Setenv("RELAYROOM_PUBLIC_URL", "")
	code, out, stderr = runCLI(t, "admin", "project", "rotate-code", "--project", "acme/escalations")
	if code != 0 || !strings.Contains(out, "http://localhost:48801/") || !strings.Contains(stderr, "RELAYROOM_PUBLIC_URL is not set") {
		t.Fatalf("rotate-code without a public URL: exit %d: %s %s", code, out, stderr)
	}
}

// TestAdminUpdatesKeepWhatTheirFlagsDoNotName: "create or update" commands run on an
// existing object change the fields their flags name and keep the others, not the flags'
// defaults.
func TestAdminUpdatesKeepWhatTheirFlagsDoNotName(t *testing.T) {
	t.Setenv("RELAYROOM_PUBLIC_URL", "https://relay.example.test")
	demoDatabase(t)
	list := func(t *testing.T, what string, into any) {
		t.Helper()
		out := adminOK(t, what, "list")
		if err := json.Unmarshal([]byte(out), into); err != nil {
			t.Fatalf("%s list: %v\n%s", what, err, out)
		}
	}
	t.Run("an agent renamed stays always-on with its model", func(t *testing.T) {
		adminOK(t, "agent", "create", "--org", "acme", "--slug", "architect", "--name", "Architect Two")
		var agents []struct {
			OrgSlug                 string `json:"org"`
			Slug, Name, Model, Kind string
		}
		list(t, "agent", &agents)
		for _, a := range agents {
			if a.OrgSlug == "acme" && a.Slug == "architect" && (a.Name != "Architect Two" || a.Kind != "always_on" || a.Model != "claude-opus-4") {
				t.Fatalf("%+v", a)
			}
		}
	})
	t.Run("a person given a password keeps their name and role", func(t *testing.T) {
		t.Setenv("RELAYROOM_PASSWORD", "a-new-password-for-ana")
		adminOK(t, "user", "create", "--email", "ana@acme.test", "--org", "acme")
		var users []struct {
			Email, Name, Role string
			OrgSlug           string `json:"org"`
		}
		list(t, "user", &users)
		for _, u := range users {
			if u.Email == "ana@acme.test" && u.OrgSlug == "acme" && (u.Name != "Ana" || u.Role != "owner") {
				t.Fatalf("%+v", u)
			}
		}
	})
	t.Run("an organisation renamed keeps its plan and time zone", func(t *testing.T) {
		adminOK(t, "org", "create", "--slug", "acme", "--name", "Acme Corporation")
		var orgs []struct{ Slug, Name, Plan, Timezone string }
		list(t, "org", &orgs)
		for _, o := range orgs {
			if o.Slug == "acme" && (o.Name != "Acme Corporation" || o.Plan != "scale" || o.Timezone != "America/Los_Angeles") {
				t.Fatalf("%+v", o)
			}
		}
	})
	// "create" on an existing slug updates: the output says which it was, since a mistyped
	// slug naming another object looked the same.
	t.Run("the output says whether the object was created or updated", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"org", "create", "--slug", "acme", "--name", "Acme"}, `"created": false`},
			{[]string{"org", "create", "--slug", "umbrella", "--name", "Umbrella"}, `"created": true`},
			{[]string{"agent", "create", "--org", "acme", "--slug", "architect", "--name", "Architect"}, `"created": false`},
			{[]string{"agent", "create", "--org", "acme", "--slug", "newcomer", "--name", "Newcomer"}, `"created": true`},
			{[]string{"project", "create", "--host", "acme", "--slug", "escalations", "--name", "Escalations"}, `"created": false`},
		} {
			if out := adminOK(t, c.args...); !strings.Contains(out, c.want) {
				t.Errorf("%v: want %s in %s", c.args, c.want, out)
			}
		}
	})
	t.Run("a field a flag names is changed", func(t *testing.T) {
		adminOK(t, "agent", "create", "--org", "acme", "--slug", "architect", "--name", "Architect", "--kind", "session")
		var agents []struct {
			OrgSlug    string `json:"org"`
			Slug, Kind string
		}
		list(t, "agent", &agents)
		for _, a := range agents {
			if a.OrgSlug == "acme" && a.Slug == "architect" && a.Kind != "session" {
				t.Fatalf("%+v", a)
			}
		}
	})
}

// TestWakeListRefusesWhatItCannotAnswer: a misspelt status or an out-of-range limit is an
// error, not an empty list that reads as "no dead letters".
func TestWakeListRefusesWhatItCannotAnswer(t *testing.T) {
	demoDatabase(t)
	for _, args := range [][]string{{"--status", "daed"}, {"--limit", "0"}, {"--limit", "20000"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"admin", "wake", "list"}, args...)...)
			if code != 1 || !strings.Contains(stderr, args[0][2:]+" must be") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
			}
		})
	}
	t.Run("--dead with another status is a usage error, not the dead letters", func(t *testing.T) {
		code, out, stderr := runCLI(t, "admin", "wake", "list", "--dead", "--status", "pending")
		if code != 2 || out != "" || !strings.Contains(stderr, "--dead is --status dead: it does not go with --status pending") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		if code, out, stderr := runCLI(t, "admin", "wake", "list", "--dead", "--status", "dead"); code != 0 || strings.TrimSpace(out) != "[]" {
			t.Fatalf("--dead --status dead: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
	})
	t.Run("a known status lists", func(t *testing.T) {
		if code, out, stderr := runCLI(t, "admin", "wake", "list", "--status", "dead"); code != 0 || strings.TrimSpace(out) != "[]" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
	})
}

// TestAgreementRevokeRepeated: a revocation repeated by a script printed the same as the
// first and recorded one more status_set in the host's history each time; like the other
// revoke commands it says it changed nothing.
func TestAgreementRevokeRepeated(t *testing.T) {
	dbURL := demoDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	events := func(t *testing.T) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_event WHERE action = 'status_set'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	revoke := func(t *testing.T) string {
		t.Helper()
		return adminOK(t, "agreement", "revoke", "--project", "acme/escalations", "--guest", "globex")
	}
	t.Run("the first revocation changes the agreement and is recorded", func(t *testing.T) {
		testfix.CheckContains(t, "output", revoke(t), `"changed": true`, `"status": "revoked"`)
		testfix.Check(t, "status_set events", events(t), 1)
	})
	t.Run("a repeat says it changed nothing and records nothing", func(t *testing.T) {
		testfix.CheckContains(t, "output", revoke(t), `"changed": false`, `"status": "revoked"`)
		testfix.Check(t, "status_set events", events(t), 1)
	})
}
