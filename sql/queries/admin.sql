-- Operator writes used by `relayroom admin` (runs as the owning role, not the request role).
-- Upserts take updated_at from excluded (the column's default, now(), the same instant):
-- Citus refuses a function that is not IMMUTABLE in DO UPDATE SET (docs/scale.md).

-- name: OrganisationUpsert :one
-- An organisation of an admin file: a new one with its plan and time zone (trial and UTC
-- when the file leaves them out); an existing one keeps those the file leaves out (''), as
-- `admin org create` does, so that a file naming only a new name does not put a paying
-- organisation back on trial.
INSERT INTO organisation (id, slug, name, plan, timezone)
VALUES (@id, @slug, @name, coalesce(nullif(@plan::text, ''), 'trial'), coalesce(nullif(@timezone::text, ''), 'UTC'))
ON CONFLICT (slug) DO UPDATE SET name = excluded.name,
  plan = CASE WHEN @plan::text = '' THEN organisation.plan ELSE excluded.plan END,
  timezone = CASE WHEN @timezone::text = '' THEN organisation.timezone ELSE excluded.timezone END,
  updated_at = excluded.updated_at
RETURNING id, (xmax = 0)::boolean AS created, plan, timezone;

-- name: OrganisationGetBySlug :one
SELECT id, slug, name, plan, timezone, created_at FROM organisation WHERE slug = $1;

-- name: OrganisationList :many
SELECT id, slug, name, plan, timezone, created_at FROM organisation ORDER BY slug;

-- name: UserUpsert :one
-- A name left out (empty) keeps the stored one, as a password left out does: a file
-- adding a person to a second organisation erased their name everywhere.
INSERT INTO app_user (id, email, name, password_hash)
VALUES ($1, $2, $3, $4)
ON CONFLICT (email) DO UPDATE SET name = coalesce(nullif(excluded.name, ''), app_user.name),
  password_hash = coalesce(excluded.password_hash, app_user.password_hash), updated_at = excluded.updated_at
RETURNING id, (xmax = 0)::boolean AS created;

-- name: UserCreate :one
-- A new person (an invitation accepted without an account): never changes one that
-- exists, so two acceptances of one email at once make one account; no row when the
-- email has one.
INSERT INTO app_user (id, email, name, password_hash)
VALUES ($1, $2, $3, $4)
ON CONFLICT (email) DO NOTHING
RETURNING id;

-- name: OrgMemberUpsert :exec
INSERT INTO org_member (org_id, user_id, role) VALUES ($1, $2, $3)
ON CONFLICT (org_id, user_id) DO UPDATE SET role = excluded.role;

-- name: UserList :many
SELECT u.id, u.email, u.name, o.slug AS org_slug, om.role, (om.deactivated_at IS NOT NULL)::bool AS deactivated
FROM app_user u
JOIN org_member om ON om.user_id = u.id
JOIN organisation o ON o.id = om.org_id
ORDER BY u.email, o.slug;

-- name: AgentUpsert :one
INSERT INTO agent (id, org_id, slug, name, model, kind)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (org_id, slug) DO UPDATE SET name = excluded.name, model = excluded.model,
  kind = excluded.kind, updated_at = excluded.updated_at
RETURNING id, (xmax = 0)::boolean AS created;

-- name: AgentGetBySlug :one
SELECT a.id, a.org_id, a.slug, a.name, a.model, a.kind
FROM agent a JOIN organisation o ON o.id = a.org_id
WHERE o.slug = sqlc.arg(org_slug) AND a.slug = sqlc.arg(agent_slug);

-- name: AgentList :many
-- The key counts are a grouped subquery, not a correlated one: Citus refuses a correlated
-- subquery over a sharded table (agent_key) from reference tables (docs/scale.md).
SELECT a.id, o.slug AS org_slug, a.slug, a.name, a.model, a.kind,
  coalesce(k.n, 0)::bigint AS active_keys
FROM agent a JOIN organisation o ON o.id = a.org_id
LEFT JOIN (SELECT ak.org_id, ak.agent_id, count(*) AS n FROM agent_key ak
           WHERE ak.revoked_at IS NULL GROUP BY ak.org_id, ak.agent_id) k
  ON k.org_id = a.org_id AND k.agent_id = a.id
ORDER BY o.slug, a.slug;

-- name: AgentKeyCountActive :one
SELECT count(*) FROM agent_key WHERE org_id = $1 AND agent_id = $2 AND revoked_at IS NULL;

-- name: AgentKeyInsert :exec
INSERT INTO agent_key (org_id, id, agent_id, key_id, secret_hash) VALUES ($1, $2, $3, $4, $5);

-- name: AgentKeyRevoke :execrows
UPDATE agent_key SET revoked_at = now() WHERE org_id = $1 AND agent_id = $2 AND revoked_at IS NULL;

-- name: ProjectUpsert :one
INSERT INTO project (id, host_org_id, slug, name) VALUES ($1, $2, $3, $4)
ON CONFLICT (host_org_id, slug) DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at
RETURNING id, (xmax = 0)::boolean AS created;

-- name: ProjectGetBySlug :one
SELECT p.id, p.host_org_id, p.slug, p.name, o.slug AS host_slug
FROM project p JOIN organisation o ON o.id = p.host_org_id
WHERE o.slug = sqlc.arg(host_slug) AND p.slug = sqlc.arg(project_slug);

-- name: ProjectList :many
-- A grouped subquery, not a correlated one, as in AgentList.
SELECT p.id, p.slug, p.name, o.slug AS host_slug, coalesce(m.n, 0)::bigint AS members
FROM project p JOIN organisation o ON o.id = p.host_org_id
LEFT JOIN (SELECT mm.project_id, count(*) AS n FROM membership mm GROUP BY mm.project_id) m
  ON m.project_id = p.id
ORDER BY o.slug, p.slug;

-- name: ConnectCodeCountActive :one
SELECT count(*) FROM connect_code WHERE project_id = $1 AND revoked_at IS NULL;

-- name: ConnectCodeInsert :exec
INSERT INTO connect_code (project_id, id, code_id, secret_hash) VALUES ($1, $2, $3, $4);

-- name: ConnectCodeRevoke :execrows
UPDATE connect_code SET revoked_at = now() WHERE project_id = $1 AND revoked_at IS NULL;

-- name: MembershipUpsert :one
INSERT INTO membership (project_id, id, agent_id, org_id, part, is_main, nickname, access, capabilities)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (project_id, agent_id) DO UPDATE SET part = excluded.part, is_main = excluded.is_main,
  nickname = excluded.nickname, access = excluded.access, capabilities = excluded.capabilities,
  updated_at = excluded.updated_at
RETURNING id;

-- name: MembershipMoveAside :exec
-- A file may give members each other's parts (a swap): its upserts, one at a time,
-- collided on the unique part before the last. A member whose part changes is first moved
-- to a part named after its own row, which no file declares, and then given its new part.
UPDATE membership SET part = 'moving-' || replace(id::text, '-', '')
WHERE project_id = sqlc.arg(project_id) AND agent_id = sqlc.arg(agent_id) AND part <> sqlc.arg(part);

-- name: MembershipClearMainExcept :exec
-- Makes room for a new main agent: the partial unique index allows one per project.
UPDATE membership SET is_main = false, updated_at = now()
WHERE project_id = $1 AND is_main AND agent_id <> $2;

-- name: MembershipLockProject :exec
-- The operator's update of a member reads what it keeps after this: a change the
-- dashboard commits meanwhile is read, or waits for the update's commit.
SELECT 1 FROM membership WHERE project_id = $1 FOR UPDATE;

-- name: MembershipList :many
SELECT m.part, m.is_main, m.nickname, m.access, m.capabilities, m.last_seen_at,
  a.slug AS agent_slug, o.slug AS org_slug
FROM membership m
JOIN agent a ON a.id = m.agent_id
JOIN organisation o ON o.id = m.org_id
WHERE m.project_id = $1
ORDER BY m.part;

-- name: AgreementUpsert :exec
INSERT INTO agreement (project_id, guest_org_id, status, grants) VALUES ($1, $2, $3, $4)
ON CONFLICT (project_id, guest_org_id) DO UPDATE SET status = excluded.status,
  grants = excluded.grants, updated_at = excluded.updated_at;

-- name: AgreementLock :exec
-- Makes changes of one agreement take turns from reading its status to commit, so that a
-- guest's acceptance and the host's revocation at once cannot both pass their checks and
-- leave the revoked agreement active. A transaction-scoped advisory lock (class 7279) on
-- the project and guest: held before the agreement exists too, as a re-invitation needs.
SELECT pg_advisory_xact_lock(7279, hashtext(sqlc.arg(project_id)::uuid::text || '/' || sqlc.arg(guest_org_id)::uuid::text));

-- name: AgreementChangeStatus :execrows
-- A change of an agreement's status from the one its maker read: no row when another
-- change committed meanwhile (an acceptance never turns a revocation into active).
UPDATE agreement SET status = sqlc.arg(status), updated_at = now()
WHERE project_id = sqlc.arg(project_id) AND guest_org_id = sqlc.arg(guest_org_id) AND status = sqlc.arg(was);

-- name: AgreementSetStatus :execrows
UPDATE agreement SET status = $3, updated_at = now() WHERE project_id = $1 AND guest_org_id = $2;

-- name: AgreementList :many
SELECT o.slug AS guest_slug, a.status, a.grants, a.updated_at
FROM agreement a JOIN organisation o ON o.id = a.guest_org_id
WHERE a.project_id = $1
ORDER BY o.slug;

-- name: AgreementListAllKeys :many
SELECT ho.slug AS host_slug, p.slug AS project_slug, g.slug AS guest_slug
FROM agreement a
JOIN project p ON p.id = a.project_id
JOIN organisation ho ON ho.id = p.host_org_id
JOIN organisation g ON g.id = a.guest_org_id;

-- name: MembershipForgetPresence :exec
-- Marks a project's parts as never seen (make run's demo, after speaking as its agents).
UPDATE membership SET last_seen_at = NULL
WHERE project_id = sqlc.arg(project_id) AND last_seen_at IS NOT NULL;

-- The revoke commands tell an id that names nothing (a failure) from one revoked already
-- (nothing to do): a mistyped id in a revoke script looked like success.

-- name: DeskTokenExists :one
SELECT EXISTS (SELECT 1 FROM desk_token WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id));

-- name: OAuthGrantExists :one
SELECT EXISTS (SELECT 1 FROM oauth_grant WHERE id = sqlc.arg(id));

-- name: OAuthClientExists :one
SELECT EXISTS (SELECT 1 FROM oauth_client WHERE client_id = sqlc.arg(client_id)::text);

-- name: WakeGetOwner :one
-- Operator: a wake's status, its project and its host, whose history records a retry.
SELECT w.status, w.project_id, p.host_org_id FROM wake w JOIN project p ON p.id = w.project_id
WHERE w.id = sqlc.arg(id);

-- name: OAuthGrantRevokeByClient :many
-- Operator: a revoked client's consents end with it, so that `oauth grants list` does not
-- show them live (their tokens already fail: validation checks the client).
UPDATE oauth_grant SET revoked_at = now() WHERE client_id = sqlc.arg(client_id)::text AND revoked_at IS NULL
RETURNING org_id, id;

-- name: OAuthTokenRevokeByGrantIDs :exec
-- Operator: the tokens of the grants OAuthGrantRevokeByClient ended (their organisations
-- name the shards on Citus).
UPDATE oauth_token SET revoked_at = now()
WHERE org_id = ANY (sqlc.arg(org_ids)::uuid[]) AND grant_id = ANY (sqlc.arg(grant_ids)::uuid[]) AND revoked_at IS NULL;
