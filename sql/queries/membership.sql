-- name: TouchMemberByPart :one
-- Resolves the caller's part and moves its last_seen in the same statement: presence must
-- move on every authenticated call, and this costs no extra round trip.
UPDATE membership m
SET last_seen_at = now()
FROM agent a, organisation o
WHERE m.project_id = sqlc.arg(project_id) AND m.part = sqlc.arg(part)
  AND a.id = m.agent_id AND o.id = m.org_id
RETURNING m.id, m.agent_id, m.org_id, m.part, m.is_main, m.nickname, m.access, m.capabilities,
  m.parked_until, a.slug AS agent_slug, a.name AS agent_name, a.model AS agent_model,
  o.name AS org_name;

-- name: TouchMemberByAgent :one
UPDATE membership m
SET last_seen_at = now()
FROM agent a, organisation o
WHERE m.project_id = sqlc.arg(project_id) AND m.agent_id = sqlc.arg(agent_id)
  AND a.id = m.agent_id AND o.id = m.org_id
RETURNING m.id, m.agent_id, m.org_id, m.part, m.is_main, m.nickname, m.access, m.capabilities,
  m.parked_until, a.slug AS agent_slug, a.name AS agent_name, a.model AS agent_model,
  o.name AS org_name;

-- name: TouchAgentMemberships :exec
UPDATE membership SET last_seen_at = now() WHERE agent_id = $1;

-- name: ProjectRoomInfo :one
-- The room's host and, for a guest organisation, its agreement with the host.
SELECT p.id, p.name, p.slug, p.host_org_id, ho.name AS host_name,
  a.status AS agreement_status, a.grants AS agreement_grants
FROM project p
JOIN organisation ho ON ho.id = p.host_org_id
LEFT JOIN agreement a ON a.project_id = p.id AND a.guest_org_id = sqlc.arg(org_id)
WHERE p.id = sqlc.arg(project_id);

-- name: ListParts :many
SELECT m.part, m.is_main, m.nickname, m.last_seen_at, m.parked_until, m.agent_id
FROM membership m
WHERE m.project_id = $1
ORDER BY m.is_main DESC, m.part;

-- name: AgentRooms :many
-- Every room an agent is a member of, with its host and the agent's organisation's
-- agreement there; the caller filters guests without an active agreement.
SELECT p.id, p.name, p.host_org_id, ho.name AS host_name, m.org_id,
  a.status AS agreement_status
FROM membership m
JOIN project p ON p.id = m.project_id
JOIN organisation ho ON ho.id = p.host_org_id
LEFT JOIN agreement a ON a.project_id = p.id AND a.guest_org_id = m.org_id
WHERE m.agent_id = $1
ORDER BY p.name, p.id;
