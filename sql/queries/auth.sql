-- Authentication reads. They run before the tenant is known, under the app.lookup
-- setting, which lets RLS show exactly the rows whose public id part is presented.

-- name: AgentKeysByKeyID :many
SELECT k.org_id, k.id, k.agent_id, k.secret_hash
FROM agent_key k
WHERE k.key_id = $1 AND k.revoked_at IS NULL;

-- name: ConnectCodesByCodeID :many
SELECT c.project_id, c.id, c.secret_hash
FROM connect_code c
WHERE c.code_id = $1 AND c.revoked_at IS NULL;

-- name: AgentIdentity :one
SELECT a.slug, a.name, a.model, a.kind, o.name AS org_name
FROM agent a JOIN organisation o ON o.id = a.org_id
WHERE a.org_id = $1 AND a.id = $2;
