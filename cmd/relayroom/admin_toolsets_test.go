package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestAdminToolsetCommands drives the desk, wake, knowledge, thread and OAuth commands
// the way a script does: each prints JSON on stdout and exits 0, or prints a JSON error
// on stderr and exits 1, and a missing required flag is named (a usage error: exit 2).
func TestAdminToolsetCommands(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.New(t))
	t.Setenv("RELAYROOM_PUBLIC_URL", "https://relay.example.test")
	if code, _, stderr := runCLI(t, "admin", "apply", "-f", "../../deploy/demo.yaml"); code != 0 {
		t.Fatalf("apply the demo: exit %d: %s", code, stderr)
	}
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, append([]string{"admin"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
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
			ID    string `json:"id"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal([]byte(ok(t, "desk", "token", "create", "--workspace", "acme", "--user", "ana@acme.test")), &tok); err != nil || tok.ID == "" || tok.Token == "" {
			t.Fatalf("token create printed %+v (%v)", tok, err)
		}
		if list := ok(t, "desk", "token", "list", "--workspace", "acme"); !strings.Contains(list, tok.ID) || strings.Contains(list, tok.Token) {
			t.Fatalf("token list must name the token and never show its secret: %s", list)
		}
		if out := ok(t, "desk", "token", "revoke", "--workspace", "acme", "--id", tok.ID); !strings.Contains(out, `"revoked": true`) {
			t.Fatalf("token revoke: %s", out)
		}
		// Again: nothing to do, not a failure.
		if out := ok(t, "desk", "token", "revoke", "--workspace", "acme", "--id", tok.ID); !strings.Contains(out, `"revoked": false`) {
			t.Fatalf("token revoke again: %s", out)
		}
		// A mistyped id, or another workspace's token, names nothing: a failure.
		fails(t, "no token 00000000-0000-0000-0000-000000000000", "desk", "token", "revoke", "--workspace", "acme", "--id", "00000000-0000-0000-0000-000000000000")
		fails(t, "no token "+tok.ID, "desk", "token", "revoke", "--workspace", "globex", "--id", tok.ID)
	})
	t.Run("a desk command names its missing flags and bad values", func(t *testing.T) {
		misused(t, "--id, --workspace", "desk", "token", "revoke")
		fails(t, "--id must be a token id", "desk", "token", "revoke", "--workspace", "acme", "--id", "x")
		fails(t, "nobody@acme.test is not a member of workspace acme", "desk", "member", "deactivate", "--workspace", "acme", "--user", "nobody@acme.test")
	})
	t.Run("the knowledge queue of a project is listed and an unknown entry refused", func(t *testing.T) {
		if out := strings.TrimSpace(ok(t, "knowledge", "list", "--project", "acme/escalations")); !strings.HasPrefix(out, "[") {
			t.Fatalf("knowledge list: %s", out)
		}
		fails(t, `--id: "x" is not an id`, "knowledge", "approve", "--project", "acme/escalations", "--id", "x")
		misused(t, "--project", "knowledge", "list")
	})
	t.Run("a thread id is checked before anything is canceled", func(t *testing.T) {
		fails(t, `--thread: "x" is not an id`, "thread", "cancel", "--project", "acme/escalations", "--thread", "x")
		fails(t, `unknown project "acme/nope"`, "thread", "cancel", "--project", "acme/nope", "--thread", "00000000-0000-0000-0000-000000000000")
		fails(t, "no thread 00000000-0000-0000-0000-000000000000 in project acme/escalations", "thread", "cancel", "--project", "acme/escalations", "--thread", "00000000-0000-0000-0000-000000000000")
	})
	t.Run("wake lists answer empty lists, not null", func(t *testing.T) {
		if out := strings.TrimSpace(ok(t, "wake", "webhooks")); out != "[]" {
			t.Fatalf("wake webhooks: %s", out)
		}
		fails(t, "--id must be a wake id", "wake", "retry", "--id", "x")
	})
	t.Run("oauth clients and grants", func(t *testing.T) {
		fails(t, `no OAuth client "nobody"`, "oauth", "clients", "revoke", "--client", "nobody")
		fails(t, "--grant must be a grant id", "oauth", "grants", "revoke", "--grant", "x")
		fails(t, "no OAuth grant 00000000-0000-0000-0000-000000000000", "oauth", "grants", "revoke", "--grant", "00000000-0000-0000-0000-000000000000")
	})
}
