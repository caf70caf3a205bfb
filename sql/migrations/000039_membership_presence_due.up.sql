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
