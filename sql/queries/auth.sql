-- Authentication. The first query runs before the tenant is known, under the app.lookup
-- setting, which lets RLS show exactly the rows whose public id parts are presented.

-- name: CredentialRows :many
-- An agent key's rows and a connect code's rows in one round trip; hashes are compared in Go.
SELECT 'key'::text AS kind, k.org_id AS owner_id, k.agent_id, k.secret_hash
FROM agent_key k
WHERE k.key_id = sqlc.arg(key_id)::text AND k.revoked_at IS NULL
UNION ALL
SELECT 'code'::text, c.project_id, c.project_id, c.secret_hash
FROM connect_code c
WHERE c.code_id = sqlc.arg(code_id)::text AND c.revoked_at IS NULL;

-- name: CredentialAssumeTenant :exec
-- Verifies an agent key (and a connect code, when code_id is not empty) and, only when they
-- match, makes the transaction's tenant theirs: the key's organisation and agent, and the
-- code's project (or project_id, the room of a per-room address); then the directory lists
-- (rr_set_directory) for that tenant. It runs under the app.lookup setting, like
-- CredentialRows, and clears it. The hashes are compared here, so the bind statement can
-- follow in the same pipelined round trip: a credential that does not match sets nothing,
-- and the statements after it see no tenant and find nothing. The comparison is not
-- constant-time, which is safe: what an attacker controls is a SHA-256 preimage, and
-- learning a prefix of a stored hash does not help find one. Plain PostgreSQL only: on
-- Citus the workers see no set_config (internal/pg), and the resolver verifies in Go.
SELECT rr_set_directory() FROM (
  SELECT set_config('app.org_id', k.org_id::text, true), set_config('app.agent_id', k.agent_id::text, true),
    set_config('app.project_id', coalesce(coalesce(c.project_id, sqlc.narg(project_id)::uuid)::text, ''), true),
    set_config('app.lookup', '', true)
  FROM agent_key k
  LEFT JOIN connect_code c ON c.code_id = sqlc.arg(code_id)::text AND c.secret_hash = sqlc.arg(code_hash)::bytea
    AND c.revoked_at IS NULL
  WHERE k.key_id = sqlc.arg(key_id)::text AND k.secret_hash = sqlc.arg(key_hash)::bytea AND k.revoked_at IS NULL
    AND (sqlc.arg(code_id)::text = '') = (c.code_id IS NULL)
  OFFSET 0) verified;

-- name: CredentialAssumeCachedTenant :exec
-- CredentialAssumeTenant for a caller resolved a moment ago (tenancy's scope cache): the
-- same verification of the key (and code) against the stored hashes, in the same round
-- trip as the recheck that follows, but the directory lists are the cached ones instead of
-- rr_set_directory's, and the key must still be the cached agent's. Nothing matches, nothing
-- is set: the check that follows then raises and the resolver takes the uncached path.
SELECT 1 FROM (
  SELECT set_config('app.org_id', k.org_id::text, true), set_config('app.agent_id', k.agent_id::text, true),
    set_config('app.project_id', coalesce(coalesce(c.project_id, sqlc.narg(project_id)::uuid)::text, ''), true),
    set_config('app.lookup', '', true),
    set_config('app.orgs', coalesce(sqlc.narg(orgs)::uuid[]::text, ''), true),
    set_config('app.projects', coalesce(sqlc.narg(projects)::uuid[]::text, ''), true),
    set_config('app.agents', coalesce(sqlc.narg(agents)::uuid[]::text, ''), true),
    set_config('app.users', coalesce(sqlc.narg(users)::uuid[]::text, ''), true)
  FROM agent_key k
  LEFT JOIN connect_code c ON c.code_id = sqlc.arg(code_id)::text AND c.secret_hash = sqlc.arg(code_hash)::bytea
    AND c.revoked_at IS NULL
  WHERE k.key_id = sqlc.arg(key_id)::text AND k.secret_hash = sqlc.arg(key_hash)::bytea AND k.revoked_at IS NULL
    AND k.agent_id = sqlc.arg(agent_id)::uuid
    AND (sqlc.arg(code_id)::text = '') = (c.code_id IS NULL)
  OFFSET 0) verified;

-- name: AgentConfirmOwn :exec
-- The check of an agent resolved a moment ago (tenancy's scope cache), after
-- CredentialAssumeCachedTenant in the same round trip: presence moved as in
-- AgentGetOwnIdentity, and one row when the key verified (its tenant is set); otherwise
-- it raises rr_unverified's error (000048), so that nothing sent after it in the same
-- round trip runs, a pipelined COMMIT included. Its names and directory lists come from
-- the cache. It returns nothing anyone reads: the transaction reads its result
-- (pg.Tx.Verifying). One row to start from and the agent LEFT JOINed to it, so that an
-- unverified key still yields the row whose condition raises.
-- Presence moves through rr_touch_presence (000047), called only when one of the agent's
-- memberships was last seen a second ago or more (the function's view decides which of
-- them move): a data-modifying CTE ran its UPDATE's setup on every call.
SELECT 1 FROM (SELECT) one
LEFT JOIN agent a ON a.org_id = rr_org() AND a.id = rr_agent()
WHERE CASE WHEN a.id IS NOT NULL
  THEN NOT EXISTS (SELECT 1 FROM membership m WHERE m.agent_id = rr_agent()
      AND (m.last_seen_at IS NULL OR m.last_seen_at < now() - interval '1 second'))
    OR rr_touch_presence(NULL)
  ELSE rr_unverified() END;

-- name: AgentGetIdentity :one
-- After rr_set_directory (pg.Tenant.Visible nil), whose settings it returns (visible_*) for
-- the request's later transactions (pg.Tenant.Visible).
SELECT a.slug, a.name, a.model, a.kind, o.name AS org_name,
  rr_orgs()::uuid[] AS visible_orgs, rr_projects()::uuid[] AS visible_projects,
  rr_agents()::uuid[] AS visible_agents, rr_users()::uuid[] AS visible_users
FROM agent a JOIN organisation o ON o.id = a.org_id
WHERE a.org_id = $1 AND a.id = $2;

-- name: AgentGetOwnIdentity :one
-- AgentGetIdentity after CredentialAssumeTenant, in the same round trip, with the agent's
-- presence moved in every room where it is admitted (MembershipTouchByAgent): the agent is
-- the tenant's, which only a verified key sets (no row otherwise).
WITH touch AS (
  UPDATE membership mm SET last_seen_at = now()
  FROM membership_presence_due d
  WHERE mm.agent_id = rr_agent() AND d.project_id = mm.project_id AND d.id = mm.id
  RETURNING mm.id
)
SELECT a.org_id, a.id, a.slug, a.name, a.model, a.kind, o.name AS org_name,
  rr_orgs()::uuid[] AS visible_orgs, rr_projects()::uuid[] AS visible_projects,
  rr_agents()::uuid[] AS visible_agents, rr_users()::uuid[] AS visible_users
FROM agent a JOIN organisation o ON o.id = a.org_id
WHERE a.org_id = rr_org() AND a.id = rr_agent();
