package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/relayroom/relayroom/internal/apperr"
)

// HeaderIdempotencyKey names the request header that makes a write tool call safe to
// retry (IETF draft-ietf-httpapi-idempotency-key-header): the same key with the same
// request replays the first answer instead of writing again.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxIdempotencyKeyBytes bounds a key (the column holding it has the same bound).
const MaxIdempotencyKeyBytes = 255

// Reasons of the idempotency errors (threads and desk send them as the error code).
const (
	ReasonInvalidIdempotencyKey = "invalid_idempotency_key"
	ReasonIdempotencyKeyReused  = "idempotency_key_reused"
	ReasonIdempotencyInProgress = "idempotency_key_in_progress"
	ReasonIdempotencyAnswerLost = "idempotency_answer_lost"
)

// OutcomeReplayed is reported to Options.OnToolCall for a call answered with the stored
// answer of an earlier call with the same Idempotency-Key (the tool wrote nothing again).
const OutcomeReplayed = "replayed"

// Idempotency makes write tools (ReadOnly false) safe to retry. The core calls it only
// for a write tool whose request carries an Idempotency-Key; read tools ignore the header.
// It is implemented outside the core (internal/idempotency, on Postgres).
type Idempotency interface {
	// Begin prepares a keyed call. The returned context is the one the tool runs with:
	// it carries what makes the record of the key commit with the tool's own write. An
	// error is an *apperr.Error the client sees, or an internal error.
	Begin(ctx context.Context, call IdempotentCall) (context.Context, IdempotentRun, error)
}

// IdempotentCall is what identifies a keyed call.
type IdempotentCall struct {
	Endpoint string
	Tool     string
	Key      string
	// Fingerprint is the SHA-256 of the canonical request: endpoint, tool and arguments
	// (validated, defaults applied, keys sorted), never the JSON-RPC id.
	Fingerprint [32]byte
	// Scope is the endpoint's verified caller (the Authenticate result): keys are scoped
	// to it.
	Scope any
}

// IdempotentRun follows one keyed call after its tool ran.
type IdempotentRun interface {
	// Committed reports whether the tool's write committed the record of the key: the
	// answer must then be saved.
	Committed() bool
	// Save stores the answer sent for a committed key. A failure is logged, not sent:
	// the write happened and its answer is still correct.
	Save(ctx context.Context, answer json.RawMessage) error
	// Earlier looks for an earlier call with the same key, when this one committed
	// nothing: its stored answer (replayed as is), or an *apperr.Error (the key was used
	// for another request, is still in progress, or its answer was lost). Nil and nil
	// mean there is none: this call's own answer stands.
	Earlier(ctx context.Context) (json.RawMessage, error)
}

type idempotencyKeyCtx struct{}

// withIdempotencyKey hands the request's Idempotency-Key header lines to the tool call.
func withIdempotencyKey(r *http.Request) context.Context {
	if v := r.Header.Values(HeaderIdempotencyKey); len(v) > 0 {
		return context.WithValue(r.Context(), idempotencyKeyCtx{}, v)
	}
	return r.Context()
}

// idempotencyKey reads the key of a call: "" when there is none. It accepts the draft's
// form, a Structured Field string ("…"), and a bare token, as most clients send it.
func idempotencyKey(ctx context.Context) (string, error) {
	lines, _ := ctx.Value(idempotencyKeyCtx{}).([]string)
	if len(lines) == 0 {
		return "", nil
	}
	bad := func(why string) error {
		return apperr.New(apperr.Invalid, "the %s header %s", HeaderIdempotencyKey, why).WithReason(ReasonInvalidIdempotencyKey)
	}
	if len(lines) > 1 || strings.Contains(lines[0], ",") && !strings.HasPrefix(strings.TrimSpace(lines[0]), `"`) {
		return "", bad("must be sent once, with one key")
	}
	k := strings.TrimSpace(lines[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > MaxIdempotencyKeyBytes {
		return "", bad(fmt.Sprintf("must hold 1 to %d characters (a UUID is a good key)", MaxIdempotencyKeyBytes))
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", bad(`must be printable ASCII without quotes or backslashes (a UUID is a good key)`)
		}
	}
	return k, nil
}

// fingerprint hashes the canonical request. NUL separates the parts: no tool or
// endpoint name contains one, and the arguments come last.
func fingerprint(endpoint, tool string, args json.RawMessage) [32]byte {
	h := sha256.New()
	h.Write([]byte(endpoint))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
