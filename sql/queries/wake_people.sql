-- A dead wake for people (the dashboard's wake page, docs/dashboard.md): the person's
-- Scope's project; the host's people see every wake of the room, a guest company's only
-- its own parts' (viewer_is_host false, viewer_org_id their organisation), the rule of
-- Needs you.

-- name: WakeGetForPeople :one
-- One wake of the room with its part's agent and company and the threads that asked for
-- it; no row for a wake the viewer's company may not see.
SELECT w.id, w.part, w.status, w.urgent, w.sources, w.count, w.attempts, w.last_error, w.created_at, w.updated_at,
  w.agent_id, m.org_id AS agent_org_id, coalesce(a.name, '')::text AS agent_name, coalesce(o.name, '')::text AS org_name,
  array(SELECT k FROM jsonb_object_keys(w.thread_counts) k ORDER BY k)::text[] AS thread_ids
FROM wake w
JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
LEFT JOIN agent a ON a.id = w.agent_id
LEFT JOIN organisation o ON o.id = m.org_id
WHERE w.project_id = sqlc.arg(project_id) AND w.id = sqlc.arg(id)
  AND (sqlc.arg(viewer_is_host)::boolean OR m.org_id = sqlc.arg(viewer_org_id));

-- name: WakeRetryDeadForPeople :execrows
-- A person sends a dead letter of the room again (as WakeRetryDead), when their company
-- may see it; refused while the part has another pending wake. The subqueries name the
-- project by value: correlated through wake.project_id, a guest's retry (viewer_is_host
-- false) read every membership shard on Citus.
UPDATE wake SET status = 'pending', attempts = 0, last_error = NULL, updated_at = now()
WHERE wake.project_id = sqlc.arg(project_id) AND wake.id = sqlc.arg(id) AND wake.status = 'dead' AND wake.count > 0
  AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
    SELECT 1 FROM membership m WHERE m.project_id = sqlc.arg(project_id) AND m.id = wake.member_id
      AND m.org_id = sqlc.arg(viewer_org_id)))
  AND NOT EXISTS (SELECT 1 FROM wake o WHERE o.project_id = sqlc.arg(project_id)
                  AND o.member_id = wake.member_id AND o.status = 'pending');
