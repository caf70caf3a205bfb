// Package apperr is the small set of error codes the domain speaks. Each toolset's wire
// format (rooms text errors, threads and desk JSON errors, HTTP statuses) is derived from
// these codes in exactly one place, so a domain function never decides how a client sees
// its failure.
package apperr

import (
	"errors"
	"fmt"
)

// Code classifies a failure. The set is deliberately small.
type Code string

const (
	Invalid         Code = "invalid"         // bad input: schema, bounds, formats
	NotFound        Code = "not_found"       // absent, or in another tenant (never revealed)
	Forbidden       Code = "forbidden"       // authenticated but not allowed
	Unauthenticated Code = "unauthenticated" // missing or bad credential
	Conflict        Code = "conflict"        // state does not allow it (closed thread, decided task)
	RateLimited     Code = "rate_limited"    // a budget is spent
	Unavailable     Code = "unavailable"     // infrastructure trouble worth retrying
	Internal        Code = "internal"        // a bug or an unexpected failure
)

// ReasonInvalidArgument is the reason of an argument the schema let through but the
// domain refuses, shared by every toolset whose wire carries reasons.
const ReasonInvalidArgument = "invalid_argument"

// Error is a domain error with a code, a message meant for the caller, and an optional
// wrapped cause that is logged but never sent.
type Error struct {
	Code    Code
	Message string         // shown to the client verbatim
	Reason  string         // optional machine-readable sub-code (e.g. "thread_closed")
	Details map[string]any // optional extra fields for formats that carry them
	Err     error          // cause, for logs
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error with a code and a client-facing message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithReason returns a copy of e with a machine-readable sub-code. e itself is left as it
// is: an error held in a variable and shared between calls must not take the reason of
// whichever call named one last.
func (e *Error) WithReason(reason string) *Error {
	c := *e
	c.Reason = reason
	return &c
}

// Wrap marks an unexpected failure as internal, keeping the cause for the log.
func Wrap(code Code, msg string, err error) *Error {
	return &Error{Code: code, Message: msg, Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, Internal when there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// HTTPStatus is the HTTP status of a code, for every HTTP surface of the service (MCP
// authentication failures, the pager, CI and attachment routes), so they all agree.
func HTTPStatus(c Code) int {
	switch c {
	case Invalid:
		return 400
	case Unauthenticated:
		return 401
	case Forbidden:
		return 403
	case NotFound:
		return 404
	case Conflict:
		return 409
	case RateLimited:
		return 429
	case Unavailable:
		return 503
	}
	return 500
}
