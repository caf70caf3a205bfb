-- Threads toolset. Every query is bounded by the caller's project_id (from the Scope).

-- name: MembershipListByParts :many
SELECT id, part FROM membership WHERE project_id = @project_id AND part = ANY(@parts::text[]);

-- name: MembershipListOthers :many
-- Every other part of the project: the recipients of a broadcast.
SELECT id, part FROM membership WHERE project_id = @project_id AND id <> @member_id ORDER BY part;

-- name: ThreadInsert :exec
INSERT INTO thread (project_id, id, subject, created_by, needs_human, last_message_at, created_at)
VALUES (@project_id, @id, @subject, @created_by, @needs_human, @now, @now);

-- name: MessageInsert :exec
INSERT INTO message (project_id, id, thread_id, sender_id, from_part, body, urgent, needs_human, broadcast, created_at)
VALUES (@project_id, @id, @thread_id, @sender_id, @from_part, @body, @urgent, @needs_human, @broadcast, @now);

-- name: ParticipantAdd :exec
-- Read from membership, not from the array alone (every id is a membership of the
-- project: the foreign key): on Citus an INSERT … SELECT that reads no sharded table is
-- pulled to the coordinator and copied to the shard, which row-level security refuses.
INSERT INTO participant (project_id, thread_id, member_id, joined_at)
SELECT m.project_id, @thread_id, m.id, @now FROM membership m
WHERE m.project_id = @project_id AND m.id = ANY (@member_ids::uuid[])
ON CONFLICT DO NOTHING;

-- name: DeliveryInsert :exec
-- From membership, as ParticipantAdd, for the same reason.
INSERT INTO delivery (project_id, member_id, message_id, thread_id)
SELECT m.project_id, m.id, @message_id, @thread_id FROM membership m
WHERE m.project_id = @project_id AND m.id = ANY (@member_ids::uuid[]);

-- name: ThreadLock :one
SELECT id, subject, status, lesson_outcome, created_at FROM thread
WHERE project_id = @project_id AND id = @id FOR UPDATE;

-- name: ThreadShare :one
-- A reply's hold on its thread: KEY SHARE conflicts with the FOR UPDATE every path that
-- ends a thread takes first (close, the idle sweep, cancel), so a reply and an end are
-- ordered (the reply sees the end, or the end waits for the reply), but not with other
-- replies' holds or their touches: replies to one thread do not queue behind each other.
SELECT id, subject, status FROM thread
WHERE project_id = @project_id AND id = @id FOR KEY SHARE;

-- name: ThreadGet :one
SELECT id, subject, status, needs_human, created_at, closed_at FROM thread
WHERE project_id = @project_id AND id = @id;

-- name: ThreadListRecipients :many
-- Everyone in the thread but the sender of a reply.
SELECT member_id FROM participant
WHERE project_id = @project_id AND thread_id = @thread_id AND member_id <> @sender_id;

-- name: ThreadTouch :exec
-- last_message_at (read by the idle close, whose idle time is hours) is kept to the second:
-- a thread replied to many times a second is written once, not by every reply in turn.
UPDATE thread SET last_message_at = sqlc.arg(now)::timestamptz, needs_human = needs_human OR sqlc.arg(needs_human)::boolean
WHERE project_id = sqlc.arg(project_id) AND id = sqlc.arg(id)
  AND (last_message_at < sqlc.arg(now)::timestamptz - interval '1 second'
       OR (sqlc.arg(needs_human)::boolean AND NOT needs_human));

-- name: DeliveryListInbox :many
-- Newest first, open threads only; before pages by message id (UUIDv7, creation order).
-- The preview is made from the body's first 600 characters; the 601st, when there is
-- one, says that more followed (threads.inboxPreview).
SELECT d.message_id, d.thread_id, t.subject, m.from_part, (d.read_at IS NULL)::boolean AS unread,
  m.created_at, left(m.body, 601)::text AS body_head
FROM delivery d
JOIN message m ON m.project_id = d.project_id AND m.id = d.message_id
JOIN thread t ON t.project_id = d.project_id AND t.id = d.thread_id
WHERE d.project_id = @project_id AND d.member_id = @member_id AND d.open
  AND d.message_id < @before
ORDER BY d.message_id DESC
LIMIT @lim;

-- name: DeliveryListInboxUnread :many
SELECT d.message_id, d.thread_id, t.subject, m.from_part, true AS unread,
  m.created_at, left(m.body, 601)::text AS body_head
FROM delivery d
JOIN message m ON m.project_id = d.project_id AND m.id = d.message_id
JOIN thread t ON t.project_id = d.project_id AND t.id = d.thread_id
WHERE d.project_id = @project_id AND d.member_id = @member_id AND d.open AND d.read_at IS NULL
  AND d.message_id < @before
ORDER BY d.message_id DESC
LIMIT @lim;

-- name: DeliveryAck :one
UPDATE delivery SET read_at = coalesce(read_at, @now)
WHERE project_id = @project_id AND member_id = @member_id AND message_id = @message_id
RETURNING message_id, thread_id;

-- name: ThreadListMine :many
-- The caller's threads, newest first, older than @before (the largest uuid for the first
-- page: no "cursor IS NULL OR …", which would plan badly).
SELECT t.id, t.subject, t.status, t.created_at
FROM participant p
JOIN thread t ON t.project_id = p.project_id AND t.id = p.thread_id
WHERE p.project_id = @project_id AND p.member_id = @member_id AND p.thread_id < @before
  AND (sqlc.narg(status)::text IS NULL OR t.status = sqlc.narg(status))
  -- m.project_id = @project_id as well: Citus routes a subquery to one shard group only
  -- when its own distribution column is pinned (docs/scale.md).
  AND (sqlc.narg(pattern)::text IS NULL OR t.subject ILIKE sqlc.narg(pattern) OR EXISTS (
        SELECT 1 FROM message m WHERE m.project_id = @project_id AND m.project_id = t.project_id
          AND m.thread_id = t.id AND m.body ILIKE sqlc.narg(pattern)))
ORDER BY p.thread_id DESC
LIMIT @lim;

-- name: MessageListByThread :many
-- A thread's newest messages first, at most 201 (a page shows 200; the 201st says there
-- are older ones).
SELECT id, from_part, body, urgent, created_at FROM message
WHERE project_id = @project_id AND thread_id = @thread_id
ORDER BY id DESC
LIMIT 201;

-- name: ThreadShow :many
-- show in one statement: the thread (in every row), the parts composing in it while it
-- is open (computed once), and its newest messages first (those before the message
-- `before`, when given), at most 201: show returns 200 at most, and the 201st says there
-- are older ones; one row with NULL message columns for a thread without messages (or
-- none before `before`), none for no such thread. One round trip with the transaction's
-- BEGIN and COMMIT, where the thread, its messages and the composing parts were three.
SELECT t.id, t.subject, t.status, t.created_at, c.parts AS composing,
  m.id AS message_id, m.from_part, m.body, m.created_at AS message_created_at
FROM thread t
CROSS JOIN LATERAL (
  SELECT CASE WHEN t.status = 'open' THEN ARRAY(
    SELECT mb.part FROM composing cp
    JOIN membership mb ON mb.project_id = cp.project_id AND mb.id = cp.member_id
    WHERE cp.project_id = @project_id AND cp.thread_id = t.id AND cp.expires_at > @now
    ORDER BY mb.part) END::text[] AS parts
) c
LEFT JOIN message m ON m.project_id = t.project_id AND m.thread_id = t.id
  AND (sqlc.narg(before)::uuid IS NULL OR m.id < sqlc.narg(before)::uuid)
WHERE t.project_id = @project_id AND t.id = @id
ORDER BY m.id DESC
LIMIT 201;

-- name: ThreadEnd :exec
UPDATE thread SET status = @status, closed_at = @now, closed_by = @closed_by, closed_by_member = sqlc.narg(closed_by_member)
WHERE project_id = @project_id AND id = @id AND status = 'open';

-- name: DeliveryClose :exec
-- A finished thread leaves every inbox and its unread is marked read.
UPDATE delivery SET open = false, read_at = coalesce(read_at, @now)
WHERE project_id = @project_id AND thread_id = @thread_id AND open;

-- name: ThreadSetLessonOutcome :exec
UPDATE thread SET lesson_outcome = @outcome WHERE project_id = @project_id AND id = @id;

-- name: ThreadSearchOthers :many
-- Threads the part does not take part in whose subject or any message contains the text;
-- rr_search_threads (migrations 000002, 000066) reads only rr_project(), the transaction's
-- tenant; threads older than @before (the largest uuid for the first page).
SELECT t.id, t.subject, t.status, t.created_at
FROM rr_search_threads(@member_id::uuid, @pattern::text, @lim::integer, @before::uuid) AS t
WHERE t.project_id = @project_id::uuid
ORDER BY t.id DESC;

-- name: ActivityEventInsert :exec
INSERT INTO activity_event (project_id, id, member_id, type, detail, usage, created_at)
VALUES (@project_id, @id, @member_id, @type, @detail, sqlc.narg(usage), @now);

-- name: ComposingUpsert :exec
INSERT INTO composing (project_id, thread_id, member_id, expires_at)
VALUES (@project_id, @thread_id, @member_id, @expires_at)
ON CONFLICT (project_id, thread_id, member_id) DO UPDATE SET expires_at = EXCLUDED.expires_at;

-- name: UsageDayModels :one
-- The models a part's day of usage holds, and whether it holds this one: past
-- threads.MaxUsageModelsPerDay a report naming another model is added to the others' row.
-- Each model is a row that the usage page and its CSV read, and an agent names its model
-- freely: 6,000 names made one page view take 10 s and 800 MB. (A statement of its own:
-- Citus plans no INSERT … SELECT that reads the table it writes.)
SELECT count(*) AS models, coalesce(bool_or(model = @model), false)::boolean AS known
FROM usage_daily
WHERE project_id = @project_id AND member_id = @member_id AND day = @day;

-- name: UsageAdd :exec
INSERT INTO usage_daily (project_id, member_id, model, day, events, input_tokens, output_tokens, cache_tokens, cost_usd)
VALUES (@project_id, @member_id, @model, @day, 1, @input_tokens, @output_tokens, @cache_tokens, @cost_usd)
ON CONFLICT (project_id, member_id, model, day) DO UPDATE SET
  -- A day's totals stop at what their columns hold (bigint, numeric(18, 6)) instead of
  -- failing the event: each report is bounded, their sum is not.
  events = usage_daily.events + 1,
  input_tokens = LEAST(usage_daily.input_tokens::numeric + EXCLUDED.input_tokens, 9223372036854775807)::bigint,
  output_tokens = LEAST(usage_daily.output_tokens::numeric + EXCLUDED.output_tokens, 9223372036854775807)::bigint,
  cache_tokens = LEAST(usage_daily.cache_tokens::numeric + EXCLUDED.cache_tokens, 9223372036854775807)::bigint,
  cost_usd = LEAST(usage_daily.cost_usd + EXCLUDED.cost_usd, 999999999999.999999);

-- name: MembershipSetParkedUntil :one
UPDATE membership SET parked_until = sqlc.narg(parked_until), updated_at = @now
WHERE project_id = @project_id AND id = @id
RETURNING parked_until;

-- name: ThreadListIdle :many
-- Cross-tenant (operator): open threads without a message since the cutoff, oldest first,
-- read without locks from every shard; each project's are then locked by ThreadLockIdle.
-- A thread with a message its recipient has not read is not idle: closing marks it read
-- and takes it out of the inbox, so a hand-off to a part parked for hours (or offline)
-- was lost. The backstop is for finished conversations (docs/threads.md).
SELECT t.project_id, t.id FROM thread t
WHERE t.status = 'open' AND t.last_message_at < @cutoff
  AND NOT EXISTS (SELECT 1 FROM delivery d WHERE d.project_id = t.project_id AND d.thread_id = t.id AND d.open AND d.read_at IS NULL)
ORDER BY t.last_message_at
LIMIT @lim;

-- name: ThreadLockIdle :many
-- Of a project's idle candidates, those still open and idle, locked; one a reply or a
-- close holds is skipped until the next run. One project: a router query on Citus.
SELECT t.id FROM thread t
WHERE t.project_id = @project_id AND t.id = ANY (@ids::uuid[]) AND t.status = 'open' AND t.last_message_at < @cutoff
  AND NOT EXISTS (SELECT 1 FROM delivery d WHERE d.project_id = @project_id AND d.thread_id = t.id AND d.open AND d.read_at IS NULL)
FOR UPDATE OF t SKIP LOCKED;

-- name: ThreadGetForCancel :one
-- Operator: a thread of a project (found by ProjectGetIDBySlug), locked, for people's
-- commands. The project is found first: FOR UPDATE of a thread joined to reference tables
-- is refused on Citus.
SELECT project_id, id, status FROM thread WHERE project_id = @project_id AND id = @thread_id
FOR UPDATE;

-- name: ParticipantExists :one
SELECT EXISTS (SELECT 1 FROM participant WHERE project_id = @project_id AND thread_id = @thread_id AND member_id = @member_id);
