package pg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ParseURL parses a database URL. Its error never holds the URL: net/url's quotes the
// whole of it, password included, and a password with an unencoded % or / (or a typo in
// the port) put it on stderr, in the log that collects serve's and migrate's output.
//
// Only postgres:// and postgresql:// URLs pass. pgx also reads keyword=value strings
// ("host=db password=…"), so such a value worked for the admin commands and then failed
// serve's migrations with an error that quoted the password; other schemes were
// rewritten to the migration driver's without a word.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("does not parse: %w (percent-encode any special character of the user name or password)", ue.Err)
		}
		return nil, errors.New("does not parse")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, errors.New("must be a postgres:// URL (postgres://user:password@host:port/database; keyword=value connection strings are not supported)")
	}
	return u, nil
}

// DefaultConnectTimeout bounds opening a connection when DATABASE_URL sets no
// connect_timeout. Without it a database that accepts TCP and never answers (a stopped VM
// behind a proxy, a firewall that drops packets) held serve, migrate and admin forever,
// without a log line.
const DefaultConnectTimeout = 10 * time.Second

// ConnConfig parses dbURL for one connection, with DefaultConnectTimeout unless the URL
// sets connect_timeout.
func ConnConfig(dbURL string) (*pgx.ConnConfig, error) {
	cfg, err := parseChecked(dbURL, pgx.ParseConfig)
	if err != nil {
		return nil, err
	}
	boundConnect(cfg)
	return cfg, nil
}

// PoolConfig is ConnConfig for a pool.
func PoolConfig(dbURL string) (*pgxpool.Config, error) {
	cfg, err := parseChecked(dbURL, pgxpool.ParseConfig)
	if err != nil {
		return nil, err
	}
	boundConnect(cfg.ConnConfig)
	return cfg, nil
}

// parseChecked is parse(dbURL) for a URL ParseURL accepts.
func parseChecked[T any](dbURL string, parse func(string) (T, error)) (T, error) {
	var zero T
	if _, err := ParseURL(dbURL); err != nil {
		return zero, fmt.Errorf("DATABASE_URL %w", err)
	}
	cfg, err := parse(dbURL)
	if err != nil {
		return zero, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	return cfg, nil
}

func boundConnect(cfg *pgx.ConnConfig) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
}

// Connect opens one connection to dbURL (ConnConfig's timeout applies).
func Connect(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	cfg, err := ConnConfig(dbURL)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ConnectFailure says in an operator's words why err is a failure to open a connection:
// to which database (host, port and name, never the password) and why (refused, no answer
// within the connect timeout, the server's own refusal such as a wrong password), without
// the driver's framing ("failed to connect to `user=… database=…`: … dial error: …"). ok
// is false when err is not a failure to connect.
func ConnectFailure(err error) (msg string, ok bool) {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return "", false
	}
	return fmt.Sprintf("cannot connect to the database at %s:%d/%s (DATABASE_URL): %s",
		ce.Config.Host, ce.Config.Port, ce.Config.Database, connectCause(ce, ce.Config.ConnectTimeout)), true
}

// connectCause is why a connection could not be opened, as ConnectFailure says it.
func connectCause(err error, timeout time.Duration) string {
	var pgErr *pgconn.PgError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &pgErr):
		return pgErr.Message // the server's refusal: a wrong password, no such database
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (is Postgres running, and listening there?)"
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return fmt.Sprintf("no answer within the connect timeout, %s (connect_timeout in the URL sets it)", timeout)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("no such host %q", dnsErr.Name)
	}
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
		err = u // the innermost cause, without the driver's framing
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Describe names the database of dbURL for a log line: host, port and database, never the
// user's password.
func Describe(dbURL string) string {
	cfg, err := ConnConfig(dbURL)
	if err != nil {
		return "(DATABASE_URL does not parse)"
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}
