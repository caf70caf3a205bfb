package pg

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayroom/relayroom/internal/apperr"
)

// SQLSTATE codes the domain reacts to.
const (
	uniqueViolation      = "23505"
	foreignKeyViolation  = "23503"
	checkViolation       = "23514"
	queryCanceled        = "57014" // statement_timeout
	lockNotAvailable     = "55P03" // lock_timeout
	deadlockDetected     = "40P01"
	serializationFailure = "40001"
	adminShutdown        = "57P01"
	cannotConnectNow     = "57P03"
	// unverified is rr_unverified's (migration 000048): the cached caller's check failed.
	unverified = "RR001"
)

// IsUniqueViolation reports a duplicate key.
func IsUniqueViolation(err error) bool { return sqlState(err) == uniqueViolation }

// IsForeignKeyViolation reports a reference to a missing row.
func IsForeignKeyViolation(err error) bool { return sqlState(err) == foreignKeyViolation }

// IsCheckViolation reports a failed CHECK constraint.
func IsCheckViolation(err error) bool { return sqlState(err) == checkViolation }

// IsInfrastructure reports failures of the database rather than of the request: a lost
// or refused connection, a statement or lock timeout, a deadlock, a serialization failure, a
// server shutting down. They are worth retrying, and some operations (closing a thread)
// must fail as a whole on them rather than report a softer outcome.
func IsInfrastructure(err error) bool {
	if err == nil {
		return false
	}
	switch sqlState(err) {
	case queryCanceled, lockNotAvailable, deadlockDetected, serializationFailure, adminShutdown, cannotConnectNow:
		return true
	}
	if s := sqlState(err); len(s) == 5 && s[:2] == "08" { // connection exception class
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		// A syscall.Errno has Timeout and Temporary, so it is a net.Error too: bare (not in
		// a net.OpError, which errors.As would have found first), it is the network's only
		// when it names a connection's failure. A file's "no such file or directory" is not.
		errno, bare := netErr.(syscall.Errno)
		if !bare || connectionErrno(errno) {
			return true
		}
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// pgx reports a connection that died mid-query without a SQLSTATE or a typed error.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return false
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection reset", "broken pipe", "unexpected EOF", "closed pool"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// connectionErrno reports whether e is a system error of a connection that failed or was
// cut.
func connectionErrno(e syscall.Errno) bool {
	switch e {
	case syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED, syscall.ETIMEDOUT,
		syscall.EPIPE, syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN:
		return true
	}
	return false
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Unanswered says in an operator's words why the database did not carry out a statement,
// for a failure IsInfrastructure reports (a timeout, a deadlock, a lost connection),
// without the driver's text ("ERROR: canceling statement due to statement timeout
// (SQLSTATE 57014)"). ok is false for any other error (a file's "no such file or
// directory" included).
func Unanswered(err error) (msg string, ok bool) {
	if !IsInfrastructure(err) {
		return "", false
	}
	switch sqlState(err) {
	case queryCanceled:
		return "the database canceled a statement at its statement timeout: another session may hold a lock it waited for; retry", true
	case lockNotAvailable:
		return "the database gave up waiting for a lock another session holds (lock_timeout); retry", true
	case deadlockDetected, serializationFailure:
		return "the database ended the transaction to resolve a conflict with another one; retry", true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the database did not answer in time; retry", true
	}
	return "the connection to the database was lost or refused mid-command (a restart, a failover?); retry", true
}

// RetryAfterSeconds is what a client told "database unavailable" should wait before it
// retries: long enough for the requests ahead of it to finish or reach their deadline
// under the default settings, short enough not to stall a client after a blip.
const RetryAfterSeconds = 2

// MsgUnavailable is what a client is told when the database failed its call (Classify):
// a retry shortly may succeed (a keyed write's retry is applied once).
const MsgUnavailable = "the database is unavailable; retry shortly"

// Classify turns a database failure into a domain error: infrastructure trouble becomes
// Unavailable (retryable, said so to the client); anything else stays an internal error.
// The cause is kept for the log in both cases.
func Classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := apperr.As(err); ok {
		return err
	}
	if IsInfrastructure(err) {
		e := apperr.Wrap(apperr.Unavailable, MsgUnavailable, errors.Join(errors.New(op), err))
		// Read by every HTTP-level answer (Retry-After) and by formats that carry details.
		e.Details = map[string]any{"retry_after_seconds": RetryAfterSeconds}
		return e
	}
	return apperr.Wrap(apperr.Internal, "internal error", errors.Join(errors.New(op), err))
}
