package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/testfix"
)

// TestAdminRefusalsSayWhatIsWrong: a command given a bad value fails with one error that
// names the value and what is accepted, in the command's own words.
func TestAdminRefusalsSayWhatIsWrong(t *testing.T) {
	demoDatabase(t)
	refused := func(t *testing.T, args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, append([]string{"admin"}, args...)...)
		var failure struct {
			Error    string
			Problems []string
		}
		if code != 1 || out != "" || json.Unmarshal([]byte(stderr), &failure) != nil || failure.Problems != nil {
			t.Fatalf("%v: want exit 1 and one error, got exit %d: %s %s", args, code, out, stderr)
		}
		return failure.Error
	}

	t.Run("member add speaks of its flags, not of a file", func(t *testing.T) {
		got := refused(t, "member", "add", "--project", "acme/escalations", "--agent", "acme/backend", "--access", "root")
		testfix.Check(t, "error", got, `access: must be one of read, write, manager, got "root"`)
	})
	t.Run("agreement set speaks of its flags, not of a file", func(t *testing.T) {
		got := refused(t, "agreement", "set", "--project", "acme/escalations", "--guest", "globex", "--status", "maybe")
		testfix.Check(t, "error", got, `status: must be one of pending, active, revoked, got "maybe"`)
	})
	t.Run("agreement set names the guest by its flag", func(t *testing.T) {
		got := refused(t, "agreement", "set", "--project", "acme/escalations", "--guest", "acme")
		testfix.Check(t, "error", got, `guest: the host "acme" cannot be its own guest`)
	})
	t.Run("a file that declares nothing is refused, not applied as a success", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "empty.yaml")
		if err := os.WriteFile(empty, []byte("# nothing yet\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		testfix.Check(t, "error", refused(t, "apply", "-f", empty), empty+" declares nothing: it needs organisations, users, agents, projects or desk")
	})
	t.Run("a file that is not there is named once", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing.yaml")
		testfix.Check(t, "error", refused(t, "apply", "-f", missing), "-f: open "+missing+": no such file or directory")
	})
	t.Run("an empty value for a flag whose absence means something else is refused, and changes nothing", func(t *testing.T) {
		// --role "" (an unset variable in a script) demoted an owner to member.
		code, out, stderr := runCLI(t, "admin", "user", "create", "--email", "ana@acme.test", "--org", "acme", "--role", "")
		if code != 2 || out != "" {
			t.Fatalf("--role \"\": exit %d: %s %s", code, out, stderr)
		}
		testfix.CheckContains(t, "error", stderr, "--role given an empty value: want owner, admin or member, or leave the flag out")
		for _, args := range [][]string{
			{"agreement", "set", "--project", "acme/escalations", "--guest", "globex", "--status", ""},
			{"org", "create", "--slug", "acme", "--name", "Acme Corp", "--plan", ""},
			{"member", "add", "--project", "acme/escalations", "--agent", "acme/architect", "--part", ""},
		} {
			if code, out, stderr := runCLI(t, append([]string{"admin"}, args...)...); code != 2 || out != "" || !strings.Contains(stderr, "given an empty value") {
				t.Fatalf("%v: exit %d: %s %s", args, code, out, stderr)
			}
		}
		code, out, _ = runCLI(t, "admin", "user", "list", "--org", "acme")
		var users []struct{ Email, Role string }
		if code != 0 || json.Unmarshal([]byte(out), &users) != nil {
			t.Fatalf("user list: exit %d: %s", code, out)
		}
		for _, u := range users {
			if u.Email == "ana@acme.test" {
				testfix.Check(t, "ana's role", u.Role, "owner")
			}
		}
	})
	t.Run("--if-new with --rotate-keys is a usage error", func(t *testing.T) {
		code, out, stderr := runCLI(t, "admin", "apply", "--if-new", "--rotate-keys", "-f", "../../deploy/demo.yaml")
		if code != 2 || out != "" {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
		testfix.CheckContains(t, "error", stderr, "--if-new and --rotate-keys do not go together")
	})
	t.Run("apply without -f names it as its usage does", func(t *testing.T) {
		code, _, stderr := runCLI(t, "admin", "apply")
		if code != 2 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		testfix.CheckContains(t, "error", stderr, "missing required flag(s): -f (see --help)")
	})
	t.Run("a listing's organisation filter given an empty value is refused, not a listing of everyone", func(t *testing.T) {
		for _, args := range [][]string{{"user", "list", "--org", ""}, {"agent", "list", "--org", ""}, {"project", "list", "--host", ""}} {
			code, out, stderr := runCLI(t, append([]string{"admin"}, args...)...)
			if code != 2 || out != "" {
				t.Fatalf("%v: exit %d: %s %s", args, code, out, stderr)
			}
			testfix.CheckContains(t, "error", stderr, args[2]+" given an empty value: name the organisation, or leave the flag out")
		}
	})
}

// terminal is a stdin that Stat says is a terminal.
type terminal struct{ os.FileInfo }

func (terminal) Mode() os.FileMode            { return os.ModeDevice | os.ModeCharDevice }
func (t terminal) Stat() (os.FileInfo, error) { return t, nil }

// TestPromptOnTerminal: a command reading stdin from a person says what it waits for; from
// a pipe it says nothing (its stderr is a script's).
func TestPromptOnTerminal(t *testing.T) {
	t.Run("a terminal is told what to type", func(t *testing.T) {
		var w strings.Builder
		promptOnTerminal(terminal{}, &w, "reading the secret from stdin")
		testfix.Check(t, "prompt", w.String(), "reading the secret from stdin\n")
	})
	t.Run("a pipe is not", func(t *testing.T) {
		r, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer pw.Close()
		var w strings.Builder
		promptOnTerminal(r, &w, "reading the secret from stdin")
		testfix.Check(t, "prompt", w.String(), "")
	})
}
