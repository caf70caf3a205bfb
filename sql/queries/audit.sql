-- The audit trail (migration 000029, internal/audit).

-- name: AuditEventInsert :exec
-- The actor's organisation's name is read before (OrganisationGetName): a Citus
-- coordinator refuses a subquery inside an INSERT's VALUES, and reading the reference
-- table in an INSERT … SELECT pulls the row to the coordinator and copies it into the
-- shard, which row-level security refuses.
INSERT INTO audit_event (org_id, id, actor_org_id, actor_org_name, actor_user_id, actor_name, party_org_id, project_id,
  object_kind, object_id, action, detail)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(actor_org_id), sqlc.arg(actor_org_name),
  sqlc.narg(actor_user_id), sqlc.arg(actor_name),
  sqlc.narg(party_org_id), sqlc.narg(project_id), sqlc.arg(object_kind), sqlc.arg(object_id), sqlc.arg(action),
  sqlc.arg(detail));

-- name: AuditEventListByObject :many
-- One object's history, newest first; RLS leaves a reader the rows it may see.
SELECT e.id, e.at, e.actor_name, e.actor_org_name, e.action, e.detail
FROM audit_event e
WHERE e.org_id = sqlc.arg(org_id) AND e.object_kind = sqlc.arg(object_kind) AND e.object_id = sqlc.arg(object_id)
ORDER BY e.at DESC, e.id DESC
LIMIT sqlc.arg(max_rows);

-- name: AuditEventListByProject :many
-- The history of one kind of object in a room (a tab's, e.g. the Memory tab's), newest
-- first; RLS leaves a reader the rows it may see.
SELECT e.id, e.at, e.actor_name, e.actor_org_name, e.object_id, e.action, e.detail
FROM audit_event e
WHERE e.org_id = sqlc.arg(org_id) AND e.object_kind = sqlc.arg(object_kind) AND e.project_id = sqlc.arg(project_id)
ORDER BY e.at DESC, e.id DESC
LIMIT sqlc.arg(max_rows);
