package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/relayroom/relayroom/internal/apperr"
)

// callTool runs tools/call. Protocol errors are only for a call that names no known
// tool; from there on every failure, bad arguments included, is a tool result with
// isError, in the endpoint's format. Nothing is answered before the caller's scope is
// settled (Provisional): a known tool's handler may run first, nothing else does.
func (h *handler[S]) callTool(ctx context.Context, c *caller[S], params json.RawMessage, er era, rid string) (any, *protocolError) {
	var p struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var perr *protocolError
	if params != nil {
		if err := json.Unmarshal(params, &p); err != nil {
			perr = &protocolError{code: codeInvalidParams, message: "Invalid params: tools/call needs an object with a string \"name\""}
		}
	}
	var tool *compiledTool[S]
	switch {
	case perr != nil:
	case p.Name == nil || *p.Name == "":
		perr = &protocolError{code: codeInvalidParams, message: "Invalid params: tools/call needs the tool's \"name\""}
	default:
		var ok bool
		if tool, ok = h.byName[*p.Name]; !ok {
			perr = &protocolError{code: codeInvalidParams, message: "Invalid params: unknown tool " + quote(*p.Name)}
		}
	}
	if perr != nil {
		if _, err := c.settle(ctx); err != nil {
			return nil, authProblem(err)
		}
	}
	if perr != nil {
		return nil, perr
	}

	start := time.Now()
	res, outcome, err := h.runTool(ctx, tool, c, p.Arguments, rid)
	if err != nil {
		return nil, authProblem(err)
	}
	if h.opts.OnToolCall != nil {
		h.opts.OnToolCall(ctx, h.ep.Name, tool.Name, outcome, time.Since(start))
	}
	sf := h.stateless(er)
	res.Meta, res.ResultType = sf.Meta, sf.ResultType
	return res, nil
}

// runTool validates, runs and shapes one call, and classifies its outcome. A tool whose
// caller is still provisional runs first, in Provisional.Defer's context; what it did is
// kept only when the scope held, and otherwise the call runs again with the settled
// scope (the first run stored nothing: see Provisional). err is a refusal of the caller's
// credential, found while settling.
func (h *handler[S]) runTool(ctx context.Context, tool *compiledTool[S], c *caller[S], rawArgs json.RawMessage, rid string) (toolResult, string, error) {
	f := h.ep.Format
	args, err := tool.input.prepareArgs(rawArgs)
	if err == nil && c.prov != nil {
		ran := h.execute(c.prov.Defer(ctx, c.scope), tool, c.scope, args, rid)
		held, serr := c.settle(ctx)
		if serr != nil {
			return toolResult{}, "", serr
		}
		if held {
			res, outcome := h.finish(tool, ran, rid)
			return res, outcome, nil
		}
		// The scope changed: what the handler answered with the old one is dropped.
	}
	if _, serr := c.settle(ctx); serr != nil {
		return toolResult{}, "", serr
	}
	if err != nil {
		if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
			h.log.DebugContext(ctx, "mcp: invalid arguments", "request_id", rid, "tool", tool.Name, "error", e.Message)
			return f.failure(e), OutcomeInvalid, nil
		}
		return h.internal(ctx, tool, rid, err), OutcomeInternal, nil
	}
	res, outcome := h.finish(tool, h.execute(ctx, tool, c.scope, args, rid), rid)
	return res, outcome, nil
}

// execution is what running a tool's handler left, for finish: nothing is answered,
// logged or stored from it before the caller is settled.
type execution struct {
	ctx   context.Context // the call's, with its idempotency claim
	value any
	err   error
	run   IdempotentRun // a keyed write's
	// failed is the answer of a keyed write that did not run (a malformed key).
	failed  *toolResult
	outcome string
}

// execute runs the handler, a write under its Idempotency-Key when it has one.
func (h *handler[S]) execute(ctx context.Context, tool *compiledTool[S], scope S, args json.RawMessage, rid string) execution {
	ex := execution{ctx: ctx}
	if !tool.Annotations.ReadOnly && h.opts.Idempotency != nil {
		if ex.ctx, ex.run, ex.failed, ex.outcome = h.beginIdempotent(ctx, tool, scope, args, rid); ex.failed != nil {
			return ex
		}
	}
	ex.value, ex.err = safeCall(ex.ctx, tool.Handler, scope, args)
	return ex
}

// finish answers an execution of a settled caller: a keyed write that committed nothing
// may be the retry of one that did, and then the first answer is sent, whatever this run
// found (it wrote nothing, or it was rolled back because the first holds the key); a keyed
// write that committed stores its answer.
func (h *handler[S]) finish(tool *compiledTool[S], ex execution, rid string) (toolResult, string) {
	ctx := ex.ctx
	switch {
	case ex.failed != nil:
		return *ex.failed, ex.outcome
	case ex.run == nil:
		return h.respond(ctx, tool, ex.value, ex.err, rid)
	case !ex.run.Committed() && !refusesTheCaller(ex.err):
		if res, outcome, ok := h.earlier(ctx, tool, ex.run, rid); ok {
			return res, outcome
		}
	}
	res, outcome := h.respond(ctx, tool, ex.value, ex.err, rid)
	if ex.run.Committed() {
		h.saveAnswer(ctx, tool, ex.run, res, rid)
	}
	return res, outcome
}

// refusesTheCaller reports whether a run was refused for who its caller is now (an
// agreement revoked, a grant removed, access lowered): such a caller gets the refusal,
// never the answer its key stored while it was allowed, or a client retrying with the
// same key would go on "succeeding" in a room it was removed from.
func refusesTheCaller(err error) bool {
	c := apperr.CodeOf(err)
	return err != nil && (c == apperr.Forbidden || c == apperr.Unauthenticated)
}

// respond shapes a handler's value or error in the endpoint's format and classifies it.
func (h *handler[S]) respond(ctx context.Context, tool *compiledTool[S], value any, err error, rid string) (toolResult, string) {
	f := h.ep.Format
	if err != nil {
		e, ok := apperr.As(err)
		switch {
		case !ok || e.Code == apperr.Internal:
			return h.internal(ctx, tool, rid, err), OutcomeInternal
		case e.Code == apperr.Unavailable:
			h.log.WarnContext(ctx, "mcp: tool unavailable", "request_id", rid, "tool", tool.Name, "error", err)
			return f.failure(e), OutcomeUnavailable
		case e.Code == apperr.Invalid:
			return f.failure(e), OutcomeInvalid
		}
		h.log.DebugContext(ctx, "mcp: tool refused", "request_id", rid, "tool", tool.Name, "error", err)
		return f.failure(e), OutcomeToolError
	}

	res, err := f.success(value)
	if err == nil && tool.output != nil {
		err = tool.output.validateValue(res.StructuredContent)
	}
	if err != nil {
		return h.internal(ctx, tool, rid, fmt.Errorf("tool %s returned a bad result: %w", tool.Name, err)), OutcomeInternal
	}
	return res, OutcomeOK
}

// internal logs the cause and answers with a message that carries the request id and
// nothing of the cause, which may hold SQL, hostnames or another tenant's data.
func (h *handler[S]) internal(ctx context.Context, tool *compiledTool[S], rid string, err error) toolResult {
	h.log.ErrorContext(ctx, "mcp: tool failed", "request_id", rid, "tool", tool.Name, "error", err)
	return h.ep.Format.failure(&apperr.Error{Code: apperr.Internal, Message: internalMessage(rid)})
}

// panicError carries a recovered panic and its stack to the log.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

func (p *panicError) LogValue() slog.Value { return slog.StringValue(p.Error()) }

// safeCall runs a handler and turns a panic into an error, so that one broken tool
// answers with an internal error instead of taking the request down.
func safeCall[S any](ctx context.Context, fn func(context.Context, S, json.RawMessage) (any, error), scope S, args json.RawMessage) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, &panicError{value: p, stack: debug.Stack()}
		}
	}()
	return fn(ctx, scope, args)
}

// beginIdempotent reads the call's Idempotency-Key and, when there is one, hands the call
// to Options.Idempotency. failed is set when the call must not run (a malformed key).
func (h *handler[S]) beginIdempotent(ctx context.Context, tool *compiledTool[S], scope S, args json.RawMessage, rid string) (context.Context, IdempotentRun, *toolResult, string) {
	key, err := idempotencyKey(ctx)
	if key == "" && err == nil {
		return ctx, nil, nil, ""
	}
	var run IdempotentRun
	if err == nil {
		ctx, run, err = h.opts.Idempotency.Begin(ctx, IdempotentCall{
			Endpoint: h.ep.Name, Tool: tool.Name, Key: key, Fingerprint: fingerprint(h.ep.Name, tool.Name, args), Scope: scope,
		})
	}
	if err != nil {
		res, outcome := h.respond(ctx, tool, nil, err, rid)
		return ctx, nil, &res, outcome
	}
	return ctx, run, nil, ""
}

// earlier answers a keyed call from the earlier call that holds its key, if any.
func (h *handler[S]) earlier(ctx context.Context, tool *compiledTool[S], run IdempotentRun, rid string) (toolResult, string, bool) {
	answer, err := run.Earlier(ctx)
	switch {
	case err != nil:
		res, outcome := h.respond(ctx, tool, nil, err, rid)
		return res, outcome, true
	case answer == nil:
		return toolResult{}, "", false
	}
	var res toolResult
	if err := json.Unmarshal(answer, &res); err != nil {
		return h.internal(ctx, tool, rid, fmt.Errorf("idempotency: stored answer of %s does not decode: %w", tool.Name, err)), OutcomeInternal, true
	}
	h.log.DebugContext(ctx, "mcp: replayed the answer of an earlier call with the same idempotency key", "request_id", rid, "tool", tool.Name)
	return res, OutcomeReplayed, true
}

// saveAnswer stores the answer of a call whose write committed its key. The answer is
// encoded before the era's fields are added: a replay adds those of its own request.
func (h *handler[S]) saveAnswer(ctx context.Context, tool *compiledTool[S], run IdempotentRun, res toolResult, rid string) {
	answer, err := encodeJSON(res)
	if err == nil {
		err = run.Save(ctx, answer)
	}
	if err != nil {
		// The write committed and this answer is right; only a lost-answer retry suffers.
		h.log.WarnContext(ctx, "mcp: idempotency answer not stored", "request_id", rid, "tool", tool.Name, "error", err)
	}
}
