package pg

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrUnverified is returned (wrapped) by a transaction of a request whose Verification
// failed: the credentials no longer verify, or what the verification compares changed.
var ErrUnverified = errors.New("pg: the request's credentials did not verify")

// Verification is the check of a request's credentials made by the first statements of the
// request's first tenant transaction instead of in a round trip of its own (tenancy's
// provisional scopes). Carried in the context (WithVerification), it is made once:
//
//   - a transaction for Tenant carries it: it starts under Lookup, Queue's statements
//     follow the settings and the transaction's own statements follow them, in the same
//     round trip. Queue's statements set the tenant only when the credentials verify, and
//     otherwise the last of them raises SQLSTATE RR001 (rr_unverified, migration 000048):
//     the server then runs nothing sent after it in that round trip, a pipelined COMMIT
//     included, and the transaction is aborted. The transaction reads their results
//     (Tx.Verifying) before any result of its own: when one raised or found no row, the
//     transaction fails with ErrUnverified and nothing it sent is read. Since nothing
//     after a failed check runs, the transaction may be a write, its COMMIT in the same
//     round trip as the check;
//   - a transaction for any other tenant, or on the operator's pool (which no row-level
//     security guards), first makes it in a transaction of its own (DB.Verify), one round
//     trip, and runs only when it passed.
//
// Once it passed, the request's transactions run as any other; once it failed, each of
// them fails with ErrUnverified without sending anything.
type Verification struct {
	// Tenant is what Queue's statements set when the credentials verify.
	Tenant Tenant
	// Lookup names the credentials' public ids, the tenant Queue's statements start from.
	Lookup string
	// Queue queues the statements (Tx.Pipeline, Tx.Verifying) that verify the credentials
	// and set Tenant when they pass.
	Queue func(ctx context.Context, tx *Tx) error

	mu    sync.Mutex
	state verifyState
}

type verifyState int8

const (
	verifyPending verifyState = iota
	verifyPassed
	verifyFailed
)

type verificationKey struct{}

// WithVerification returns a context whose tenant transactions make v (nil: none).
func WithVerification(ctx context.Context, v *Verification) context.Context {
	return context.WithValue(ctx, verificationKey{}, v)
}

func verificationFrom(ctx context.Context) *Verification {
	v, _ := ctx.Value(verificationKey{}).(*Verification)
	return v
}

func (v *Verification) get() verifyState {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state
}

// settle records what a statement of v found; a failure stays.
func (v *Verification) settle(passed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case !passed:
		v.state = verifyFailed
	case v.state == verifyPending:
		v.state = verifyPassed
	}
}

// Passed reports whether a transaction made v and it passed.
func (v *Verification) Passed() bool { return v.get() == verifyPassed }

// Verify makes v in a transaction of its own (BEGIN, the settings, v's statements and the
// COMMIT, one round trip) unless a transaction made it already. The error wraps
// ErrUnverified when v failed, now or before.
func (d *DB) Verify(ctx context.Context, v *Verification) error {
	switch v.get() {
	case verifyPassed:
		return nil
	case verifyFailed:
		return fmt.Errorf("pg verify: %w", ErrUnverified)
	}
	// Not the request's write: it must not commit the call's idempotency claim.
	return d.InTenant(WithVerification(WithoutClaim(ctx), v), v.Tenant, func(*Tx) error { return nil })
}

// verifying decides how a transaction for t, about to start, makes the request's
// verification: ride is the one it carries in its first round trip (nil: none to carry,
// or made before it by DB.Verify).
func (d *DB) verifying(ctx context.Context, t Tenant) (ride *Verification, err error) {
	v := verificationFrom(ctx)
	if v == nil {
		return nil, nil
	}
	switch v.get() {
	case verifyPassed:
		return nil, nil
	case verifyFailed:
		return nil, fmt.Errorf("pg tx: %w", ErrUnverified)
	}
	if t == v.Tenant {
		return v, nil
	}
	return nil, d.Verify(ctx, v)
}

// Verifying queues, as Pipeline does, the statements fn issues, as checks of the
// transaction's Verification: each must report a row in its command tag and raise
// SQLSTATE RR001 when it cannot, or the transaction fails with ErrUnverified when its
// results are read. Only for Verification.Queue.
func (t *Tx) Verifying(fn func() error) error {
	if t.verify == nil {
		return errors.New("pg tx: Verifying outside a verification")
	}
	n := len(t.pending)
	err := t.Pipeline(fn)
	for i := n; i < len(t.pending); i++ {
		t.pending[i].verify = t.verify
	}
	return err
}
