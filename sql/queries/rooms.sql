-- Rooms toolset. Every statement names its project_id from the caller's Scope; RLS
-- (project_id = rr_project()) is the second wall.

-- name: RoomMemberGetByPart :one
SELECT m.id, m.agent_id, m.org_id, m.part, a.name AS agent_name, a.kind AS agent_kind,
  o.name AS org_name
FROM membership m
JOIN agent a ON a.id = m.agent_id
JOIN organisation o ON o.id = m.org_id
WHERE m.project_id = $1 AND m.part = $2;

-- name: RoomMemberListAdmittedParts :many
-- The parts an unknown recipient's error names: members of the host's company and of the
-- guest companies whose agreement is active. A pending or revoked guest is not in the
-- room yet (or any more), and its parts are not told to the others.
SELECT m.part
FROM membership m
JOIN project p ON p.id = m.project_id
WHERE m.project_id = sqlc.arg(project_id)
  AND (m.org_id = p.host_org_id OR EXISTS (SELECT 1 FROM agreement ag
    WHERE ag.project_id = sqlc.arg(project_id) AND ag.project_id = m.project_id
      AND ag.guest_org_id = m.org_id AND ag.status = 'active'))
ORDER BY m.is_main DESC, m.part;

-- name: RoomMemberGetByAgentSlug :one
-- send_task's second look: the caller's own company's agent by its slug, when it is a
-- member of the room under another part name (slugs are unique within a company).
SELECT m.id, m.agent_id, m.org_id, m.part, a.name AS agent_name, a.kind AS agent_kind,
  o.name AS org_name
FROM membership m
JOIN agent a ON a.id = m.agent_id
JOIN organisation o ON o.id = m.org_id
WHERE m.project_id = $1 AND m.org_id = $2 AND a.slug = $3;

-- name: AgentExistsInOrg :one
SELECT EXISTS (SELECT 1 FROM agent WHERE org_id = $1 AND slug = $2);

-- name: AgreementGetForRoom :one
SELECT status, grants FROM agreement WHERE project_id = $1 AND guest_org_id = $2;

-- name: RoomMemberListAlwaysOn :many
-- The parts of always-on agents other than the caller, woken on a new room message (a
-- session agent reads the room at its next call instead). The agent's kind is read here,
-- with the members, rather than in a lookup of its own after them: one round trip less
-- per message. (The wake's own statement must not read agent: docs/scale.md.)
SELECT m.id FROM membership m JOIN agent a ON a.id = m.agent_id
WHERE m.project_id = $1 AND m.agent_id <> $2 AND a.kind = 'always_on' ORDER BY m.id;

-- name: RoomMessageInsert :exec
INSERT INTO room_message (project_id, id, kind, author_agent_id, author_org_id, author_model, content, ref_id, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: RoomMessageExists :one
SELECT EXISTS (SELECT 1 FROM room_message WHERE project_id = $1 AND id = $2);

-- name: RoomMessageList :many
-- The newest 100 messages (get_messages' largest limit) before a message id, newest
-- first; the first page passes the largest uuid. The caller keeps the first `limit` and
-- reverses them to oldest first. The statement runs with its generic plan (planning it
-- costs ten times its execution: the joins' row-level security policies), so nothing in
-- it may depend on a parameter's value to plan well: no "cursor IS NULL OR …" (hence the
-- largest uuid for no cursor) and no parameter in LIMIT.
SELECT rm.id, rm.kind, rm.content, rm.created_at, rm.author_model,
  rm.author_agent_id, rm.author_user_id,
  a.name AS agent_name, rm.author_name, u.name AS user_name, o.name AS org_name
FROM room_message rm
LEFT JOIN agent a ON a.id = rm.author_agent_id
LEFT JOIN app_user u ON u.id = rm.author_user_id
LEFT JOIN organisation o ON o.id = rm.author_org_id
WHERE rm.project_id = sqlc.arg(project_id) AND rm.id < sqlc.arg(before)
ORDER BY rm.id DESC
LIMIT 100;

-- name: MemoryEntryInsert :exec
INSERT INTO memory_entry (project_id, id, org_id, agent_id, model, content, tags, category,
  is_decision, is_private, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: MemoryEntryFindSame :one
-- The live entry this write would store again: the same content, tags, category, decision
-- flag and visibility, written in the caller's organisation. Only its own: another
-- company's entry would answer a company without the read_memory grant whether a text is
-- in the room's memory (its id, writer and time), and would leave the write unrecorded
-- as the caller's company's. memory_entry_content_hash_idx finds it by content.
SELECT e.id, e.category, e.created_at, a.name AS agent_name
FROM memory_entry e
LEFT JOIN agent a ON a.id = e.agent_id
WHERE e.project_id = sqlc.arg(project_id) AND e.content = sqlc.arg(content) AND e.deprecated_at IS NULL
  AND e.tags = sqlc.arg(tags)::text[] AND e.category IS NOT DISTINCT FROM sqlc.narg(category)::text
  AND e.is_decision = sqlc.arg(is_decision) AND e.is_private = sqlc.arg(is_private)
  AND e.org_id = sqlc.arg(org_id)
ORDER BY e.created_at, e.id
LIMIT 1;

-- name: MemoryVectorInsert :exec
INSERT INTO memory_vector (project_id, memory_id, embedder, embedding)
VALUES ($1, $2, $3, $4)
ON CONFLICT (project_id, memory_id, embedder) DO NOTHING;

-- name: MemoryEntryVisibleIDs :many
-- Which of the given ids are entries both the caller's organisation and the reader's (a
-- task's recipient) can read: a private entry only when it is the organisation of both,
-- so a task to another company cannot hand it the id of an entry it may not read.
SELECT id FROM memory_entry
WHERE project_id = sqlc.arg(project_id) AND id = ANY(sqlc.arg(ids)::uuid[])
  AND (NOT is_private OR (org_id = sqlc.arg(org_id) AND org_id = sqlc.arg(reader_org_id)));

-- name: MemoryEntryListUnembedded :many
-- Entries without a vector row for the embedder (never embedded, or embedded by another),
-- written from @since and before @before, oldest first (memory_entry_created_idx), but
-- for the @skip ones (parked: the embedder fails on them).
SELECT e.project_id, e.id, e.content, e.created_at
FROM memory_entry e
WHERE NOT EXISTS (SELECT 1 FROM memory_vector v
                  WHERE v.project_id = e.project_id AND v.memory_id = e.id AND v.embedder = sqlc.arg(embedder))
  AND e.created_at >= sqlc.arg(since) AND e.created_at < sqlc.arg(before)
  AND e.id <> ALL(sqlc.arg(skip)::uuid[])
ORDER BY e.created_at
LIMIT sqlc.arg(lim);

-- name: MemoryEntryClaimUnembedded :many
-- Claims those of a project's entries @ids that still have no vector row for the
-- embedder: each claim is a transaction-scoped advisory lock on (entry, embedder), and
-- an entry another transaction has claimed is skipped, so two embedders (threads or
-- replicas) never embed the same entry at once. An advisory lock, not a row lock: the
-- claim lasts while a remote embedder answers, and a row lock would make a person's
-- deprecation of the entry wait that long (and fail at its lock timeout). The class
-- 7274 keeps these two-key locks apart from every other advisory lock; a hash collision
-- only skips an entry until the next round. The lock is taken last, on rows that
-- passed the other conditions. One project: a router query on Citus, so the lock is
-- taken on the node holding the shard, the same for every replica.
SELECT c.id, c.content
FROM (SELECT e.id, e.content
      FROM memory_entry e
      WHERE e.project_id = sqlc.arg(project_id) AND e.id = ANY(sqlc.arg(ids)::uuid[])
        AND NOT EXISTS (SELECT 1 FROM memory_vector v
                        WHERE v.project_id = e.project_id AND v.memory_id = e.id AND v.embedder = sqlc.arg(embedder))
      ORDER BY e.id
      OFFSET 0) c
WHERE pg_try_advisory_xact_lock(7274, hashtext(c.id::text || '/' || sqlc.arg(embedder)::text));

-- name: MemoryVectorListIDs :many
-- Which of a project's entries @ids have a vector row for the embedder: read after a
-- claim, in a snapshot taken after its locks, for the entries a transaction stored and
-- committed between the claim's snapshot and its lock.
SELECT memory_id FROM memory_vector
WHERE project_id = sqlc.arg(project_id) AND memory_id = ANY(sqlc.arg(ids)::uuid[])
  AND embedder = sqlc.arg(embedder);

-- name: TaskInsert :exec
INSERT INTO room_task (project_id, id, from_agent_id, from_org_id, to_member_id, to_agent_id,
  to_org_id, goal, priority, deadline, memory_refs, acceptance_criteria, verification_method,
  created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14);

-- name: TaskListOpen :many
-- The caller's open tasks, pending ones first, each group oldest first: at most 100
-- (get_inbox's largest limit; the caller keeps the first `limit`). Pending first, so a
-- new task is handed out even when `limit` older tasks are still in progress. No
-- parameter in LIMIT, so the cached generic plan serves every call and the joins'
-- row-level security is not planned again each time.
SELECT t.id, t.goal, t.priority, t.status, t.deadline, t.memory_refs, t.acceptance_criteria,
  t.verification_method, t.created_at, a.name AS from_name, o.name AS from_org
FROM room_task t
LEFT JOIN agent a ON a.id = t.from_agent_id
LEFT JOIN organisation o ON o.id = t.from_org_id
WHERE t.project_id = $1 AND t.to_agent_id = $2
  AND t.status IN ('pending', 'in_progress', 'input_required')
ORDER BY t.status <> 'pending', t.id
LIMIT 100;

-- name: TaskStartPending :many
-- get_inbox hands out the listed pending tasks: they become in_progress. Row locks make
-- concurrent calls safe: a second call waits, re-reads the row, no longer finds it
-- pending, and does not return it.
UPDATE room_task SET status = 'in_progress', updated_at = now()
WHERE project_id = sqlc.arg(project_id) AND id = ANY(sqlc.arg(ids)::uuid[]) AND status = 'pending'
RETURNING id;

-- name: TaskStatuses :many
-- The current status of listed tasks that TaskStartPending did not move: another call
-- handed them out, or they were answered or canceled, between the list and the lock.
-- A new statement, so it sees what those transactions committed.
SELECT id, status FROM room_task
WHERE project_id = sqlc.arg(project_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: TaskGetForUpdate :one
-- The task a response or a review changes, locked until the change commits. NO KEY
-- UPDATE, the lock the UPDATE itself takes: it does not wait for an upload's key-share
-- lock (TaskGetForAttach), so a file being stored never holds up the response.
SELECT id, from_agent_id, from_org_id, to_agent_id, to_org_id, to_member_id, status, review, goal
FROM room_task WHERE project_id = $1 AND id = $2
FOR NO KEY UPDATE;

-- name: TaskGetForAttach :one
-- The task an upload attaches to, with a key-share lock (what the attachment's foreign key
-- takes anyway): the task stays while the file is stored, and its status changes
-- (get_inbox starting it, respond_to_task, a review) do not wait for up to 25 MB to be
-- written, as they did when the upload locked it FOR UPDATE.
SELECT from_org_id, to_org_id FROM room_task WHERE project_id = $1 AND id = $2
FOR KEY SHARE;

-- name: TaskRespond :exec
UPDATE room_task SET status = $3, result = $4, responded_at = now(), updated_at = now()
WHERE project_id = $1 AND id = $2;

-- name: TaskReview :exec
UPDATE room_task SET review = $3, review_comment = $4, reviewed_at = now(), updated_at = now()
WHERE project_id = $1 AND id = $2;

-- name: RoomMemberGetSender :one
-- A task's sender's part, and whether its agent is always-on (only those are woken by the
-- response): read together, so the wake needs no lookup of its own.
SELECT m.id, a.kind = 'always_on' AS always_on
FROM membership m JOIN agent a ON a.id = m.agent_id
WHERE m.project_id = $1 AND m.agent_id = $2;

-- name: AttachmentLockTask :exec
-- Uploads to one task take turns from looking for a stored copy of the file and counting
-- the task's files to commit, so two retries racing each other store a file once and the
-- task never holds more than its bound. A transaction-scoped advisory lock (class 7278)
-- on the task: nothing else waits for it, unlike the task's row. On Citus it is taken on
-- the coordinator, which every replica shares. An upload holds it while its bytes are
-- stored (up to 25 MB, a second or more), so the wait is bounded by the request's
-- database budget, not by lock_timeout (1 s, for row locks that are held for
-- milliseconds): parallel uploads of large files to one task failed as "database
-- unavailable" after sending their whole body. The setting is made first, in the FROM.
SELECT pg_advisory_xact_lock(7278, hashtext(sqlc.arg(task_id)::uuid::text))
FROM (SELECT set_config('lock_timeout', '0', true)) AS no_lock_timeout;

-- name: AttachmentGetSame :one
-- The task's attachment with the same name and bytes from the same company: an upload
-- retried after its answer was lost (the route is plain HTTP, not a tool call with an
-- idempotency key) answers the stored one instead of storing the file twice.
SELECT id, content_type FROM task_attachment
WHERE project_id = sqlc.arg(project_id) AND task_id = sqlc.arg(task_id) AND uploaded_by_org_id = sqlc.arg(org_id)
  AND filename = sqlc.arg(filename) AND sha256 = sqlc.arg(sha256)
ORDER BY id LIMIT 1;

-- name: AttachmentInsert :exec
INSERT INTO task_attachment (project_id, id, task_id, uploaded_by_org_id, uploaded_by_agent,
  filename, content_type, size_bytes, sha256, content)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: AttachmentListByTask :many
-- Attachments of the given tasks, without their bytes (AttachmentListContent reads those
-- of the few get_inbox inlines).
SELECT id, task_id, uploaded_by_org_id, filename, content_type, size_bytes, sha256
FROM task_attachment
WHERE project_id = sqlc.arg(project_id) AND task_id = ANY(sqlc.arg(task_ids)::uuid[])
ORDER BY task_id, id;

-- name: AttachmentListContent :many
-- The bytes of the attachments get_inbox may inline.
SELECT id, content FROM task_attachment
WHERE project_id = sqlc.arg(project_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: AttachmentCountByTask :one
SELECT count(*) FROM task_attachment WHERE project_id = sqlc.arg(project_id) AND task_id = sqlc.arg(task_id);

-- name: AttachmentLockRoom :exec
-- An upload takes its room's turn (a transaction-scoped advisory lock, class 7280) once
-- its row is written, and counts the room's bytes again in the next statement, whose
-- snapshot sees every upload that took the turn before it and committed: uploads to two
-- tasks of one room that both passed the first count cannot both commit past the room's
-- bound. The turn is taken after the slow part (storing the bytes), so uploads to one
-- room wait on each other only for that count and their commits. lock_timeout is lifted
-- as for the task's turn: a commit of 25 MB can take longer than it.
SELECT pg_advisory_xact_lock(7280, hashtext(sqlc.arg(project_id)::uuid::text))
FROM (SELECT set_config('lock_timeout', '0', true)) AS no_lock_timeout;

-- name: AttachmentBytesByProject :one
-- The bytes a room's attachments hold (their sizes, not their content): an upload is
-- refused past the room's bound (rooms.Deps.MaxRoomAttachmentBytes).
SELECT coalesce(sum(size_bytes), 0)::bigint FROM task_attachment WHERE project_id = $1;

-- name: AttachmentGetHead :one
-- What a download sends before the content: the content itself is read a chunk at a time
-- (AttachmentGetChunk) while it is sent.
SELECT filename, content_type, size_bytes FROM task_attachment WHERE project_id = $1 AND id = $2;

-- name: AttachmentGetChunk :one
-- length bytes of a download's content from offset (0-based).
SELECT substring(content FROM sqlc.arg(offset_bytes)::int + 1 FOR sqlc.arg(length)::int)::bytea AS chunk
FROM task_attachment WHERE project_id = sqlc.arg(project_id) AND id = sqlc.arg(id);

-- name: RoomNotifyChanged :exec
-- One NOTIFY per room on rr_room (rooms.RoomChannel), sent after the writers committed.
SELECT pg_notify('rr_room', p::text) FROM unnest(@project_ids::uuid[]) AS p;
