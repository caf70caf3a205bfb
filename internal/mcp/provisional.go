package mcp

import (
	"context"
	"net/http"
)

// Provisional lets an endpoint's Authenticate return a scope before its credential is
// verified for this request, when a verification made a moment ago vouches for it and this
// request's own can travel with the first database statements of the call instead of
// costing a round trip before them (tenancy's scope cache, docs/tenancy.md). The core then
// holds every answer until the scope is settled:
//
//   - tools/call of a known tool runs its handler (a write under its Idempotency-Key) in
//     Defer's context, whose first database work carries the verification, then settles
//     the scope. When the verification failed, the handler's answer is dropped unseen,
//     and the call is run again with the scope Settle resolved in full, or refused as
//     Authenticate refuses;
//   - everything else (unknown tools, every other method) settles first.
//
// A write tool may run before the verification is known because its first run then
// stores nothing: Defer's context makes every transaction carry the verification in its
// first round trip or make it before it starts, and a failed check stops the rest of its
// round trip in the database, COMMIT included (pg.Verification). Its tools must keep
// their effects in the database: one that acted elsewhere before its first transaction
// would act twice.
type Provisional[S any] struct {
	// Defer returns the context a tool's handler runs in with a scope that may be
	// provisional.
	Defer func(ctx context.Context, scope S) context.Context
	// Settle makes scope final: unchanged and held when it was final or its verification
	// passed (Settle makes it now when no statement did), else the request's credential
	// resolved in full (held false), or the refusal, which is answered like
	// Authenticate's.
	Settle func(ctx context.Context, r *http.Request, scope S) (settled S, held bool, err error)
}

// caller is a request's scope as the methods use it: settled before anything but a
// tool's handler sees it.
type caller[S any] struct {
	r     *http.Request
	scope S
	prov  *Provisional[S]
}

// settle makes the scope final (nothing to do without Provisional); held is false when the
// scope changed, so that what was computed with the old one must be computed again.
func (c *caller[S]) settle(ctx context.Context) (held bool, err error) {
	if c.prov == nil {
		return true, nil
	}
	s, held, err := c.prov.Settle(ctx, c.r, c.scope)
	if err != nil {
		return false, err
	}
	c.scope, c.prov = s, nil
	return held, nil
}

// authProblem carries a refusal of the credential out of dispatch: servePost answers it
// as a refused authentication (authFailure), not as a method's error.
func authProblem(err error) *protocolError { return &protocolError{auth: err} }
