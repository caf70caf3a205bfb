-- The threads of a project for people (the dashboard's thread pages, docs/dashboard.md).
-- Every query takes the person's Scope's project; a guest company's people see only the
-- threads its parts take part in, and only its own parts' activity and usage
-- (viewer_is_host false, viewer_org_id their organisation).

-- name: ThreadListForPeople :many
-- The thread list, most recently active first, with its parts and message count,
-- filtered by status and by the needsHuman flag: a walk of thread_recent_idx.
-- Every subquery names the project by value as well (pa, m, g .project_id =
-- sqlc.arg(project_id)): Citus routes a statement to one shard group only when each
-- table's own distribution column is pinned, not when it is correlated through the outer
-- table's (docs/scale.md, "Router plans"). The rows are the same on plain PostgreSQL.
SELECT t.id, t.subject, t.status, t.needs_human, t.created_at, t.last_message_at, t.closed_by,
  array(SELECT m.part FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
        WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
        ORDER BY m.part)::text[] AS parts,
  (SELECT count(*) FROM message g WHERE g.project_id = sqlc.arg(project_id) AND g.thread_id = t.id) AS messages
FROM thread t
WHERE t.project_id = sqlc.arg(project_id)
  AND (sqlc.narg(status)::text IS NULL OR t.status = sqlc.narg(status))
  AND (NOT sqlc.arg(flagged_only)::boolean OR t.needs_human)
  AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
    SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
    WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
      AND m.org_id = sqlc.arg(viewer_org_id)))
ORDER BY t.last_message_at DESC, t.id DESC
LIMIT sqlc.arg(lim);

-- name: ThreadListForPeopleByPart :many
-- The thread list of the threads one part takes part in (the same columns, order and
-- filters). The planner cannot tell a part of few threads from one of many (the part is
-- resolved to a member inside the statement), and walking thread_recent_idx for a part in
-- 50 of 100k threads reads all 100k; so the part's threads are counted first, up to
-- few + 1, from participant_member_idx, and one of two branches runs (the other's
-- one-time filter is false): at most few threads are looked up by key and sorted; more
-- are dense enough that the walk of the recent index (as the list without a part) finds
-- lim of them early. Each branch carries the filters, so the walk's LIMIT counts only
-- rows that are shown.
WITH part_threads AS MATERIALIZED (
  SELECT pa.thread_id FROM participant pa
  WHERE pa.project_id = sqlc.arg(project_id) AND pa.member_id = (
    SELECT m.id FROM membership m WHERE m.project_id = sqlc.arg(project_id) AND m.part = sqlc.arg(part))
  LIMIT sqlc.arg(few)::int + 1),
few AS (SELECT count(*) <= sqlc.arg(few)::int AS yes FROM part_threads),
picked AS (
  (SELECT t.* FROM part_threads p
   CROSS JOIN LATERAL (SELECT * FROM thread t WHERE t.project_id = sqlc.arg(project_id) AND t.id = p.thread_id LIMIT 1) t
   WHERE (SELECT yes FROM few)
     AND (sqlc.narg(status)::text IS NULL OR t.status = sqlc.narg(status))
     AND (NOT sqlc.arg(flagged_only)::boolean OR t.needs_human)
     AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
       SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
       WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
         AND m.org_id = sqlc.arg(viewer_org_id))))
  UNION ALL
  (SELECT t.* FROM thread t
   WHERE NOT (SELECT yes FROM few) AND t.project_id = sqlc.arg(project_id)
     AND (sqlc.narg(status)::text IS NULL OR t.status = sqlc.narg(status))
     AND (NOT sqlc.arg(flagged_only)::boolean OR t.needs_human)
     AND EXISTS (
       SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
       WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
         AND m.part = sqlc.arg(part))
     AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
       SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
       WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
         AND m.org_id = sqlc.arg(viewer_org_id)))
   ORDER BY t.last_message_at DESC, t.id DESC
   LIMIT sqlc.arg(lim)))
SELECT t.id, t.subject, t.status, t.needs_human, t.created_at, t.last_message_at, t.closed_by,
  array(SELECT m.part FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
        WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
        ORDER BY m.part)::text[] AS parts,
  (SELECT count(*) FROM message g WHERE g.project_id = sqlc.arg(project_id) AND g.thread_id = t.id) AS messages
FROM picked t
ORDER BY t.last_message_at DESC, t.id DESC
LIMIT sqlc.arg(lim);

-- name: ThreadGetForPeople :one
-- A thread's header for its page: who takes part (part and company) and who is composing
-- now; no row for a thread the viewer's company may not see.
SELECT t.id, t.subject, t.status, t.needs_human, t.created_at, t.last_message_at, t.closed_at, t.closed_by,
  array(SELECT m.part || ' [' || coalesce(o.name, '') || ']' FROM participant pa
        JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
        LEFT JOIN organisation o ON o.id = m.org_id
        WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
        ORDER BY m.part)::text[] AS parts,
  array(SELECT m.part FROM composing c JOIN membership m ON m.project_id = c.project_id AND m.id = c.member_id
        WHERE c.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND c.thread_id = t.id
          AND c.expires_at > sqlc.arg(now)::timestamptz AND t.status = 'open' ORDER BY m.part)::text[] AS composing
FROM thread t
WHERE t.project_id = sqlc.arg(project_id) AND t.id = sqlc.arg(id)
  AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
    SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
    WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
      AND m.org_id = sqlc.arg(viewer_org_id)));

-- name: MessageListForPeople :many
-- A thread's newest messages first, at most 201 (a page shows 200; the 201st says there
-- are older ones), each with its recipients and when each read it (delivery.read_at;
-- null while unread), as a JSON array [{part, readAt}].
SELECT g.id, g.from_part, g.body, g.urgent, g.needs_human, g.broadcast, g.created_at,
  coalesce((SELECT jsonb_agg(jsonb_build_object('part', m.part, 'readAt', d.read_at) ORDER BY m.part)
            FROM delivery d JOIN membership m ON m.project_id = d.project_id AND m.id = d.member_id
            -- by thread first: delivery_thread_idx (its primary key leads with the member);
            -- the project by value, for Citus's router (as in ThreadListForPeople)
            WHERE d.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id)
              AND d.thread_id = sqlc.arg(thread_id) AND d.message_id = g.id), '[]'::jsonb)::jsonb AS reads
FROM message g
WHERE g.project_id = sqlc.arg(project_id) AND g.thread_id = sqlc.arg(thread_id)
ORDER BY g.id DESC
LIMIT 201;

-- name: ThreadLockForPeople :one
-- A thread a person ends, locked; no row for one the viewer's company may not see.
SELECT t.id, t.status FROM thread t
WHERE t.project_id = sqlc.arg(project_id) AND t.id = sqlc.arg(id)
  AND (sqlc.arg(viewer_is_host)::boolean OR EXISTS (
    SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
    WHERE pa.project_id = sqlc.arg(project_id) AND m.project_id = sqlc.arg(project_id) AND pa.thread_id = t.id
      AND m.org_id = sqlc.arg(viewer_org_id)))
FOR UPDATE OF t;

-- name: ActivityEventListForPeople :many
-- The activity feed, newest first: events after an id (the live stream's resume point;
-- the nil uuid for all) and before another (the page before the newest, when a live
-- stream catches up; null for none), with the part and company that reported them.
SELECT e.id, e.type, e.detail, e.usage, e.created_at, coalesce(m.part, '')::text AS part, coalesce(o.name, '')::text AS org_name
FROM activity_event e
LEFT JOIN membership m ON m.project_id = e.project_id AND m.id = e.member_id
LEFT JOIN organisation o ON o.id = m.org_id
WHERE e.project_id = sqlc.arg(project_id) AND e.id > sqlc.arg(after)::uuid
  AND (sqlc.narg(before)::uuid IS NULL OR e.id < sqlc.narg(before)::uuid)
  AND (sqlc.arg(viewer_is_host)::boolean OR m.org_id = sqlc.arg(viewer_org_id))
ORDER BY e.id DESC
LIMIT sqlc.arg(lim);

-- name: UsageDailyListForPeople :many
-- Usage per UTC day, part and model from a day on, oldest first, for the charts and the
-- CSV export.
SELECT u.day, u.model, m.part, u.events, u.input_tokens, u.output_tokens, u.cache_tokens, u.cost_usd::float8 AS cost_usd
FROM usage_daily u
JOIN membership m ON m.project_id = u.project_id AND m.id = u.member_id
WHERE u.project_id = sqlc.arg(project_id) AND u.day >= sqlc.arg(since)::date
  AND (sqlc.arg(viewer_is_host)::boolean OR m.org_id = sqlc.arg(viewer_org_id))
ORDER BY u.day, m.part, u.model;

-- name: ThreadNotifyChanged :exec
-- One NOTIFY per project on rr_thread (threads.Channel), sent after the writers committed.
SELECT pg_notify('rr_thread', p::text) FROM unnest(@project_ids::uuid[]) AS p;
