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

-- name: AgentIdentity :one
-- After rr_set_directory (pg.Tenant.Visible nil), whose settings it returns (visible_*) for
-- the request's later transactions (pg.Tenant.Visible).
SELECT a.slug, a.name, a.model, a.kind, o.name AS org_name,
  rr_orgs()::uuid[] AS visible_orgs, rr_projects()::uuid[] AS visible_projects,
  rr_agents()::uuid[] AS visible_agents, rr_users()::uuid[] AS visible_users
FROM agent a JOIN organisation o ON o.id = a.org_id
WHERE a.org_id = $1 AND a.id = $2;
