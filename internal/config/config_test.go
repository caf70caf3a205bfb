package config_test

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
)

// loadURL reads a configuration whose only setting is DATABASE_URL.
func loadURL(u string) (config.Config, error) {
	return config.Load(nil, nil, func(k string) string {
		if k == "DATABASE_URL" {
			return u
		}
		return ""
	})
}

// load reads a configuration from env, with the one required setting filled in.
func load(env map[string]string) (config.Config, error) {
	return config.Load(nil, nil, func(k string) string {
		if k == "DATABASE_URL" {
			return "postgres://localhost/relayroom"
		}
		return env[k]
	})
}

func TestAllowedOrigins(t *testing.T) {
	t.Parallel()
	t.Run("origins are kept in the form browsers send", func(t *testing.T) {
		c, err := load(map[string]string{"RELAYROOM_ALLOWED_ORIGINS": " https://Inspector.example , http://127.0.0.1:6274"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(c.AllowedOrigins, " ") != "https://inspector.example http://127.0.0.1:6274" {
			t.Fatalf("origins: %q", c.AllowedOrigins)
		}
	})
	t.Run("anything that is not an origin is refused at start", func(t *testing.T) {
		for _, bad := range []string{"https://x.example/app", "https://x.example/", "x.example", "ftp://x.example", "https://user@x.example", "https://x.example?q=1"} {
			_, err := load(map[string]string{"RELAYROOM_ALLOWED_ORIGINS": bad})
			if err == nil || !strings.Contains(err.Error(), "RELAYROOM_ALLOWED_ORIGINS") {
				t.Errorf("%q: %v", bad, err)
			}
		}
	})
	t.Run("a public URL's origin drops its path", func(t *testing.T) {
		if o, err := config.Origin("https://Relay.example/base/"); err != nil || o != "https://relay.example" {
			t.Fatalf("%q %v", o, err)
		}
	})
}

func TestWaitsHaveDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LockTimeout != time.Second || c.EmbedWait != 1500*time.Millisecond {
		t.Fatalf("defaults: lock %v, embed %v", c.LockTimeout, c.EmbedWait)
	}
	for env, v := range map[string]string{"RELAYROOM_LOCK_TIMEOUT": "-1s", "RELAYROOM_EMBED_WAIT": "0s"} {
		if _, err := load(map[string]string{env: v}); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: %v", env, v, err)
		}
	}
}

func TestNonsenseIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, value string }{
		{"RELAYROOM_LOG_LEVEL", "loud"},
		{"RELAYROOM_DB_MAX_CONNS", "0"},
		{"RELAYROOM_DB_MAX_CONNS", "-3"},
		{"RELAYROOM_MAX_BODY_BYTES", "0"},
		{"RELAYROOM_SHUTDOWN_TIMEOUT", "-1s"},
		{"RELAYROOM_EMBED_DIM", "-1"},
		{"RELAYROOM_AUTH_FAILURES_PER_ADDRESS", "-1"},
		{"RELAYROOM_AUTH_FAILURES_PER_KEY", "-5"},
		{"RELAYROOM_REGISTRATIONS_PER_ADDRESS", "-1"},
		{"RELAYROOM_REGISTRATIONS_PER_ADDRESS", "many"},
		{"RELAYROOM_DB_MAX_CONNS", "twenty"},
		{"RELAYROOM_SHUTDOWN_TIMEOUT", "soon"},
		// The service answers at its host's root: a URL with more would be printed into
		// every link and OAuth document and lead nowhere.
		{"RELAYROOM_PUBLIC_URL", "https://relay.example/base"},
		{"RELAYROOM_PUBLIC_URL", "https://relay.example?x=1"},
		{"RELAYROOM_PUBLIC_URL", "https://user@relay.example"},
		{"RELAYROOM_PUBLIC_URL", "ftp://relay.example"},
		{"RELAYROOM_PUBLIC_URL", "relay.example"},
		// Refused before the database is touched, not at listen after the migrations.
		{"RELAYROOM_ADDR", ":99999"},
		{"RELAYROOM_ADDR", "localhost"},
		{"RELAYROOM_ADDR", "127.0.0.1:http"},
		{"RELAYROOM_METRICS_ADDR", "9090"},
		{"RELAYROOM_METRICS_ADDR", ":48801"}, // the listen address's default
		// Refused here, not after the migrations ran and the pools opened.
		{"RELAYROOM_EMBEDDER", "foo"},
		{"RELAYROOM_SECRET_KEY", "short"},
		{"RELAYROOM_SECRET_KEY_PREVIOUS", "short"},
		// Every call would fail "unavailable" on a server that looks healthy.
		{"RELAYROOM_STATEMENT_TIMEOUT", "1ns"},
		{"RELAYROOM_MIGRATE", "yes"},
	} {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			_, err := load(map[string]string{c.env: c.value})
			if err == nil || !strings.Contains(err.Error(), c.env) || strings.Count(err.Error(), c.env) > 1 || strings.Contains(err.Error(), "strconv") {
				t.Fatalf("want a refusal naming %s once, in our words, got %v", c.env, err)
			}
		})
	}
	t.Run("the documented forms are kept, the public URL as clients write it", func(t *testing.T) {
		c, err := load(map[string]string{"RELAYROOM_LOG_LEVEL": "DEBUG", "RELAYROOM_PUBLIC_URL": "https://Relay.example:8443/",
			"RELAYROOM_AUTH_FAILURES_PER_KEY": "0", "RELAYROOM_SHUTDOWN_TIMEOUT": "0s", "RELAYROOM_DB_MAX_CONNS": "7", "RELAYROOM_ADDR": "[::1]:0"})
		if err != nil {
			t.Fatal(err)
		}
		if c.PublicURL != "https://relay.example:8443" || c.LogLevel != "DEBUG" || c.MaxConns != 7 || c.AuthFailures.PerKey != 0 || c.Addr != "[::1]:0" {
			t.Fatalf("%+v", c)
		}
	})
}

// TestABadDatabaseURLKeepsItsPassword: a DATABASE_URL that did not parse (a password
// with an unencoded %, a typo in the port) was quoted whole in the error, password
// included, on stderr and in whatever log collects it.
func TestABadDatabaseURLKeepsItsPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"postgres://app:p%wd!S3cret@db:5432/relayroom", "postgres://app:S3cret@db:54x32/relayroom"} {
		t.Run(u, func(t *testing.T) {
			_, err := loadURL(u)
			if err == nil || strings.Contains(err.Error(), "S3cret") || !strings.Contains(err.Error(), "DATABASE_URL does not parse") {
				t.Fatalf("%v", err)
			}
		})
	}
}

// TestUnknownNamesAreReported: a misspelt setting is named at start with the setting it
// resembles, instead of leaving the default in force without a word.
func TestUnknownNamesAreReported(t *testing.T) {
	t.Parallel()
	got := config.UnknownNames([]string{"RELAYROOM_PUBLC_URL=https://x", "RELAYROOM_PORT=80", "RELAYROOM_PUBLIC_URL=https://y",
		"RELAYROOM_AGENT_KEY=k", "RELAYROOM_TEST_REPLICAS=2", "PATH=/bin", "RELAYROOM_LOGLEVEL=debug"})
	want := []config.Unknown{{Name: "RELAYROOM_PUBLC_URL", Like: "RELAYROOM_PUBLIC_URL"}, {Name: "RELAYROOM_PORT"},
		{Name: "RELAYROOM_LOGLEVEL", Like: "RELAYROOM_LOG_LEVEL"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestFlagsAndTheEnvironment: a flag wins over its variable, the variable over the
// default, and the usage (--help, a flag typo) prints the built-in defaults: it printed
// the environment's values, the database password and every key among them.
func TestFlagsAndTheEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://app:EnvPassw0rd@db/relayroom", "RELAYROOM_SECRET_KEY": strings.Repeat("9f3c", 16),
		"RELAYROOM_EMBED_API_KEY": "EnvEmbedKey", "RELAYROOM_LOG_LEVEL": "warn"}
	loadArgs := func(args ...string) (config.Config, string, error) {
		var out strings.Builder
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(&out)
		c, err := config.Load(fs, args, func(k string) string { return env[k] })
		return c, out.String(), err
	}
	for _, args := range [][]string{{"-help"}, {"-bogus"}} {
		t.Run(args[0]+" prints no value of the environment", func(t *testing.T) {
			_, out, err := loadArgs(args...)
			if err == nil || !strings.Contains(out, "-database-url") {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, v := range env {
				if v != "warn" && strings.Contains(out, v) {
					t.Fatalf("%q printed:\n%s", v, out)
				}
			}
		})
	}
	t.Run("a flag wins over its variable, which wins over the default", func(t *testing.T) {
		c, _, err := loadArgs("-log-level", "debug")
		if err != nil || c.LogLevel != "debug" || c.SecretKey != env["RELAYROOM_SECRET_KEY"] || c.Addr != ":48801" {
			t.Fatalf("%+v %v", c, err)
		}
	})
	t.Run("an argument that is no flag is a usage error", func(t *testing.T) {
		if _, _, err := loadArgs("extra"); !errors.Is(err, cli.ErrUsage) {
			t.Fatalf("%v", err)
		}
	})
}

// TestOnlyPostgresURLs: a keyword=value string passed the check, worked for the admin
// commands and failed serve's migrations with the password in the error.
func TestOnlyPostgresURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"host=db user=app password=TopSecretPW dbname=relayroom", "http://app:TopSecretPW@db/relayroom", "db:5432/relayroom"} {
		t.Run(u, func(t *testing.T) {
			_, err := loadURL(u)
			if err == nil || strings.Contains(err.Error(), "TopSecretPW") || !strings.Contains(err.Error(), "postgres://") {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("postgresql:// is a postgres URL too", func(t *testing.T) {
		if _, err := load(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := loadURL("postgresql://app@db/relayroom"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSecretsFromFiles: a credential can come from a file (a container's mounted secret),
// so that it is in neither the environment children inherit nor a command line.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := strings.Repeat("9f3c", 16)
	files := map[string]string{
		"DATABASE_URL_FILE":                  write("db", "postgres://app:FilePassw0rd@db/relayroom\n"),
		"RELAYROOM_SECRET_KEY_FILE":          write("key", key+"\r\n"),
		"RELAYROOM_SIGNING_KEY_FILE":         write("sig", strings.Repeat("s", 40)),
		"RELAYROOM_EMBED_API_KEY_FILE":       write("embed", "FileEmbedKey\n"),
		"RELAYROOM_SECRET_KEY_PREVIOUS_FILE": write("prev", strings.Repeat("0a1b", 16)+"\n"),
	}
	getenv := func(env map[string]string) func(string) string { return func(k string) string { return env[k] } }

	t.Run("each secret setting is read from its file, without the final line break", func(t *testing.T) {
		c, err := config.Load(nil, nil, getenv(files))
		if err != nil {
			t.Fatal(err)
		}
		if c.DatabaseURL != "postgres://app:FilePassw0rd@db/relayroom" || c.SecretKey != key || c.SigningKey != strings.Repeat("s", 40) ||
			c.EmbedAPIKey != "FileEmbedKey" || c.SecretKeyPrevious != strings.Repeat("0a1b", 16) {
			t.Fatalf("got %+v", c)
		}
	})
	t.Run("a flag still wins", func(t *testing.T) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c, err := config.Load(fs, []string{"-database-url", "postgres://flag@db/relayroom"}, getenv(files))
		if err != nil || c.DatabaseURL != "postgres://flag@db/relayroom" {
			t.Fatalf("got %q, %v", c.DatabaseURL, err)
		}
	})
	for name, env := range map[string]map[string]string{
		"both the variable and its file":    {"DATABASE_URL": "postgres://a@db/x", "DATABASE_URL_FILE": files["DATABASE_URL_FILE"]},
		"a file that is not there":          {"DATABASE_URL": "postgres://a@db/x", "RELAYROOM_SECRET_KEY_FILE": filepath.Join(dir, "nope")},
		"an empty file":                     {"DATABASE_URL": "postgres://a@db/x", "RELAYROOM_SIGNING_KEY_FILE": write("empty", "\n")},
		"a file whose key is not a key":     {"DATABASE_URL": "postgres://a@db/x", "RELAYROOM_SECRET_KEY_FILE": write("short", "short\n")},
		"a file too large for a credential": {"DATABASE_URL": "postgres://a@db/x", "RELAYROOM_SIGNING_KEY_FILE": write("large", strings.Repeat("s", config.MaxSecretFileBytes+1))},
	} {
		t.Run(name+" is refused, naming the setting", func(t *testing.T) {
			_, err := config.Load(nil, nil, getenv(env))
			if err == nil || !strings.Contains(err.Error(), "_FILE") && !strings.Contains(err.Error(), "RELAYROOM_SECRET_KEY") {
				t.Fatalf("want an error naming the setting, got %v", err)
			}
			if strings.Contains(err.Error(), "FilePassw0rd") {
				t.Fatalf("the error shows the file's secret: %v", err)
			}
		})
	}
	t.Run("the _FILE names are known settings", func(t *testing.T) {
		if got := config.UnknownNames([]string{"RELAYROOM_SECRET_KEY_FILE=/run/secrets/k", "RELAYROOM_SIGNING_KEY_FILE=/x"}); len(got) != 0 {
			t.Fatalf("reported as unknown: %+v", got)
		}
	})
}
