package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestAdminToolsetCommands drives the desk, wake, knowledge, thread and OAuth commands
// the way a script does: each prints JSON on stdout and exits 0, or prints a JSON error
// on stderr and exits 1, and a missing required flag is named (a usage error: exit 2).
func TestAdminToolsetCommands(t *testing.T) {
	t.Setenv("RELAYROOM_PUBLIC_URL", "https://relay.example.test")
	demoDatabase(t)
	exits := func(t *testing.T, exit int, want string, args ...string) {
		t.Helper()
		code, _, stderr := runCLI(t, append([]string{"admin"}, args...)...)
		var e struct{ Error string }
		if code != exit || json.Unmarshal([]byte(stderr), &e) != nil || !strings.Contains(e.Error, want) {
			t.Fatalf("%s: exit %d, stderr %s; want exit %d and an error containing %q", strings.Join(args, " "), code, stderr, exit, want)
		}
	}
	fails := func(t *testing.T, want string, args ...string) { t.Helper(); exits(t, 1, want, args...) }
	misused := func(t *testing.T, want string, args ...string) { t.Helper(); exits(t, 2, want, args...) } // a usage error

	t.Run("a desk token is printed once, listed without its secret, and revoked", func(t *testing.T) {
		var tok struct {
			ID     string   `json:"id"`
			Token  string   `json:"token"`
			Email  string   `json:"email"`
			Scopes []string `json:"scopes"`
		}
		if err := json.Unmarshal([]byte(adminOK(t, "desk", "token", "create", "--workspace", "acme", "--user", "Ana@acme.test")), &tok); err != nil ||
			tok.ID == "" || tok.Token == "" || tok.Email != "ana@acme.test" || len(tok.Scopes) == 0 {
			t.Fatalf("token create printed %+v (%v): want the token, to whom and with which scopes", tok, err)
		}
		if list := adminOK(t, "desk", "token", "list", "--workspace", "acme"); !strings.Contains(list, tok.ID) || strings.Contains(list, tok.Token) {
			t.Fatalf("token list must name the token and never show its secret: %s", list)
		}
		if out := adminOK(t, "desk", "token", "revoke", "--workspace", "acme", "--id", tok.ID); !strings.Contains(out, `"revoked": true`) {
			t.Fatalf("token revoke: %s", out)
		}
		// Created and revoked, both in the holder's history (the revoke was the
		// organisation's, apart from the creation).
		var kinds []string
		conn, err := pgx.Connect(context.Background(), os.Getenv("DATABASE_URL"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(context.Background(), `SELECT DISTINCT object_kind || ':' || object_id FROM audit_event
			WHERE action IN ('desk_token_created', 'desk_token_revoked') AND detail->>'token' = $1`, tok.ID)
		if err == nil {
			kinds, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil || len(kinds) != 1 || !strings.HasPrefix(kinds[0], "person:") {
			t.Fatalf("the token's events are on %v (%v), want one person", kinds, err)
		}
		// Again: nothing to do, not a failure.
		if out := adminOK(t, "desk", "token", "revoke", "--workspace", "acme", "--id", tok.ID); !strings.Contains(out, `"revoked": false`) {
			t.Fatalf("token revoke again: %s", out)
		}
		// A mistyped id, or another workspace's token, names nothing: a failure.
		fails(t, "no token 00000000-0000-0000-0000-000000000000", "desk", "token", "revoke", "--workspace", "acme", "--id", "00000000-0000-0000-0000-000000000000")
		fails(t, "no token "+tok.ID, "desk", "token", "revoke", "--workspace", "globex", "--id", tok.ID)
	})
	t.Run("a desk command names its missing flags and bad values", func(t *testing.T) {
		misused(t, "--id, --workspace", "desk", "token", "revoke")
		misused(t, `--id: "x" is not an id`, "desk", "token", "revoke", "--workspace", "acme", "--id", "x")
		fails(t, "nobody@acme.test is not a member of workspace acme", "desk", "member", "deactivate", "--workspace", "acme", "--user", "nobody@acme.test")
	})
	t.Run("a repeated member change says it changed nothing", func(t *testing.T) {
		if out := adminOK(t, "desk", "member", "deactivate", "--workspace", "acme", "--user", "bo@acme.test"); !strings.Contains(out, `"changed": true`) {
			t.Fatalf("deactivate: %s", out)
		}
		if out := adminOK(t, "desk", "member", "deactivate", "--workspace", "acme", "--user", "bo@acme.test"); !strings.Contains(out, `"changed": false`) {
			t.Fatalf("deactivate again: %s", out)
		}
		if out := adminOK(t, "desk", "member", "reactivate", "--workspace", "acme", "--user", "bo@acme.test"); !strings.Contains(out, `"changed": true`) {
			t.Fatalf("reactivate: %s", out)
		}
	})
	t.Run("the knowledge queue of a project is listed and an unknown entry refused", func(t *testing.T) {
		if out := strings.TrimSpace(adminOK(t, "knowledge", "list", "--project", "acme/escalations")); !strings.HasPrefix(out, "[") {
			t.Fatalf("knowledge list: %s", out)
		}
		misused(t, `--id: "x" is not an id`, "knowledge", "approve", "--project", "acme/escalations", "--id", "x")
		misused(t, "--project", "knowledge", "list")
	})
	t.Run("who decides on knowledge is a plain name, not anything stored as given", func(t *testing.T) {
		// --by is stored as the decider and shown on the review queue: an escape sequence
		// or a megabyte of it was stored as it came.
		const zero = "00000000-0000-0000-0000-000000000000"
		for _, by := range []string{"ana\x1b[31m", "ana\nbo", strings.Repeat("a", 201)} {
			misused(t, "--by: a name of at most 200 characters, without control characters", "knowledge", "approve", "--project", "acme/escalations", "--id", zero, "--by", by)
		}
		misused(t, "--by: a name of at most 200 characters", "knowledge", "reject", "--project", "acme/escalations", "--id", zero, "--by", "a\tb")
		fails(t, "no knowledge entry "+zero, "knowledge", "approve", "--project", "acme/escalations", "--id", zero, "--by", strings.Repeat("é", 200))
	})
	t.Run("a thread id is checked before anything is canceled", func(t *testing.T) {
		misused(t, `--thread: "x" is not an id`, "thread", "cancel", "--project", "acme/escalations", "--thread", "x")
		fails(t, `unknown project "acme/nope"`, "thread", "cancel", "--project", "acme/nope", "--thread", "00000000-0000-0000-0000-000000000000")
		// A value pasted wrong is echoed cut, not whole.
		fails(t, `unknown project "acme/`+strings.Repeat("x", 195)+`…"`, "thread", "cancel", "--project", "acme/"+strings.Repeat("x", 5000), "--thread", "00000000-0000-0000-0000-000000000000")
		fails(t, "no thread 00000000-0000-0000-0000-000000000000 in project acme/escalations", "thread", "cancel", "--project", "acme/escalations", "--thread", "00000000-0000-0000-0000-000000000000")
	})
	t.Run("wake lists answer empty lists, not null", func(t *testing.T) {
		if out := strings.TrimSpace(adminOK(t, "wake", "webhooks")); out != "[]" {
			t.Fatalf("wake webhooks: %s", out)
		}
		misused(t, `--id: "x" is not an id`, "wake", "retry", "--id", "x")
		fails(t, "no wake 00000000-0000-0000-0000-000000000000", "wake", "retry", "--id", "00000000-0000-0000-0000-000000000000")
	})
	t.Run("a flag value that is not text is a usage error, not Postgres's", func(t *testing.T) {
		// Postgres refused it with "invalid byte sequence for encoding UTF8 (SQLSTATE 22021)".
		misused(t, "--client: not valid UTF-8", "oauth", "clients", "revoke", "--client", "\xff")
		misused(t, "--workspace: not valid UTF-8", "desk", "token", "list", "--workspace", "ac\x00me")
		misused(t, "--agent: not valid UTF-8", "agent", "rotate-key", "--agent", "acme/\xff")
	})
	t.Run("a two-word group without its command lists its commands", func(t *testing.T) {
		for group, want := range map[string]string{"oauth clients": "list, revoke", "desk token": "create, list, revoke"} {
			code, _, stderr := runCLI(t, append([]string{"admin"}, strings.Fields(group)...)...)
			if code != 2 || !strings.HasPrefix(stderr, "admin "+group+" needs one of: "+want) {
				t.Fatalf("admin %s: exit %d, %.80s", group, code, stderr)
			}
		}
		code, _, stderr := runCLI(t, "admin", "oauth", "clients", "bogus")
		if code != 2 || !strings.HasPrefix(stderr, `unknown admin command "oauth clients bogus": admin oauth clients needs one of: list, revoke`) {
			t.Fatalf("admin oauth clients bogus: exit %d, %.120s", code, stderr)
		}
	})
	t.Run("desk import reads its flags on either side of the file, and needs one file", func(t *testing.T) {
		csv := filepath.Join(t.TempDir(), "history.csv")
		if err := os.WriteFile(csv, []byte("customer_email,subject,body,created_at,status\nzoe@example.test,Hello,Hi there,2026-11-02T10:00:00Z,open\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out := adminOK(t, "desk", "import", "--workspace", "acme", csv, "--inbox", "support"); !strings.Contains(out, `"created"`) {
			t.Fatalf("import with a flag after the file: %s", out)
		}
		bad := filepath.Join(t.TempDir(), "bad.csv")
		if err := os.WriteFile(bad, []byte("customer_email,subject,body,created_at,status\nnot-an-email,Hello,Hi,2026-11-02T10:00:00Z,open\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// Refused rows are in the error on stderr, one shape for a script to read.
		code, out, stderr := runCLI(t, "admin", "desk", "import", "--workspace", "acme", "--inbox", "support", bad)
		var e struct {
			Error    string
			Problems []struct{ Line int }
		}
		if code != 1 || out != "" || json.Unmarshal([]byte(stderr), &e) != nil || len(e.Problems) != 1 || e.Problems[0].Line != 2 {
			t.Fatalf("a bad file: exit %d, stdout %q, stderr %s", code, out, stderr)
		}
		misused(t, "name one CSV file, got 0", "desk", "import", "--workspace", "acme", "--inbox", "support")
		misused(t, "name one CSV file, got 2", "desk", "import", "--workspace", "acme", "--inbox", "support", csv, csv)
	})
	t.Run("oauth clients and grants", func(t *testing.T) {
		fails(t, `no OAuth client "nobody"`, "oauth", "clients", "revoke", "--client", "nobody")
		misused(t, "required flag(s) given an empty value: --client", "oauth", "clients", "revoke", "--client", "")
		misused(t, `--grant: "x" is not an id`, "oauth", "grants", "revoke", "--grant", "x")
		fails(t, "no OAuth grant 00000000-0000-0000-0000-000000000000", "oauth", "grants", "revoke", "--grant", "00000000-0000-0000-0000-000000000000")
	})
}
