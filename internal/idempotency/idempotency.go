// Package idempotency serves the Idempotency-Key header of write tools (mcp.Idempotency)
// on Postgres. The record that a key was used is inserted by the tool's own write
// transaction, pipelined before its COMMIT (pg.Claim), so it commits if and only if the
// write does; the answer is stored right after. docs/idempotency.md has the design and
// its failure cases.
package idempotency

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

const (
	// Retention is how long a key is remembered: a key older than this is treated as
	// new (the draft's 24 hours), and the periodic clean-up deletes it.
	Retention = 24 * time.Hour
	// InProgressFor is how long a key whose write committed but whose answer is not
	// stored yet counts as in progress (retry later); after it, the answer is lost (the
	// process died between the commit and storing the answer). It is longer than any
	// request lives.
	InProgressFor = time.Minute
	// answerWait is how long a duplicate that lost the race waits for the first call's
	// answer (stored a few milliseconds after its commit) before saying "in progress".
	answerWait = 2 * time.Second
	answerPoll = 25 * time.Millisecond
	// saveTimeout bounds storing an answer, which outlives a canceled request.
	saveTimeout = 5 * time.Second
	// CleanupBatch bounds the rows one clean-up statement deletes.
	CleanupBatch = 1000
)

// Store implements mcp.Idempotency.
type Store struct {
	DB *pg.DB
	Q  *db.Queries
	// Now is the clock of created_at, expiry and the in-progress window (time.Now when
	// nil); tests move it.
	Now func() time.Time

	answers answers
}

var _ mcp.Idempotency = (*Store)(nil)

// New builds the store; a nil now is the wall clock.
func New(database *pg.DB, now func() time.Time) *Store {
	return &Store{DB: database, Q: db.New(), Now: now}
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Principal is the part of a key's scope the URL binds: the endpoint, and the project and
// part when the caller's address names them. With the caller's organisation and agent it
// forms the key's scope, so keys of two agents, two tenants, two parts or two addresses
// never collide.
func Principal(endpoint string, sc tenancy.Scope) string {
	p := endpoint
	if sc.InRoom() {
		p += "/" + sc.ProjectID.String()
	}
	if sc.Part != "" {
		p += "/" + sc.Part
	}
	return p
}

// Begin prepares the claim of a keyed write; nothing is sent to the database until the
// tool's write transaction commits.
func (s *Store) Begin(ctx context.Context, call mcp.IdempotentCall) (context.Context, mcp.IdempotentRun, error) {
	sc, ok := call.Scope.(tenancy.Scope)
	if !ok || sc.OrgID == uuid.Nil || sc.AgentID == uuid.Nil {
		return ctx, nil, fmt.Errorf("idempotency: begin: the caller is not a verified agent scope (%T)", call.Scope)
	}
	now := s.now()
	// The key's policy reads only the organisation and the agent, so the tenant of the
	// answer's and the lookup's transactions comes with empty directory lists: they do
	// not compute them (rr_set_directory's index reads, pipelined but not free).
	r := &run{s: s, tenant: pg.Tenant{OrgID: sc.OrgID, AgentID: sc.AgentID, Visible: &pg.Visible{}}, principal: Principal(call.Endpoint, sc),
		key: call.Key, fingerprint: call.Fingerprint, tool: call.Tool}
	// sqlc writes the statements; they are not run here but carried to the COMMIT: the
	// expired row of the key, if any, is deleted, then the key inserted (two router
	// statements on Citus, where one statement doing both has no distributed plan).
	var rec recorder
	if _, err := s.Q.IdempotencyKeyDeleteExpiredByKey(ctx, &rec, db.IdempotencyKeyDeleteExpiredByKeyParams{
		OrgID: sc.OrgID, AgentID: sc.AgentID, Principal: r.principal, Key: r.key, ExpiredBefore: now.Add(-Retention),
	}); err != nil {
		return ctx, nil, fmt.Errorf("idempotency: begin: %w", err)
	}
	if _, err := s.Q.IdempotencyKeyClaim(ctx, &rec, db.IdempotencyKeyClaimParams{
		OrgID: sc.OrgID, AgentID: sc.AgentID, Principal: r.principal, Key: r.key, Fingerprint: r.fingerprint[:],
		Tool: r.tool, CreatedAt: now,
	}); err != nil {
		return ctx, nil, fmt.Errorf("idempotency: begin: %w", err)
	}
	r.claim = &pg.Claim{Statements: rec.statements}
	return pg.WithClaim(ctx, r.claim), r, nil
}

// run is one keyed call.
type run struct {
	s           *Store
	tenant      pg.Tenant
	principal   string
	key         string
	fingerprint [32]byte
	tool        string
	claim       *pg.Claim
}

func (r *run) Committed() bool { return r.claim.Committed() }

// Save stores the answer; it returns once the answer is committed. Concurrent calls'
// answers share their transactions (answers.go). It is not canceled with the request: a
// client that hung up is the one that will retry, and its retry needs this answer.
func (r *run) Save(ctx context.Context, response json.RawMessage) error {
	return r.s.answers.store(ctx, r.s, &answer{tenant: r.tenant, principal: r.principal, key: r.key, response: response, at: r.s.now()})
}

// Earlier finds the call that holds the key. A call that holds it but has no answer yet
// has just committed (its answer follows within milliseconds) or died before storing it:
// Earlier waits briefly for the answer, then says which.
func (r *run) Earlier(ctx context.Context) (json.RawMessage, error) {
	ctx = pg.WithoutClaim(ctx)
	give := time.Now().Add(answerWait) // the wait is bounded in real time, whatever Now says
	for {
		rec, found, err := r.lookup(ctx)
		switch {
		case err != nil:
			return nil, pg.Classify("idempotency: look up key", err)
		case !found:
			return nil, nil
		case subtle.ConstantTimeCompare(rec.Fingerprint, r.fingerprint[:]) != 1:
			return nil, apperr.New(apperr.Conflict, "this %s was already used in the last %d hours for a different request (%s with other arguments); "+
				"nothing was done. Send a new key with each new request", mcp.HeaderIdempotencyKey, int(Retention.Hours()), rec.Tool).WithReason(mcp.ReasonIdempotencyKeyReused)
		case rec.Response != nil:
			return rec.Response, nil
		case r.s.now().Sub(rec.CreatedAt) >= InProgressFor:
			return nil, apperr.New(apperr.Conflict, "the request with this %s was already applied (at %s) but its answer was lost; "+
				"it was not applied again. Read the current state with a read tool instead of retrying, and use a new key for a new request",
				mcp.HeaderIdempotencyKey, rec.CreatedAt.UTC().Format(time.RFC3339)).WithReason(mcp.ReasonIdempotencyAnswerLost)
		case time.Now().After(give):
			return nil, apperr.New(apperr.Conflict, "a request with this %s is still in progress; retry the same request with the same key in a few seconds",
				mcp.HeaderIdempotencyKey).WithReason(mcp.ReasonIdempotencyInProgress)
		}
		select {
		case <-ctx.Done():
			// The caller is gone or out of time: retryable, and nothing was written.
			return nil, apperr.Wrap(apperr.Unavailable, "the request ended while waiting for the first answer of its key; retry it", ctx.Err())
		case <-time.After(answerPoll):
		}
	}
}

func (r *run) lookup(ctx context.Context) (db.IdempotencyKeyGetRow, bool, error) {
	var rec db.IdempotencyKeyGetRow
	err := r.s.DB.InTenant(ctx, r.tenant, func(tx *pg.Tx) (err error) {
		rec, err = r.s.Q.IdempotencyKeyGet(ctx, tx, db.IdempotencyKeyGetParams{OrgID: r.tenant.OrgID, AgentID: r.tenant.AgentID,
			Principal: r.principal, Key: r.key, ExpiredBefore: r.s.now().Add(-Retention)})
		return err
	})
	if pg.IsNoRows(err) {
		return rec, false, nil
	}
	return rec, err == nil, err
}

// DeleteExpired removes keys older than Retention, across tenants, in bounded batches.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	return s.DB.OperatorBatches(ctx, "idempotency: delete expired keys", CleanupBatch, func(tx *pg.Tx) (int64, error) {
		return s.Q.IdempotencyKeyDeleteExpired(ctx, tx, db.IdempotencyKeyDeleteExpiredParams{
			ExpiredBefore: s.now().Add(-Retention), Batch: CleanupBatch})
	})
}

// recorder is a db.DBTX that runs nothing: it keeps the statements sqlc built, so the
// claim's SQL stays in sql/queries while pg sends it with the COMMIT.
type recorder struct {
	statements []pg.ClaimStatement
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.statements = append(r.statements, pg.ClaimStatement{SQL: sql, Args: args})
	return pgconn.CommandTag{}, nil
}

var errRecorderQuery = errors.New("idempotency: the claim recorder only records statements")

func (r *recorder) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errRecorderQuery
}

func (r *recorder) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

type errRow struct{}

func (errRow) Scan(...any) error { return errRecorderQuery }
