-- Idempotency keys (internal/idempotency, docs/idempotency.md). Every statement runs in the
-- calling agent's tenant (org and agent); the clean-up runs on the owner's pool.

-- name: IdempotencyKeyClaim :execrows
-- Pipelined before the COMMIT of the request's write transaction (pg.Claim): it records
-- the key only when the transaction wrote something (it has a transaction id), so a
-- transaction that only read leaves the claim to a later one. A live row with the same
-- key fails it with a unique violation, rolling the write back (a concurrent duplicate
-- waits on the index until the first commits, then fails). An expired row (older than
-- the retention) is replaced: it is deleted first, in the same statement.
WITH wrote AS MATERIALIZED (
  SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS yes
), expired AS (
  DELETE FROM idempotency_key k
  WHERE k.org_id = sqlc.arg(org_id)::uuid AND k.agent_id = sqlc.arg(agent_id)::uuid
    AND k.principal = sqlc.arg(principal)::text AND k.key = sqlc.arg(key)::text
    AND k.created_at <= sqlc.arg(expired_before)::timestamptz AND (SELECT yes FROM wrote)
  RETURNING 1
)
INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool, created_at)
SELECT sqlc.arg(org_id)::uuid, sqlc.arg(agent_id)::uuid, sqlc.arg(principal)::text, sqlc.arg(key)::text,
  sqlc.arg(fingerprint)::bytea, sqlc.arg(tool)::text, sqlc.arg(created_at)::timestamptz
FROM wrote
-- Referencing expired makes the DELETE run (to completion) before the INSERT's row.
WHERE wrote.yes AND (SELECT count(*) FROM expired) >= 0;

-- name: IdempotencyKeyGet :one
-- The live record of a key, if any (an expired one counts as absent).
SELECT fingerprint, tool, created_at, response, answered_at FROM idempotency_key
WHERE org_id = sqlc.arg(org_id) AND agent_id = sqlc.arg(agent_id) AND principal = sqlc.arg(principal)
  AND key = sqlc.arg(key) AND created_at > sqlc.arg(expired_before);

-- name: IdempotencyKeySaveAnswer :exec
-- The answer of a claimed key, stored right after the write committed.
UPDATE idempotency_key SET response = sqlc.arg(response), answered_at = sqlc.arg(answered_at)
WHERE org_id = sqlc.arg(org_id) AND agent_id = sqlc.arg(agent_id) AND principal = sqlc.arg(principal)
  AND key = sqlc.arg(key);

-- name: IdempotencyKeyDeleteExpired :execrows
-- The periodic clean-up, across tenants (owner's pool), a bounded batch per statement.
DELETE FROM idempotency_key k
USING (SELECT o.org_id, o.agent_id, o.principal, o.key FROM idempotency_key o
       WHERE o.created_at <= sqlc.arg(expired_before) ORDER BY o.created_at LIMIT sqlc.arg(batch)) old
WHERE k.org_id = old.org_id AND k.agent_id = old.agent_id AND k.principal = old.principal AND k.key = old.key;
