-- Idempotency keys (internal/idempotency, docs/idempotency.md). Every statement runs in the
-- calling agent's tenant (org and agent); the clean-up runs on the owner's pool.

-- name: IdempotencyKeyDeleteExpiredByKey :execrows
-- The first statement of the claim (pg.Claim, internal/idempotency): an expired row of the
-- key (older than the retention) is deleted, so the claim's INSERT replaces it. A live row
-- is left for the INSERT to conflict with. Both statements are router queries on Citus
-- (the whole key, org first), pipelined before the COMMIT of a transaction that wrote.
DELETE FROM idempotency_key
WHERE org_id = sqlc.arg(org_id) AND agent_id = sqlc.arg(agent_id) AND principal = sqlc.arg(principal)
  AND key = sqlc.arg(key) AND created_at <= sqlc.arg(expired_before);

-- name: IdempotencyKeyClaim :execrows
-- The record that the key was used, sent by pg.Tx only when its transaction wrote (pg.Claim
-- says how it tells). A live row with the same key fails it with a unique violation,
-- rolling the write back (a concurrent duplicate waits on the index until the first
-- commits, then fails; one that deleted the same expired row waits on that row first).
INSERT INTO idempotency_key (org_id, agent_id, principal, key, fingerprint, tool, created_at)
VALUES (sqlc.arg(org_id), sqlc.arg(agent_id), sqlc.arg(principal), sqlc.arg(key),
  sqlc.arg(fingerprint), sqlc.arg(tool), sqlc.arg(created_at));

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
