package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestAdminRefusalsSayWhatIsWrong: a command given a bad value fails with one error that
// names the value and what is accepted, in the command's own words.
func TestAdminRefusalsSayWhatIsWrong(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.New(t))
	if code, _, stderr := runCLI(t, "admin", "apply", "-f", "../../deploy/demo.yaml"); code != 0 {
		t.Fatalf("apply: exit %d: %s", code, stderr)
	}
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
}
