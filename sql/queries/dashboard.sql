-- The people's dashboard (internal/dashboard, docs/dashboard.md). A person acts for one
-- organisation they belong to; a room's rows become visible only once ScopeBindPersonRoom has
-- found the organisation to be the room's host or a guest under an agreement.

-- name: ScopeBindPersonRoom :one
-- A signed-in person entering a room, for one of their organisations: the tenant names
-- the session (app.lookup: the person and their memberships), the organisation and the
-- candidate project; no row comes back unless the organisation hosts the project or has
-- an agreement with its host (in any state: Scope.Admitted decides on it). On Citus the
-- membership (by organisation) and the agreement (by project) are in two shard groups:
-- the agreement is a CTE pinned to both ids, and the session (a table of the coordinator)
-- a scalar subquery, so Citus plans each part on its own, one shard each. A deactivated
-- member enters no room.
WITH ag AS MATERIALIZED (
  SELECT a.status, a.grants FROM agreement a
  WHERE a.project_id = sqlc.arg(project_id) AND a.guest_org_id = sqlc.arg(org_id)
)
SELECT u.name AS user_name, om.role, o.name AS org_name, o.plan, o.timezone, p.name AS project_name,
  p.host_org_id, ho.name AS host_name, ag.status AS agreement_status, ag.grants AS agreement_grants
FROM org_member om
JOIN app_user u ON u.id = om.user_id
JOIN organisation o ON o.id = om.org_id
JOIN project p ON p.id = sqlc.arg(project_id)
JOIN organisation ho ON ho.id = p.host_org_id
LEFT JOIN ag ON true
WHERE om.org_id = sqlc.arg(org_id) AND om.deactivated_at IS NULL
  AND om.user_id = (SELECT s.user_id FROM web_session s
                    WHERE s.session_id = sqlc.arg(session_id)::text AND s.expires_at > now())
  AND (p.host_org_id = om.org_id OR ag.status IS NOT NULL);

-- name: PersonListRooms :many
-- The rooms of an organisation: those it hosts and those it has an agreement for.
-- The agreements are read first (MATERIALIZED): a Citus 13.2 coordinator crashed
-- (signal 11) running a reference table (project) left-joined to a sharded one
-- (agreement); read apart, they are one scan of every shard, then a join of the
-- reference tables with their result.
WITH ag AS MATERIALIZED (
  SELECT a.project_id, a.status FROM agreement a WHERE a.guest_org_id = sqlc.arg(org_id)
)
SELECT p.id, p.name, p.host_org_id, ho.name AS host_name, ag.status AS agreement_status
FROM project p
JOIN organisation ho ON ho.id = p.host_org_id
LEFT JOIN ag ON ag.project_id = p.id
WHERE p.host_org_id = sqlc.arg(org_id) OR ag.project_id IS NOT NULL
ORDER BY p.name, p.id;

-- name: RoomMessageInsertFromPerson :exec
-- A person's post: their name is kept with it (every company of the room reads it).
INSERT INTO room_message (project_id, id, kind, author_user_id, author_name, author_org_id, content, created_at)
VALUES (sqlc.arg(project_id), sqlc.arg(id), 'message', sqlc.arg(author_user_id), sqlc.arg(author_name),
  sqlc.arg(author_org_id), sqlc.arg(content), sqlc.arg(created_at));

-- name: MemoryEntryListForPeople :many
-- The Memory tab without a query: the newest entries, deprecated ones included (marked),
-- never another organisation's private ones, filtered by company, category and tag.
SELECT e.id, e.org_id, o.name AS org_name, a.name AS agent_name, e.model, e.content, e.tags, e.category,
  e.is_decision, e.is_private, e.deprecated_at, e.deprecated_by_name, e.created_at
FROM memory_entry e
LEFT JOIN organisation o ON o.id = e.org_id
LEFT JOIN agent a ON a.id = e.agent_id
WHERE e.project_id = sqlc.arg(project_id) AND (NOT e.is_private OR e.org_id = sqlc.arg(viewer_org_id))
  AND (sqlc.narg(org_id)::uuid IS NULL OR e.org_id = sqlc.narg(org_id))
  AND (sqlc.narg(category)::text IS NULL OR e.category = sqlc.narg(category))
  AND (sqlc.narg(tag)::text IS NULL OR sqlc.narg(tag)::text = ANY (e.tags))
ORDER BY e.created_at DESC, e.id DESC
LIMIT sqlc.arg(lim);

-- name: MemoryEntryDeprecate :one
-- Marks an entry deprecated (never deleted): when and by whom. Another organisation's
-- private entry answers like one that does not exist; only the host's people and the
-- writing company's may deprecate.
UPDATE memory_entry e SET deprecated_at = now(), deprecated_by_user_id = sqlc.arg(user_id),
  deprecated_by_name = sqlc.arg(user_name)
WHERE e.project_id = sqlc.arg(project_id) AND e.id = sqlc.arg(id) AND e.deprecated_at IS NULL
  AND (NOT e.is_private OR e.org_id = sqlc.arg(viewer_org_id))
  AND (e.org_id = sqlc.arg(viewer_org_id) OR sqlc.arg(viewer_is_host)::boolean)
RETURNING e.deprecated_at;

-- name: RoomListNeedsYou :many
-- What in one room waits for the person's organisation, newest first, at most lim of each
-- kind, in one statement: open threads flagged needsHuman (for a guest, those its parts
-- take part in), done results its agents sent that nobody accepted or rejected yet, and
-- for the host's reviewers the knowledge candidates; for the host, agreements its guests
-- have not accepted; dead wakes (for a guest, its own agents'). id is the guest
-- organisation's for an agreement. On Citus every subquery names the project by value
-- (a router query, docs/scale.md), and the guest's name is a scalar subquery, not a LEFT
-- JOIN: a PG15/16 coordinator refuses an outer join beside a qual that names no column
-- ("outer joins and pseudoconstant quals"), which viewer_is_host false is once bound.
SELECT n.kind::text AS kind, n.id::uuid AS id, n.title::text AS title, n.at::timestamptz AS at FROM (
  (SELECT 'thread' AS kind, t.id, t.subject AS title, t.last_message_at AS at FROM thread t
   WHERE t.project_id = sqlc.arg(project_id) AND t.status = 'open' AND t.needs_human
     AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
       SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
       WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
         AND m.org_id = sqlc.arg(viewer_org_id)))
   ORDER BY t.last_message_at DESC LIMIT sqlc.arg(lim))
  UNION ALL
  (SELECT 'task', k.id, k.goal, k.updated_at FROM room_task k
   WHERE k.project_id = sqlc.arg(project_id) AND k.status = 'done' AND k.review IS NULL
     AND k.from_org_id = sqlc.arg(viewer_org_id)
   ORDER BY k.updated_at DESC LIMIT sqlc.arg(lim))
  UNION ALL
  (SELECT 'knowledge', q.id, q.title, q.created_at FROM knowledge q
   WHERE q.project_id = sqlc.arg(project_id) AND q.status = 'candidate' AND sqlc.arg(viewer_reviews)::boolean
   ORDER BY q.created_at DESC LIMIT sqlc.arg(lim))
  UNION ALL
  (SELECT 'agreement', g.guest_org_id,
     coalesce((SELECT o.name FROM organisation o WHERE o.id = g.guest_org_id), ''), g.updated_at
   FROM agreement g
   WHERE g.project_id = sqlc.arg(project_id) AND g.status = 'pending' AND sqlc.arg(viewer_is_host)::boolean
   ORDER BY g.updated_at DESC LIMIT sqlc.arg(lim))
  UNION ALL
  (SELECT 'wake', w.id, w.part, w.created_at FROM wake w
   WHERE w.project_id = sqlc.arg(project_id) AND w.status = 'dead'
     AND (sqlc.arg(viewer_is_host)::boolean OR w.agent_id IN (
       SELECT m.agent_id FROM membership m WHERE m.project_id = sqlc.arg(project_id) AND m.org_id = sqlc.arg(viewer_org_id)))
   ORDER BY w.created_at DESC LIMIT sqlc.arg(lim))
) n
ORDER BY n.at DESC, n.id;

-- name: RoomMessageInsertPersonCard :exec
-- A card a person's action leaves in the conversation (a task reviewed or canceled).
INSERT INTO room_message (project_id, id, kind, author_user_id, author_name, author_org_id, content, ref_id, created_at)
VALUES (sqlc.arg(project_id), sqlc.arg(id), sqlc.arg(kind), sqlc.arg(author_user_id), sqlc.arg(author_name),
  sqlc.arg(author_org_id), sqlc.arg(content), sqlc.arg(ref_id), sqlc.arg(created_at));

-- name: TaskListForPeople :many
-- The Tasks tab: the room's tasks, newest first; a guest's people see only the tasks their
-- company sent or received.
SELECT k.id, k.goal, k.priority, k.deadline, k.status, k.result, k.review, k.review_comment, k.reviewed_at,
  k.acceptance_criteria, k.created_at, k.updated_at, k.from_org_id, k.to_org_id,
  coalesce(fa.name, '')::text AS from_agent_name, coalesce(fo.name, '')::text AS from_org_name,
  coalesce(ta.name, '')::text AS to_agent_name, coalesce(m.part, '')::text AS to_part
FROM room_task k
LEFT JOIN agent fa ON fa.id = k.from_agent_id
LEFT JOIN organisation fo ON fo.id = k.from_org_id
LEFT JOIN agent ta ON ta.id = k.to_agent_id
LEFT JOIN membership m ON m.project_id = k.project_id AND m.id = k.to_member_id
WHERE k.project_id = sqlc.arg(project_id)
  AND (sqlc.arg(viewer_is_host)::boolean OR k.from_org_id = sqlc.arg(viewer_org_id) OR k.to_org_id = sqlc.arg(viewer_org_id))
ORDER BY k.id DESC
LIMIT sqlc.arg(lim);

-- name: TaskCancel :exec
UPDATE room_task SET status = 'canceled', updated_at = now()
WHERE project_id = sqlc.arg(project_id) AND id = sqlc.arg(id);

-- name: MembershipListForPeople :many
-- The room's parts for people: who, which company, last seen, and until when a part is
-- parked (its wake budget spent: the amber "limited until" badge).
SELECT m.part, m.is_main, m.org_id, coalesce(a.name, '')::text AS agent_name, coalesce(o.name, '')::text AS org_name,
  m.last_seen_at, m.parked_until
FROM membership m
LEFT JOIN agent a ON a.id = m.agent_id
LEFT JOIN organisation o ON o.id = m.org_id
WHERE m.project_id = sqlc.arg(project_id)
ORDER BY m.is_main DESC, m.part;
