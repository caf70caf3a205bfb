// Package config reads the service's settings from the environment, with flags of the
// same names for the commands that take them. Nothing here is global: Load returns a value.
package config

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/throttle"
	"github.com/relayroom/relayroom/internal/wake"
)

// Config is every setting of `relayroom serve`.
type Config struct {
	DatabaseURL string
	// DirectDatabaseURL (optional) reaches the database without the connection pooler
	// DatabaseURL goes through (PgBouncer in transaction mode): see SessionURL.
	DirectDatabaseURL string
	Addr              string
	// MetricsAddr, when set, is a second listener with /metrics, /healthz and /readyz
	// only, and /metrics leaves the public listener: the operator scrapes an address
	// that clients cannot reach, without a rule at the proxy.
	MetricsAddr      string
	PublicURL        string
	LogLevel         string
	MigrateOnStart   bool
	ShutdownTimeout  time.Duration
	ShutdownDelay    time.Duration
	StatementTimeout time.Duration
	LockTimeout      time.Duration
	MaxConns         int
	MaxBodyBytes     int64

	// Limits on what any client, authenticated or not, can hold of the server: see
	// docs/limits.md. Zero values mean the Default* constants below.
	ReadHeaderTimeout  time.Duration
	ReadTimeout        time.Duration
	WriteTimeout       time.Duration
	IdleTimeout        time.Duration
	MaxConnections     int
	MaxRequestsPerAddr int
	MaxInflightBytes   int64

	Embedder    string
	EmbedURL    string
	EmbedModel  string
	EmbedAPIKey string
	EmbedDim    int
	// EmbedWait bounds how long a memory write or read waits for the embedder before the
	// write is stored for the backlog job and the read goes lexical.
	EmbedWait time.Duration

	// Rooms attachments: upload limit, and the key that signs download links (empty: a
	// random key per process, so links only work on the replica that issued them).
	AttachmentMaxBytes int64
	// RoomAttachmentBytes is what one room's attachments may hold together.
	RoomAttachmentBytes int64
	SigningKey          string
	SecretKey           string
	SecretKeyPrevious   string

	// AllowedOrigins are browser origins, besides the public URL's own, whose requests
	// are served (MCP requires servers to refuse other origins: DNS rebinding).
	AllowedOrigins []string
	// Failed authentication limits (docs/auth-limits.md), and the proxies whose
	// X-Forwarded-For names the client (none: the TCP peer is the client).
	AuthFailures throttle.Limits
	// RegistrationsPerAddress bounds OAuth client registrations per client address per
	// AuthFailures.Window (0: no limit).
	RegistrationsPerAddress int
	TrustedProxies          []netip.Prefix
	// WebhookPrivateTargets lets wake webhooks reach loopback and private addresses.
	WebhookPrivateTargets bool
	// DeskLimits are the desk tools' rate limits by plan (nil: desk.DefaultLimits).
	DeskLimits map[string]desk.Limits
	// OAuthMetadataDocumentsAllowPrivate lets client ID metadata documents be fetched
	// from loopback and private addresses, trusting OAuthMetadataDocumentRoots besides the
	// system's: for end-to-end tests, which serve a document from a local TLS server.
	// Never read from the environment (it would open the server to SSRF).
	OAuthMetadataDocumentsAllowPrivate bool
	OAuthMetadataDocumentRoots         *x509.CertPool
}

// Defaults of the limits (docs/limits.md). The settings' documented defaults are these
// constants, and WithDefaults applies them to a Config built in code.
const (
	DefaultStatementTimeout   = 5 * time.Second
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultReadTimeout        = 60 * time.Second
	DefaultWriteTimeout       = 60 * time.Second
	DefaultIdleTimeout        = 120 * time.Second
	DefaultMaxConnections     = 10000
	DefaultMaxRequestsPerAddr = 64
	DefaultMaxInflightBytes   = 128 << 20
	// DefaultRegistrationsPerAddress is RELAYROOM_REGISTRATIONS_PER_ADDRESS's default.
	DefaultRegistrationsPerAddress = 30
)

// WithDefaults returns c with every zero limit replaced by its default, so that a Config
// written in code (tests, embedders) is as bounded as one read by Load.
func (c Config) WithDefaults() Config {
	c.StatementTimeout = orDefault(c.StatementTimeout, DefaultStatementTimeout)
	c.ReadHeaderTimeout = orDefault(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.ReadTimeout = orDefault(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = orDefault(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = orDefault(c.IdleTimeout, DefaultIdleTimeout)
	c.MaxConnections = orDefault(c.MaxConnections, DefaultMaxConnections)
	c.MaxRequestsPerAddr = orDefault(c.MaxRequestsPerAddr, DefaultMaxRequestsPerAddr)
	c.MaxInflightBytes = orDefault(c.MaxInflightBytes, DefaultMaxInflightBytes)
	return c
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// parsed sets *dst to v parsed, as far as parse got.
func parsed[T any](dst *T, parse func(string) (T, error), v string) error {
	var err error
	*dst, err = parse(v)
	return err
}

// MinStatementTimeout is the least RELAYROOM_STATEMENT_TIMEOUT accepted.
const MinStatementTimeout = 10 * time.Millisecond

// boolean parses true or false (and 1, 0, t, f in any case), naming them when v is neither.
func boolean(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q: want true or false", v)
	}
	*dst = b
	return nil
}

// listenAddr checks a listen address here, so that a typo is reported before the
// database is touched.
func listenAddr(dst *string, v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%q: want host:port or :port", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", v)
	}
	*dst = v
	return nil
}

// secretKey checks a sealing key when one is set, before the database is touched (it
// was checked after the migrations ran and the pools opened).
func secretKey(v string) error {
	if v == "" {
		return nil
	}
	_, err := wake.NewSecretBox(v)
	return err
}

func positiveDuration(dst *time.Duration, v string) error {
	return checkedDuration(dst, v, time.Nanosecond, "must be positive")
}

func nonNegativeDuration(dst *time.Duration, v string) error {
	return checkedDuration(dst, v, 0, "must not be negative")
}

// checkedDuration parses a duration, refusing one below least with the reason tooSmall.
func checkedDuration(dst *time.Duration, v string, least time.Duration, tooSmall string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q: want a duration such as 500ms, 5s or 2m", v)
	}
	if d < least {
		err = errors.New(tooSmall)
	}
	*dst = d
	return err
}

func positiveInt[T int | int64](dst *T, v string) error {
	return checkedInt(dst, v, 1, "must be positive")
}

func nonNegativeInt[T int | int64](dst *T, v string) error {
	return checkedInt(dst, v, 0, "must not be negative")
}

// checkedInt parses a whole number, refusing one below least with the reason tooSmall.
func checkedInt[T int | int64](dst *T, v string, least int64, tooSmall string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		// In our words: strconv's ("strconv.ParseInt: parsing …") reached the operator.
		return fmt.Errorf("%q: want a whole number", v)
	}
	if n < least {
		err = errors.New(tooSmall)
	}
	*dst = T(n)
	return err
}

// setting is one documented knob: its env name, flag name, default and help.
type setting struct {
	env, flag, def, help string
	set                  func(c *Config, v string) error
}

// isSecret tells the settings that hold a credential. Each may instead be read from
// a file named by its name with _FILE appended (a container's mounted secret), so that it
// is neither in the environment every child process inherits nor on a command line that
// `ps` shows.
func isSecret(name string) bool {
	switch name {
	case "DATABASE_URL", "RELAYROOM_DIRECT_DATABASE_URL", "RELAYROOM_EMBED_API_KEY", "RELAYROOM_SECRET_KEY", "RELAYROOM_SECRET_KEY_PREVIOUS", "RELAYROOM_SIGNING_KEY":
		return true
	}
	return false
}

// FileSuffix names the variable that holds a secret setting's file.
const FileSuffix = "_FILE"

// MaxSecretFileBytes bounds what a _FILE may hold (a database URL or a key: far less).
const MaxSecretFileBytes = 64 << 10

// Secret reads the secret setting name from the environment: the variable itself, or the
// contents of the file its name_FILE names, without the line break that ends it. Both
// set is an error: which one wins would be a guess.
func Secret(getenv func(string) string, name string) (string, error) {
	v, file := getenv(name), getenv(name+FileSuffix)
	switch {
	case file == "":
		return v, nil
	case v != "":
		return "", fmt.Errorf("%s and %s%s are both set: set one", name, name, FileSuffix)
	}
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("%s%s: %w", name, FileSuffix, err)
	}
	defer f.Close()
	// Bounded: a path that names a device or a log by mistake must not hold the start.
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s%s: %w", name, FileSuffix, err)
	}
	if len(b) > MaxSecretFileBytes {
		return "", fmt.Errorf("%s%s: %s is larger than %d bytes: not a credential", name, FileSuffix, file, MaxSecretFileBytes)
	}
	v = strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s%s: %s is empty", name, FileSuffix, file)
	}
	return v, nil
}

func settings() []setting {
	return []setting{
		{"DATABASE_URL", "database-url", "", "Postgres URL (postgres://user:pass@host:port/db). Required.", func(c *Config, v string) error { c.DatabaseURL = v; return nil }},
		{"RELAYROOM_DIRECT_DATABASE_URL", "direct-database-url", "", "set when DATABASE_URL goes through a connection pooler in transaction mode (PgBouncer): the same database without the pooler, for migrations, LISTEN and the job queue", func(c *Config, v string) error { c.DirectDatabaseURL = v; return nil }},
		{"RELAYROOM_ADDR", "addr", ":48801", "listen address", func(c *Config, v string) error { return listenAddr(&c.Addr, v) }},
		{"RELAYROOM_METRICS_ADDR", "metrics-addr", "", "listen address of /metrics, /healthz and /readyz alone; set, /metrics leaves the main listener (default: /metrics on the main listener)", func(c *Config, v string) error {
			if v == "" {
				c.MetricsAddr = ""
				return nil
			}
			return listenAddr(&c.MetricsAddr, v)
		}},
		{"RELAYROOM_PUBLIC_URL", "public-url", "", "base of every URL the service prints or publishes (default: derived from the listen address)", func(c *Config, v string) error {
			// Every route answers at the root of its host, and the URLs the service prints
			// and publishes (OAuth metadata, download links) are this plus a path: a path,
			// query or user here would print URLs that lead nowhere.
			// It is kept as clients write it back: they build the OAuth resource and check
			// the issuer with a URL parser, which lower-cases the scheme and host and drops a
			// default port, and the resource is compared byte for byte
			// ("https://Relay.example:443" as typed made every sign-in invalid_target).
			v = strings.TrimRight(v, "/")
			if v == "" {
				c.PublicURL = ""
				return nil
			}
			o, err := exactOrigin(v)
			c.PublicURL = o
			return err
		}},
		{"RELAYROOM_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", func(c *Config, v string) error {
			c.LogLevel = v
			var l slog.Level
			if err := l.UnmarshalText([]byte(v)); err != nil {
				return fmt.Errorf("%q: want debug, info, warn or error", v)
			}
			return nil
		}},
		{"RELAYROOM_MIGRATE", "migrate", "true", "apply pending migrations on start (safe with many replicas: an advisory lock serialises them)", func(c *Config, v string) error { return boolean(&c.MigrateOnStart, v) }},
		{"RELAYROOM_SHUTDOWN_TIMEOUT", "shutdown-timeout", "20s", "how long in-flight calls may take to finish on shutdown", func(c *Config, v string) error { return nonNegativeDuration(&c.ShutdownTimeout, v) }},
		{"RELAYROOM_SHUTDOWN_DELAY", "shutdown-delay", "0s", "on a stop, how long /readyz answers 503 while the server still accepts and serves, before the drain (give balancers time to take the replica out)", func(c *Config, v string) error { return nonNegativeDuration(&c.ShutdownDelay, v) }},
		{"RELAYROOM_STATEMENT_TIMEOUT", "statement-timeout", DefaultStatementTimeout.String(), "the database time of a request: acquiring a pooled connection, preparing and running every statement of all its transactions (past it: the retryable 'database unavailable' answer)", func(c *Config, v string) error {
			// Below a few milliseconds every call fails "unavailable" while the server
			// looks healthy: refused rather than served that way.
			return checkedDuration(&c.StatementTimeout, v, MinStatementTimeout, "must be at least "+MinStatementTimeout.String())
		}},
		{"RELAYROOM_LOCK_TIMEOUT", "lock-timeout", "1s", "how long a request's statement waits for a row or table lock before the retryable \"database unavailable\" answer (keeps a pile-up behind one lock from holding every pooled connection); 0: only the statement timeout", func(c *Config, v string) error { return nonNegativeDuration(&c.LockTimeout, v) }},
		{"RELAYROOM_DB_MAX_CONNS", "db-max-conns", "20", "connections of the request pool", func(c *Config, v string) error { return positiveInt(&c.MaxConns, v) }},
		{"RELAYROOM_MAX_BODY_BYTES", "max-body-bytes", "4194304", "largest JSON-RPC request body accepted", func(c *Config, v string) error { return positiveInt(&c.MaxBodyBytes, v) }},
		{"RELAYROOM_READ_HEADER_TIMEOUT", "read-header-timeout", DefaultReadHeaderTimeout.String(), "time a client has to send a request's headers", func(c *Config, v string) error {
			return positiveDuration(&c.ReadHeaderTimeout, v)
		}},
		{"RELAYROOM_READ_TIMEOUT", "read-timeout", DefaultReadTimeout.String(), "time a client has to send a whole request, body included (the pager's long poll is extended by its wait)", func(c *Config, v string) error {
			return positiveDuration(&c.ReadTimeout, v)
		}},
		{"RELAYROOM_WRITE_TIMEOUT", "write-timeout", DefaultWriteTimeout.String(), "time from the end of a request's headers to the end of its answer (the pager's long poll is extended by its wait)", func(c *Config, v string) error {
			return positiveDuration(&c.WriteTimeout, v)
		}},
		{"RELAYROOM_IDLE_TIMEOUT", "idle-timeout", DefaultIdleTimeout.String(), "how long a keep-alive connection may wait for its next request", func(c *Config, v string) error {
			return positiveDuration(&c.IdleTimeout, v)
		}},
		{"RELAYROOM_MAX_CONNECTIONS", "max-connections", strconv.Itoa(DefaultMaxConnections), "open client connections at most (lowered to fit the process's open-file limit)", func(c *Config, v string) error {
			return positiveInt(&c.MaxConnections, v)
		}},
		{"RELAYROOM_MAX_REQUESTS_PER_ADDR", "max-requests-per-addr", strconv.Itoa(DefaultMaxRequestsPerAddr), "requests in progress at once from one client address; beyond it: 429 with Retry-After", func(c *Config, v string) error {
			return positiveInt(&c.MaxRequestsPerAddr, v)
		}},
		{"RELAYROOM_MAX_INFLIGHT_BYTES", "max-inflight-bytes", strconv.Itoa(DefaultMaxInflightBytes), "request body bytes all requests in progress may hold together; beyond it: 429 with Retry-After", func(c *Config, v string) error {
			return positiveInt(&c.MaxInflightBytes, v)
		}},
		{"RELAYROOM_EMBEDDER", "embedder", embed.KindBuiltin, "builtin (offline sentence encoder), glove (offline word vectors), openai (any OpenAI-compatible /v1/embeddings) or none", func(c *Config, v string) error {
			switch v {
			case embed.KindBuiltin, embed.KindGlove, embed.KindOpenAI, embed.KindNone:
				c.Embedder = v
				return nil
			}
			return fmt.Errorf("%q: want %s, %s, %s or %s", v, embed.KindBuiltin, embed.KindGlove, embed.KindOpenAI, embed.KindNone)
		}},
		{"RELAYROOM_EMBED_URL", "embed-url", "", "base URL of the OpenAI-compatible embeddings server", func(c *Config, v string) error { c.EmbedURL = v; return nil }},
		{"RELAYROOM_EMBED_MODEL", "embed-model", "", "embedding model name", func(c *Config, v string) error { c.EmbedModel = v; return nil }},
		{"RELAYROOM_EMBED_API_KEY", "embed-api-key", "", "API key of the embeddings server", func(c *Config, v string) error { c.EmbedAPIKey = v; return nil }},
		{"RELAYROOM_EMBED_DIM", "embed-dim", "0", "embedding dimension (0: learnt from the first response)", func(c *Config, v string) error { return nonNegativeInt(&c.EmbedDim, v) }},
		{"RELAYROOM_EMBED_WAIT", "embed-wait", "1500ms", "how long write_memory and read_memory wait for the embedder; past it the write is embedded later by the backlog job and the read searches lexically", func(c *Config, v string) error { return positiveDuration(&c.EmbedWait, v) }},
		{"RELAYROOM_ATTACHMENT_MAX_BYTES", "attachment-max-bytes", "26214400", "largest task attachment accepted (rooms), in bytes", func(c *Config, v string) error { return positiveInt(&c.AttachmentMaxBytes, v) }},
		{"RELAYROOM_ROOM_ATTACHMENT_BYTES", "room-attachment-bytes", "2147483648", "bytes of attachments one room may hold together (stored in Postgres)", func(c *Config, v string) error { return positiveInt(&c.RoomAttachmentBytes, v) }},
		{"RELAYROOM_DESK_RATE_LIMITS", "desk-rate-limits", desk.FormatLimits(desk.DefaultLimits()), "desk tools' calls per minute by plan: plan=memberReads/memberWrites/workspaceReads/workspaceWrites, for growth and scale (docs/desk.md)", func(c *Config, v string) error { return parsed(&c.DeskLimits, desk.ParseLimits, v) }},
		{"RELAYROOM_SECRET_KEY", "secret-key", "", "32-byte key (hex or base64) sealing webhook secrets and desk inbox secrets at rest; the same on every replica and for 'relayroom admin' (unset: webhooks off, pagers still work, inbox secrets cannot be stored)", func(c *Config, v string) error { c.SecretKey = v; return secretKey(v) }},
		{"RELAYROOM_SECRET_KEY_PREVIOUS", "secret-key-previous", "", "the RELAYROOM_SECRET_KEY being rotated out: it still opens desk inbox secrets until 'relayroom admin desk secrets reseal' seals them under the new key (docs/desk.md)", func(c *Config, v string) error { c.SecretKeyPrevious = v; return secretKey(v) }},
		{"RELAYROOM_ALLOWED_ORIGINS", "allowed-origins", "", "comma-separated browser origins (scheme://host[:port]) allowed besides the public URL's own; requests carrying any other Origin get 403", func(c *Config, v string) error { return parsed(&c.AllowedOrigins, ParseOrigins, v) }},
		{"RELAYROOM_SIGNING_KEY", "signing-key", "", "secret (32+ characters) signing attachment download links; set the same value on every replica (default: random per process)", func(c *Config, v string) error {
			if v != "" && len(v) < 32 {
				return fmt.Errorf("must be at least 32 characters")
			}
			c.SigningKey = v
			return nil
		}},
		{"RELAYROOM_AUTH_FAILURE_WINDOW", "auth-failure-window", throttle.DefaultWindow.String(), "window in which failed authentications are counted; a caller over a limit is refused (429) until its window ends", func(c *Config, v string) error { return positiveDuration(&c.AuthFailures.Window, v) }},
		{"RELAYROOM_AUTH_FAILURES_PER_ADDRESS", "auth-failures-per-address", strconv.Itoa(throttle.DefaultPerAddress), "failed authentications allowed per client address per window (0: no limit)", func(c *Config, v string) error { return nonNegativeInt(&c.AuthFailures.PerAddress, v) }},
		{"RELAYROOM_AUTH_FAILURES_PER_KEY", "auth-failures-per-key", strconv.Itoa(throttle.DefaultPerKey), "failed authentications allowed per agent key id per window, from all addresses together (0: no limit)", func(c *Config, v string) error { return nonNegativeInt(&c.AuthFailures.PerKey, v) }},
		{"RELAYROOM_REGISTRATIONS_PER_ADDRESS", "registrations-per-address", strconv.Itoa(DefaultRegistrationsPerAddress), "OAuth client registrations allowed per client address per RELAYROOM_AUTH_FAILURE_WINDOW; hosted clients (ChatGPT, Claude.ai) register for all their users from a few addresses (0: no limit)", func(c *Config, v string) error {
			return nonNegativeInt(&c.RegistrationsPerAddress, v)
		}},
		{"RELAYROOM_AUTH_BLOCKED_DELAY", "auth-blocked-delay", throttle.DefaultBlockedDelay.String(), "how long a blocked caller waits for its 429, so one connection sends at most one blocked attempt per delay (0: answered at once)", func(c *Config, v string) error { return nonNegativeDuration(&c.AuthFailures.BlockedDelay, v) }},
		{"RELAYROOM_WEBHOOK_PRIVATE_TARGETS", "webhook-private-targets", "false", "let wake webhooks reach loopback and private addresses, and http:// on loopback (local development, or a server whose organisations all trust each other); off, an organisation cannot make the server post into its own network", func(c *Config, v string) error {
			return boolean(&c.WebhookPrivateTargets, v)
		}},
		{"RELAYROOM_TRUSTED_PROXIES", "trusted-proxies", "", "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For names the client (default: none, the TCP peer is the client)", func(c *Config, v string) error { return parsed(&c.TrustedProxies, throttle.ParseProxies, v) }},
	}
}

// otherNames are the RELAYROOM_ variables that are not the server's settings: what the
// pager and the admin commands read, what the pager sets for the commands it starts, and
// what the tests and profiling builds read.
func otherNames() []string {
	return []string{"RELAYROOM_AGENT_KEY", "RELAYROOM_PASSWORD", "RELAYROOM_URL", "RELAYROOM_PART", "RELAYROOM_PROJECT_ID",
		"RELAYROOM_THREAD_IDS", "RELAYROOM_WAKE_ID", "RELAYROOM_WAKE_COUNT", "RELAYROOM_WAKE_ATTEMPT", "RELAYROOM_WAKE_URGENT",
		"RELAYROOM_WAKE_SOURCES", "RELAYROOM_WAKE_JSON", "RELAYROOM_PPROF_ADDR", "RELAYROOM_CONFORMANCE_DIR", "RELAYROOM_SCREENSHOTS",
		"RELAYROOM_DESK_BENCH_FULL", "RELAYROOM_OPERATOR"}
}

// Unknown is a RELAYROOM_ variable of the environment that nothing reads.
type Unknown struct {
	Name string
	// Like is the setting it is most likely a misspelling of ("" when none is close).
	Like string
}

// UnknownNames lists the RELAYROOM_ variables of environ (os.Environ's form) that are
// neither a setting nor another name the program reads, so that a misspelt setting
// (RELAYROOM_PUBLC_URL) is reported at start instead of silently leaving its default.
// The tests' own variables (RELAYROOM_TEST_…) are not reported.
func UnknownNames(environ []string) []Unknown {
	known := map[string]bool{}
	var names []string
	for _, s := range settings() {
		known[s.env] = true
		names = append(names, s.env)
		if isSecret(s.env) {
			known[s.env+FileSuffix] = true
			names = append(names, s.env+FileSuffix)
		}
	}
	for _, n := range otherNames() {
		known[n] = true
	}
	var out []Unknown
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "RELAYROOM_") || known[name] || strings.HasPrefix(name, "RELAYROOM_TEST_") || strings.HasPrefix(name, "RELAYROOM_JOBS_") {
			continue
		}
		u := Unknown{Name: name}
		best := 3 // at most two edits away
		for _, n := range names {
			if d := editDistance(name, n); d < best {
				best, u.Like = d, n
			}
		}
		out = append(out, u)
	}
	return out
}

// editDistance is the Levenshtein distance of two ASCII names.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Load reads the environment, then the flags in args (flags win). fs may be nil.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	var c Config
	// A flag's default is the built-in one, never the environment's value: the usage
	// (--help, or any flag typo) prints defaults, and the environment holds the database
	// password and the keys. The environment is read after parsing, for the flags not set.
	flags := map[string]*string{}
	if fs != nil {
		for _, s := range settings() {
			env := " ($" + s.env + ")"
			if isSecret(s.env) {
				env = " ($" + s.env + ", or a file named by $" + s.env + FileSuffix + ")"
			}
			flags[s.env] = fs.String(s.flag, s.def, s.help+env)
		}
		if err := cli.Parse(fs, args); err != nil {
			return c, err
		}
	}
	set := map[string]bool{}
	if fs != nil {
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	for _, s := range settings() {
		v := getenv(s.env)
		if isSecret(s.env) && !set[s.flag] {
			var err error
			if v, err = Secret(getenv, s.env); err != nil {
				return c, fmt.Errorf("config: %w", err)
			}
		}
		if set[s.flag] {
			v = *flags[s.env]
		} else if v == "" {
			v = s.def
		}
		if err := s.set(&c, v); err != nil {
			return c, fmt.Errorf("config: %s: %w", s.env, err)
		}
	}
	if _, port, _ := net.SplitHostPort(c.MetricsAddr); c.MetricsAddr == c.Addr && port != "0" {
		// Two listeners on one port: the second would fail to bind after the migrations
		// (port 0 is a new port each).
		return c, fmt.Errorf("config: RELAYROOM_METRICS_ADDR %q is the listen address (RELAYROOM_ADDR): unset it to serve /metrics there", c.MetricsAddr)
	}
	if c.DatabaseURL == "" {
		return c, fmt.Errorf("config: DATABASE_URL is required")
	}
	if _, err := pg.ParseURL(c.DatabaseURL); err != nil {
		return c, fmt.Errorf("config: DATABASE_URL %w", err)
	}
	if c.DirectDatabaseURL != "" {
		if _, err := pg.ParseURL(c.DirectDatabaseURL); err != nil {
			return c, fmt.Errorf("config: RELAYROOM_DIRECT_DATABASE_URL %w", err)
		}
	}
	return c, nil
}

// SessionURL is the URL of what needs a database session of its own (migrations and
// their lock, LISTEN, the job queue, the admin CLI): RELAYROOM_DIRECT_DATABASE_URL when
// DATABASE_URL goes through a transaction pooler, DATABASE_URL otherwise.
func (c Config) SessionURL() string {
	if c.DirectDatabaseURL != "" {
		return c.DirectDatabaseURL
	}
	return c.DatabaseURL
}

// Public is the base URL for printed and published URLs: RELAYROOM_PUBLIC_URL, or one
// derived from the listen address (the server derives it from the bound port instead when
// it listens on port 0).
func (c Config) Public() string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	return DerivePublicURL(c.Addr)
}

// DerivePublicURL turns a listen address into a URL a local client can reach.
func DerivePublicURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://localhost:48801"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ParseOrigins reads a comma-separated list of origins, each scheme://host[:port] with
// no path, and returns them in the form browsers send (lower-case scheme and host).
func ParseOrigins(v string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(v, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		o, err := exactOrigin(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// exactOrigin returns raw in the form browsers send, refusing anything but an origin.
func exactOrigin(raw string) (string, error) {
	o, err := Origin(raw)
	if err != nil {
		return "", err
	}
	// Origin parsed it already: the error cannot happen here.
	if u, err := url.Parse(raw); err != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(raw, "#") {
		return "", fmt.Errorf("%q is not an origin (scheme://host[:port], nothing after)", raw)
	}
	return o, nil
}

// Origin returns the origin of an http(s) URL as browsers send it and URL parsers write
// it: scheme and host in lower case, a default port (80, 443) dropped; any path is dropped.
func Origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http(s) origin", raw)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	return scheme + "://" + host, nil
}
