-- The OAuth 2.1 authorization server (internal/oauth, docs/auth.md). Clients and pending
-- authorization requests are read by the id named in app.lookup; grants and tokens are
-- org-scoped, found first by the code or token id named in app.lookup, then under their
-- organisation's tenant.

-- name: OAuthClientInsert :exec
INSERT INTO oauth_client (client_id, client_name, redirect_uris, source, fetched_until)
VALUES (sqlc.arg(client_id), sqlc.arg(client_name), sqlc.arg(redirect_uris)::text[], sqlc.arg(source), sqlc.narg(fetched_until))
ON CONFLICT (client_id) DO UPDATE SET client_name = EXCLUDED.client_name,
  redirect_uris = EXCLUDED.redirect_uris, fetched_until = EXCLUDED.fetched_until,
  -- the column default (now()): Citus refuses a function that is not immutable here
  last_used_at = EXCLUDED.last_used_at;

-- name: OAuthClientGetByID :one
SELECT client_id, client_name, redirect_uris, source, fetched_until, created_at, last_used_at
FROM oauth_client WHERE client_id = sqlc.arg(client_id)::text AND revoked_at IS NULL;

-- name: OAuthClientIsRevoked :one
SELECT (revoked_at IS NOT NULL)::boolean AS revoked FROM oauth_client WHERE client_id = sqlc.arg(client_id)::text;

-- name: OAuthClientTouch :exec
-- last_used_at decides expiry of idle clients; written at most once an hour.
UPDATE oauth_client SET last_used_at = now()
WHERE client_id = sqlc.arg(client_id)::text AND last_used_at < now() - interval '1 hour';

-- name: OAuthClientPrune :execrows
-- Idle clients expire (registrations are anonymous and frequent); their grants and tokens
-- go with them. A revoked client named by its metadata document's URL stays, as the mark
-- that keeps it out: its id is the URL anyone may present again, and deleted, the next
-- authorization fetched it anew as a client never revoked (a revoked client is never
-- used, so it always looked idle).
DELETE FROM oauth_client WHERE last_used_at < now() - make_interval(days => sqlc.arg(idle_days)::int)
  AND (revoked_at IS NULL OR source <> 'metadata_document');

-- name: OAuthClientRevoke :execrows
UPDATE oauth_client SET revoked_at = now() WHERE client_id = sqlc.arg(client_id)::text AND revoked_at IS NULL;

-- name: AuthRequestInsert :exec
INSERT INTO oauth_auth_request (id, client_id, redirect_uri, state, code_challenge, resource, scopes, expires_at)
VALUES (sqlc.arg(id), sqlc.arg(client_id), sqlc.arg(redirect_uri), sqlc.arg(state), sqlc.arg(code_challenge),
  sqlc.arg(resource), sqlc.arg(scopes)::text[],
  -- On the database's clock, which AuthRequestGetByID reads it with: the replica that
  -- keeps the request and the one that shows its consent may have clocks apart.
  now() + make_interval(secs => sqlc.arg(lifetime_seconds)::float8));

-- name: AuthRequestGetByID :one
SELECT r.id, r.client_id, r.redirect_uri, r.state, r.code_challenge, r.resource, r.scopes, c.client_name
FROM oauth_auth_request r JOIN oauth_client c ON c.client_id = r.client_id
WHERE r.id = sqlc.arg(id)::text AND r.expires_at > now() AND c.revoked_at IS NULL;

-- name: AuthRequestDelete :execrows
-- The request answered or ended; no row when it already was (a double-clicked Allow
-- runs twice at once, and only one may issue a code).
DELETE FROM oauth_auth_request WHERE id = sqlc.arg(id)::text;

-- name: AuthRequestPrune :execrows
DELETE FROM oauth_auth_request WHERE expires_at < now();

-- name: OAuthGrantInsert :exec
INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, agent_id, part, scopes,
  code_id, code_hash, code_challenge, redirect_uri, code_expires_at)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(client_id), sqlc.arg(user_id), sqlc.arg(resource),
  sqlc.narg(agent_id), sqlc.narg(part), sqlc.arg(scopes)::text[], sqlc.arg(code_id), sqlc.arg(code_hash),
  sqlc.arg(code_challenge), sqlc.arg(redirect_uri),
  -- The database's clock sets the code's end and tells it (OAuthGrantListByCode): the
  -- consent and the exchange may run on replicas whose clocks differ by more than the
  -- code's minute.
  now() + make_interval(secs => sqlc.arg(code_lifetime_seconds)::float8));

-- name: OAuthGrantListByCode :many
-- The grants an authorization code's public id names; the hash is compared in Go.
-- code_live is the database's clock's (OAuthGrantInsert).
SELECT org_id, id, client_id, resource, code_hash, code_challenge, redirect_uri,
  (code_expires_at > now())::boolean AS code_live, code_used_at, revoked_at
FROM oauth_grant WHERE code_id = sqlc.arg(code_id)::text;

-- name: OAuthGrantUseCode :execrows
-- Spends a code once: a second exchange finds it used (and revokes the grant).
UPDATE oauth_grant SET code_used_at = now()
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id) AND code_used_at IS NULL;

-- name: OAuthGrantRevoke :execrows
UPDATE oauth_grant SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id) AND revoked_at IS NULL;

-- name: OAuthGrantRevokeByAgent :many
-- The grants acting as an agent whose keys were all revoked: they end with its keys, and
-- a key issued later brings none of them back.
UPDATE oauth_grant SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND agent_id = sqlc.arg(agent_id) AND revoked_at IS NULL
RETURNING id;

-- name: OAuthTokenRevokeByGrants :exec
-- The tokens issued under the grants of one organisation: a grant revoked, or every grant
-- acting as an agent (OAuthGrantRevokeByAgent).
UPDATE oauth_token SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND grant_id = ANY (sqlc.arg(grant_ids)::uuid[]) AND revoked_at IS NULL;

-- name: OAuthTokenInsert :exec
INSERT INTO oauth_token (org_id, token_id, grant_id, kind, secret_hash, expires_at, parent_id)
VALUES (sqlc.arg(org_id), sqlc.arg(token_id), sqlc.arg(grant_id), sqlc.arg(kind), sqlc.arg(secret_hash), sqlc.arg(expires_at),
  sqlc.narg(parent_id));

-- name: OAuthTokenRows :many
-- The tokens a public id names (any kind, any state); hashes are compared in Go.
SELECT org_id, token_id, grant_id, kind, secret_hash, created_at, expires_at, used_at, revoked_at, parent_id
FROM oauth_token WHERE token_id = sqlc.arg(token_id)::text;

-- name: OAuthTokenMarkRefreshUsed :execrows
UPDATE oauth_token SET used_at = now()
WHERE org_id = sqlc.arg(org_id) AND token_id = sqlc.arg(token_id) AND used_at IS NULL;

-- name: OAuthTokenRefreshGraceOver :one
-- Whether a used refresh token's grace has ended, on the database's clock, the one that
-- stamped used_at: a replica's own clock may be off the database's (and another
-- replica's) by more than the one-minute grace, and then the same second use was a
-- sibling through one replica and reuse through another.
SELECT (used_at <= now() - make_interval(secs => sqlc.arg(grace_seconds)::float8))::boolean AS over
FROM oauth_token WHERE org_id = sqlc.arg(org_id) AND token_id = sqlc.arg(token_id)::text;

-- name: OAuthTokenRevoke :exec
UPDATE oauth_token SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND token_id = sqlc.arg(token_id) AND revoked_at IS NULL;

-- name: OAuthTokenEndPredecessorGrace :exec
-- When a refresh token is first used, the token it was rotated from stops being accepted
-- (the one-step grace ends). Not its siblings: two refreshers at once each keep their own
-- successor. A token issued before parents were recorded ends the grace of the used
-- tokens of its grant issued before it (unused ones are siblings).
UPDATE oauth_token SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND grant_id = sqlc.arg(grant_id) AND kind = 'refresh' AND revoked_at IS NULL
  AND (token_id = sqlc.narg(parent_id)::text
       OR (sqlc.narg(parent_id)::text IS NULL AND used_at IS NOT NULL AND created_at < sqlc.arg(before)));

-- name: OAuthTokenSuccessors :many
-- The refresh tokens rotated from one, with whether each was used.
SELECT token_id, (used_at IS NOT NULL)::boolean AS used
FROM oauth_token
WHERE org_id = sqlc.arg(org_id) AND grant_id = sqlc.arg(grant_id) AND kind = 'refresh' AND parent_id = sqlc.arg(parent_id)::text;

-- name: OAuthTokenRevokeSuccessors :exec
-- A used refresh token came back after its grace and none of its successors was used (the
-- client lost the answer): they are revoked, and the token gets a new one.
UPDATE oauth_token SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND grant_id = sqlc.arg(grant_id) AND kind = 'refresh'
  AND parent_id = sqlc.arg(parent_id)::text AND revoked_at IS NULL;

-- name: OAuthGrantGetLive :one
-- A grant as its tokens act, under its organisation's tenant, only while everything it
-- rests on holds: not revoked, its client not revoked, its person still an active
-- (not deactivated) member of the organisation, and (when it acts as an agent) the agent
-- still holding an active key.
-- Every table names the organisation by value, so Citus routes it to one shard group.
SELECT g.id, g.user_id, g.client_id, g.resource, g.agent_id, g.part, g.scopes
FROM oauth_grant g
JOIN oauth_client c ON c.client_id = g.client_id AND c.revoked_at IS NULL
JOIN org_member om ON om.org_id = sqlc.arg(org_id) AND om.user_id = g.user_id AND om.deactivated_at IS NULL
WHERE g.org_id = sqlc.arg(org_id) AND g.id = sqlc.arg(id) AND g.revoked_at IS NULL
  AND (g.agent_id IS NULL OR EXISTS (SELECT 1 FROM agent_key k
       WHERE k.org_id = sqlc.arg(org_id) AND k.agent_id = g.agent_id AND k.revoked_at IS NULL));

-- name: OAuthGrantList :many
SELECT g.org_id, g.id, g.client_id, c.client_name, u.email, g.resource, g.agent_id, g.part, g.scopes, g.created_at, g.revoked_at
FROM oauth_grant g JOIN oauth_client c ON c.client_id = g.client_id JOIN app_user u ON u.id = g.user_id
ORDER BY g.created_at DESC;

-- name: OAuthTokenPrune :execrows
DELETE FROM oauth_token WHERE expires_at < now() - interval '1 day';

-- Consent: what a person may choose (under the tenant of one of their organisations, with
-- the project of the resource when there is one).

-- name: OrganisationGetName :one
SELECT name FROM organisation WHERE id = sqlc.arg(id);

-- name: AgentListByOrg :many
-- The agents a person may let a client act as: those holding an active key, as
-- OAuthGrantGetLive requires (one without would be allowed, then its code refused).
SELECT a.id, a.slug, a.name FROM agent a
WHERE a.org_id = sqlc.arg(org_id)
  AND EXISTS (SELECT 1 FROM agent_key k WHERE k.org_id = sqlc.arg(org_id) AND k.agent_id = a.id AND k.revoked_at IS NULL)
ORDER BY a.name, a.slug;

-- name: RoomListChoices :many
-- The organisation's agents that are members of a project, with their parts. Those
-- without an active key are left out in Go, from AgentListByOrg: Citus cannot push the
-- key table's subquery down beside the project's membership.
SELECT a.id, a.slug, a.name, m.part
FROM membership m JOIN agent a ON a.id = m.agent_id
WHERE m.project_id = sqlc.arg(project_id) AND m.org_id = sqlc.arg(org_id)
ORDER BY m.part;

-- name: ProjectGetTitle :one
SELECT p.name, o.name AS host_name FROM project p JOIN organisation o ON o.id = p.host_org_id
WHERE p.id = sqlc.arg(id);

-- name: ConnectCodeRows :many
-- The projects a connect code's public id names (the threads resource); hashes compared in Go.
SELECT project_id, secret_hash FROM connect_code
WHERE code_id = sqlc.arg(code_id)::text AND revoked_at IS NULL;

-- Operator commands (relayroom admin oauth …), on the owner's pool.

-- name: OAuthClientList :many
SELECT client_id, client_name, source, redirect_uris, created_at, last_used_at, revoked_at
FROM oauth_client ORDER BY last_used_at DESC, client_id;

-- name: OAuthGrantRevokeByID :many
-- Operator: one grant by id; its organisation and client name the audit event.
UPDATE oauth_grant SET revoked_at = now() WHERE id = sqlc.arg(id) AND revoked_at IS NULL
RETURNING org_id, client_id;

-- name: OAuthTokenRevokeByGrantID :exec
UPDATE oauth_token SET revoked_at = now() WHERE grant_id = sqlc.arg(grant_id) AND revoked_at IS NULL;
