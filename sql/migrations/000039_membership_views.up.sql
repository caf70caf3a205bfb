-- membership_presence_due: the memberships whose presence (last_seen_at) a call moves. A
-- part's presence follows its authenticated calls only where it is admitted (a host's part,
-- or a guest's under an active agreement: tenancy.Scope.Admitted), and at most once a
-- second (a part calling many times a second writes its row once, instead of every call
-- queueing behind the last one's row lock). The queries that move presence join it to the
-- membership they update (Citus refuses an UPDATE of a view of its tables) and say which
-- memberships they mean, so the rule is written once.
-- security_invoker: the caller's row-level security applies to membership, project and
-- agreement exactly as when a query names them itself.
-- The two binds Citus routes (ScopeBindPart, ScopeBindAgentRoom, sql/queries/membership.sql)
-- keep the rule inline: Citus routes their subqueries to the project's shard group only
-- when each names the project's id itself, which a view's subqueries cannot.
CREATE VIEW membership_presence_due WITH (security_invoker = true) AS
SELECT mm.project_id, mm.id
FROM membership mm
JOIN project p ON p.id = mm.project_id
WHERE (mm.org_id = p.host_org_id OR EXISTS (SELECT 1 FROM agreement ag
    WHERE ag.project_id = mm.project_id AND ag.guest_org_id = mm.org_id AND ag.status = 'active'))
  AND (mm.last_seen_at IS NULL OR mm.last_seen_at < now() - interval '1 second');

GRANT SELECT ON membership_presence_due TO relayroom_app;

-- membership_scope: a membership with everything a tenancy.Scope holds of it (its agent,
-- organisation, project, host and the organisation's agreement there), which the three
-- binds (ScopeBindPart, ScopeBindAgentRoom, ScopeBindOwnPart) read for the membership they
-- name. A query's filter on the membership's project reaches membership through the view
-- (PostgreSQL pulls it up into the query), so Citus routes it as before.
CREATE VIEW membership_scope WITH (security_invoker = true) AS
SELECT m.id, m.project_id, m.agent_id, m.org_id, m.part, m.is_main, m.nickname, m.access, m.capabilities,
  m.parked_until, a.slug AS agent_slug, a.name AS agent_name, a.model AS agent_model,
  a.kind AS agent_kind, o.name AS org_name, p.name AS project_name, p.host_org_id,
  ho.name AS host_name, ag.status AS agreement_status, ag.grants AS agreement_grants
FROM membership m
JOIN agent a ON a.id = m.agent_id
JOIN organisation o ON o.id = m.org_id
JOIN project p ON p.id = m.project_id
JOIN organisation ho ON ho.id = p.host_org_id
LEFT JOIN agreement ag ON ag.project_id = m.project_id AND ag.guest_org_id = m.org_id;

GRANT SELECT ON membership_scope TO relayroom_app;
