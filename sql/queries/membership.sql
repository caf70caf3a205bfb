-- name: ScopeBindPart :one
-- Resolves the caller's part with everything its Scope needs, and moves its last_seen in
-- the same statement: presence follows every authenticated call at no extra round trip.
-- The agreement is read here too (the Scope decides admission from it, no second
-- statement); a guest without an active agreement is not an authenticated caller of the
-- project, so its presence does not move.
-- last_seen is kept to the second: a part calling many times a second writes its row
-- once, instead of every call queueing behind the last one's row lock.
-- The agreement's project is pinned to the argument, not only joined: Citus routes the
-- subquery to the project's shard group only then (docs/scale.md). That is why the rule
-- is written out here and in ScopeBindAgentRoom instead of read from
-- membership_presence_due, which the other presence queries join.
-- It runs after rr_set_directory (pg.Tenant.Visible nil): the host's and the other members'
-- directory rows are visible through the app.orgs/app.agents settings it set, which the
-- statement returns (visible_*) for the request's later transactions (pg.Tenant.Visible).
WITH touch AS (
  UPDATE membership mm SET last_seen_at = now()
  FROM project p
  WHERE mm.project_id = sqlc.arg(project_id) AND mm.part = sqlc.arg(part) AND p.id = mm.project_id
    -- only the caller's own part: the transaction commits with this statement
    -- (pg.Tx.CommitWithNext), whatever the resolver concludes from the row
    AND mm.agent_id = rr_agent()
    AND (mm.org_id = p.host_org_id OR EXISTS (SELECT 1 FROM agreement ag
      WHERE ag.project_id = sqlc.arg(project_id) AND ag.project_id = mm.project_id
        AND ag.guest_org_id = mm.org_id AND ag.status = 'active'))
    AND (mm.last_seen_at IS NULL OR mm.last_seen_at < now() - interval '1 second')
  RETURNING mm.id
)
SELECT m.*,
  rr_orgs()::uuid[] AS visible_orgs, rr_projects()::uuid[] AS visible_projects,
  rr_agents()::uuid[] AS visible_agents, rr_users()::uuid[] AS visible_users
FROM membership_scope m
WHERE m.project_id = sqlc.arg(project_id) AND m.part = sqlc.arg(part);

-- name: ScopeBindAgentRoom :one
-- The same for an agent entering one room (after rr_set_directory too). The agent is the
-- tenant's (rr_agent()), so the statement also serves right after CredentialAssumeTenant,
-- in the same round trip: only verified credentials set it.
WITH touch AS (
  UPDATE membership mm SET last_seen_at = now()
  FROM project p
  WHERE mm.project_id = sqlc.arg(project_id) AND mm.agent_id = rr_agent() AND p.id = mm.project_id
    AND (mm.org_id = p.host_org_id OR EXISTS (SELECT 1 FROM agreement ag
      WHERE ag.project_id = sqlc.arg(project_id) AND ag.project_id = mm.project_id
        AND ag.guest_org_id = mm.org_id AND ag.status = 'active'))
    AND (mm.last_seen_at IS NULL OR mm.last_seen_at < now() - interval '1 second')
  RETURNING mm.id
)
SELECT m.*,
  rr_orgs()::uuid[] AS visible_orgs, rr_projects()::uuid[] AS visible_projects,
  rr_agents()::uuid[] AS visible_agents, rr_users()::uuid[] AS visible_users
FROM membership_scope m
WHERE m.project_id = sqlc.arg(project_id) AND m.agent_id = rr_agent() AND m.org_id = rr_org();

-- name: ScopeConfirmMember :exec
-- The check of a caller resolved a moment ago (tenancy's scope cache), after
-- CredentialAssumeCachedTenant in the same round trip: one row when the credentials
-- verified (the tenant is set) and the membership and the agreement, which decide what the
-- caller may do, are still exactly the cached ones; last_seen moves as in the binds. Any
-- difference (a removed or parked membership, a changed access, capability, part or name,
-- an agreement suspended or regranted, credentials that did not verify) raises
-- rr_unverified's error (000048), so that nothing sent after it in the same round trip
-- runs, a pipelined COMMIT included; the resolver then resolves in full. The transaction
-- reads its result (pg.Tx.Verifying).
-- One row to start from, the membership and its agreement LEFT JOINed to it (a primary
-- key and a unique key: at most one of each), so that a missing or changed membership
-- still yields the row whose condition raises. Presence moves through
-- rr_touch_presence (000047), called only when last_seen_at is a second old or more:
-- a data-modifying CTE ran its UPDATE's setup on every call.
SELECT 1 FROM (SELECT) one
LEFT JOIN membership m ON m.project_id = rr_project() AND m.id = sqlc.arg(member_id)
  AND m.agent_id = rr_agent() AND m.org_id = rr_org() AND m.part = sqlc.arg(part)::text
  AND m.is_main = sqlc.arg(is_main)::boolean AND m.nickname IS NOT DISTINCT FROM sqlc.narg(nickname)::text
  AND m.access = sqlc.arg(access)::text AND m.capabilities = sqlc.arg(capabilities)::text[]
  AND m.parked_until IS NOT DISTINCT FROM sqlc.narg(parked_until)::timestamptz
LEFT JOIN agreement ag ON ag.project_id = m.project_id AND ag.guest_org_id = m.org_id
-- CASE evaluates its ELSE only when there is no match: it raises then. OR evaluates
-- rr_touch_presence only when the first operand is not true (NULL: never seen).
WHERE CASE WHEN m.id IS NOT NULL AND coalesce(ag.status, '') = sqlc.arg(agreement_status)::text
    AND coalesce(ag.grants, '{}') = sqlc.arg(grants)::text[]
  THEN m.last_seen_at >= now() - interval '1 second' OR rr_touch_presence(m.id)
  ELSE rr_unverified() END;

-- name: ScopeBindOwnPart :one
-- ScopeBindPart after CredentialAssumeTenant, in the same round trip: the project and the
-- agent are the tenant's (rr_project(), rr_agent()), which only verified credentials set,
-- and the part must be the key's agent's own in the key's organisation (no row otherwise:
-- the resolver then finds out why the slow way). Plain PostgreSQL only (Citus routes a
-- statement by a literal project id, which this one does not have: ScopeBindPart is used there).
WITH touch AS (
  UPDATE membership mm SET last_seen_at = now()
  FROM membership_presence_due d
  WHERE mm.project_id = rr_project() AND mm.part = sqlc.arg(part)
    -- only the caller's own part: the transaction commits with this statement
    -- (pg.Tx.CommitWithNext), whatever the resolver concludes from the row
    AND mm.agent_id = rr_agent()
    AND d.project_id = mm.project_id AND d.id = mm.id
  RETURNING mm.id
)
SELECT m.*,
  rr_orgs()::uuid[] AS visible_orgs, rr_projects()::uuid[] AS visible_projects,
  rr_agents()::uuid[] AS visible_agents, rr_users()::uuid[] AS visible_users
FROM membership_scope m
WHERE m.project_id = rr_project() AND m.part = sqlc.arg(part) AND m.agent_id = rr_agent() AND m.org_id = rr_org();

-- name: MembershipTouchByAgent :exec
-- Presence in every room of an agent, except those where it is a guest without an active
-- agreement (membership_presence_due).
UPDATE membership mm SET last_seen_at = now()
FROM membership_presence_due d
WHERE mm.agent_id = $1 AND d.project_id = mm.project_id AND d.id = mm.id;

-- name: MembershipListParts :many
SELECT m.part, m.is_main, m.nickname, m.last_seen_at, m.parked_until, m.agent_id
FROM membership m
WHERE m.project_id = $1
ORDER BY m.is_main DESC, m.part;

-- name: AgentListRooms :many
-- Every room an agent is a member of, with its host and the agent's organisation's
-- agreement there; the caller filters guests without an active agreement.
SELECT p.id, p.name, p.host_org_id, ho.name AS host_name, m.org_id,
  a.status AS agreement_status
FROM membership m
JOIN project p ON p.id = m.project_id
JOIN organisation ho ON ho.id = p.host_org_id
-- joined on membership's project_id (the distribution column), not project's: on Citus a
-- join between two sharded tables must be on it
LEFT JOIN agreement a ON a.project_id = m.project_id AND a.guest_org_id = m.org_id
WHERE m.agent_id = $1
ORDER BY p.name, p.id;
