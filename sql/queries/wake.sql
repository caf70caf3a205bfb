-- Wakes (internal/wake, docs/wakes.md). Queue and cancel run in the caller's tenant
-- transaction; the pager's claim and ack run in the agent's tenant; the sweep, webhook
-- dispatch and admin listing run on the owner's pool.

-- name: WakeEventQueue :exec
-- A request's wakes in one statement that only inserts: each part named (ids made in Go,
-- one per part), less those of guests without an active agreement, gets a wake event
-- (an online part's too: its wake is held while it stays online, not dropped); nothing shared is updated, so
-- concurrent senders to one part never wait on each other (the events are coalesced into
-- the part's pending wake when it is about to be delivered: WakeEventFold). Listeners
-- are told after the commit (WakeNotifyMembers), not here: a NOTIFY in the transaction
-- would serialise every sender's commit behind Postgres' one notify lock.
-- The host comes from the caller's scope and no reference table is read: on Citus an
-- INSERT … SELECT that reads one is sent to every shard; this one is a router query.
WITH req AS (
  SELECT unnest(sqlc.arg(member_ids)::uuid[]) AS member_id, unnest(sqlc.arg(ids)::uuid[]) AS id
)
INSERT INTO wake_event (project_id, id, member_id, agent_id, part, source, urgent, thread_id, item_id, created_at)
SELECT m.project_id, req.id, m.id, m.agent_id, m.part, sqlc.arg(source)::text, sqlc.arg(urgent)::boolean,
  sqlc.narg(thread_id)::uuid, sqlc.narg(item_id)::uuid, sqlc.arg(now)::timestamptz
FROM req
JOIN membership m ON m.project_id = sqlc.arg(project_id)::uuid AND m.id = req.member_id
LEFT JOIN agreement ag ON ag.project_id = m.project_id AND ag.guest_org_id = m.org_id AND ag.status = 'active'
-- a host's part, or a guest's under an active agreement (tenancy.Scope.Admitted): a wake
-- names the project, its threads and its last item
WHERE m.org_id = sqlc.arg(host_org_id)::uuid OR ag.project_id IS NOT NULL;

-- name: WakeEventListBacklog :many
-- Projects with wake events to fold, with their agents (the sweep: every agent; the
-- webhook dispatch: the agents given, those with a webhook). It reads every shard of
-- wake_event, without locks; each project is then folded by its own router statement.
SELECT e.project_id, array_agg(DISTINCT e.agent_id)::uuid[] AS agent_ids FROM wake_event e
WHERE NOT sqlc.arg(webhook_only)::boolean OR e.agent_id = ANY (sqlc.arg(webhook_agents)::uuid[])
GROUP BY e.project_id
LIMIT sqlc.arg(max_rows)::integer;

-- name: WakeListWebhookAgents :many
-- The agents with a webhook (the dispatch's candidates): one row per configured webhook.
SELECT agent_id FROM wake_target;

-- name: WakeEventFold :execrows
-- The coalescing: a project's wake events of the agents given (at most max_rows) are
-- deleted and added to their part's pending wake, made if the part has none (with the id
-- of its first event): count and thread shares summed, sources united, urgent if any
-- was, the latest item kept. Events another fold holds are skipped (SKIP LOCKED): that
-- fold adds them, so folds never wait on each other and senders never wait on a fold.
-- It counts the events folded. One project per statement, and the DELETE on top with the
-- upsert in a CTE: Citus plans neither FOR UPDATE across shard groups nor an INSERT …
-- SELECT with a data-modifying CTE, and plans this one on the project's shard group.
WITH pick AS (
  SELECT e.project_id, e.id FROM wake_event e
  WHERE e.project_id = sqlc.arg(project_id)::uuid AND e.agent_id = ANY (sqlc.arg(agent_ids)::uuid[])
  LIMIT sqlc.arg(max_rows)::integer
  FOR UPDATE OF e SKIP LOCKED
), ev AS (
  SELECT e.* FROM wake_event e JOIN pick ON e.project_id = pick.project_id AND e.id = pick.id
  WHERE e.project_id = sqlc.arg(project_id)::uuid
), per_thread AS (
  -- A wake names at most max_threads threads (those with the most events); the others'
  -- events are counted in other_count. Without the bound one part's sends grew one wake
  -- without end: every fold rebuilt it, and every answer carried it.
  SELECT project_id, member_id, thread_id, count(*)::integer AS n,
    row_number() OVER (PARTITION BY project_id, member_id, thread_id IS NULL ORDER BY count(*) DESC, thread_id) AS r
  FROM ev GROUP BY project_id, member_id, thread_id
), per_part AS (
  SELECT ev.project_id, ev.member_id, min(ev.agent_id::text)::uuid AS agent_id, min(ev.part) AS part,
    bool_or(ev.urgent) AS urgent, array_agg(DISTINCT ev.source ORDER BY ev.source) AS sources,
    count(*)::integer AS count,
    (count(*) FILTER (WHERE ev.thread_id IS NULL) + (SELECT COALESCE(sum(pt.n), 0) FROM per_thread pt
     WHERE pt.project_id = ev.project_id AND pt.member_id = ev.member_id AND pt.thread_id IS NOT NULL
       AND pt.r > sqlc.arg(max_threads)::integer))::integer AS other_count,
    (array_agg(ev.item_id ORDER BY ev.id DESC) FILTER (WHERE ev.item_id IS NOT NULL))[1] AS last_item_id,
    min(ev.created_at) AS created_at, (array_agg(ev.id ORDER BY ev.id))[1] AS id,
    (SELECT COALESCE(jsonb_object_agg(pt.thread_id::text, pt.n), '{}'::jsonb) FROM per_thread pt
     WHERE pt.project_id = ev.project_id AND pt.member_id = ev.member_id AND pt.thread_id IS NOT NULL
       AND pt.r <= sqlc.arg(max_threads)::integer) AS thread_counts
  FROM ev GROUP BY ev.project_id, ev.member_id
), upsert AS (
  INSERT INTO wake (project_id, id, member_id, agent_id, part, status, urgent, sources, count,
    thread_counts, other_count, last_item_id, created_at, updated_at)
  SELECT p.project_id, p.id, p.member_id, p.agent_id, p.part, 'pending', p.urgent, p.sources, p.count,
    p.thread_counts, p.other_count, p.last_item_id, p.created_at, sqlc.arg(now)::timestamptz
  FROM per_part p
  ON CONFLICT (project_id, member_id) WHERE status = 'pending' DO UPDATE SET
    count = wake.count + EXCLUDED.count,
    urgent = wake.urgent OR EXCLUDED.urgent,
    sources = ARRAY(SELECT DISTINCT s FROM unnest(wake.sources || EXCLUDED.sources) AS s ORDER BY s),
    -- The threads the wake names are kept before new ones, up to max_threads; the
    -- others' shares are counted in other_count.
    -- (Two subqueries, not one row assigned to both columns: sqlc cannot rewrite a
    -- parameter in that form.)
    thread_counts = (SELECT COALESCE(jsonb_object_agg(k, n), '{}'::jsonb)
      FROM (SELECT k, n, row_number() OVER (ORDER BY named DESC, n DESC, k) AS r FROM (
        SELECT k, sum(v::integer) AS n, bool_or(named) AS named FROM (
          SELECT a.k, a.v, true AS named FROM jsonb_each_text(wake.thread_counts) AS a (k, v)
          UNION ALL SELECT b.k, b.v, false FROM jsonb_each_text(EXCLUDED.thread_counts) AS b (k, v)) u GROUP BY k) g) s
      WHERE r <= sqlc.arg(max_threads)::integer),
    other_count = wake.other_count + EXCLUDED.other_count + (SELECT COALESCE(sum(n), 0)::integer
      FROM (SELECT k, n, row_number() OVER (ORDER BY named DESC, n DESC, k) AS r FROM (
        SELECT k, sum(v::integer) AS n, bool_or(named) AS named FROM (
          SELECT a.k, a.v, true AS named FROM jsonb_each_text(wake.thread_counts) AS a (k, v)
          UNION ALL SELECT b.k, b.v, false FROM jsonb_each_text(EXCLUDED.thread_counts) AS b (k, v)) u GROUP BY k) g) s
      WHERE r > sqlc.arg(max_threads)::integer),
    last_item_id = COALESCE(EXCLUDED.last_item_id, wake.last_item_id),
    -- A wake begins at its oldest item: an event stamped before the wake (its message's
    -- transaction committed late) moves it back, so an ack's recount ("unread since the
    -- wake began") still counts that message and does not drop its nudge.
    created_at = least(wake.created_at, EXCLUDED.created_at),
    updated_at = EXCLUDED.updated_at
)
DELETE FROM wake_event e USING pick
WHERE e.project_id = sqlc.arg(project_id)::uuid AND e.project_id = pick.project_id AND e.id = pick.id;

-- name: WakeEventCancelThread :exec
-- Closing a thread: its events not folded yet go (WakeCancelThread takes its share out
-- of the wakes they were folded into).
DELETE FROM wake_event WHERE project_id = sqlc.arg(project_id) AND thread_id = sqlc.arg(thread_id);

-- name: WakeNotify :exec
SELECT pg_notify('rr_wake', sqlc.arg(payload)::text);

-- name: WakeNotifyMembers :exec
-- After queueing commits: every replica's listener is told which agents may have work,
-- for many sends at once (one NOTIFY, one turn of the notify lock, per batch). Past 150
-- agents, "*" keeps the payload under NOTIFY's 8000 bytes.
SELECT pg_notify('rr_wake', CASE WHEN count(DISTINCT m.agent_id) > 150 THEN '*'
  ELSE string_agg(DISTINCT m.agent_id::text, ',') END)
FROM membership m
JOIN (SELECT unnest(sqlc.arg(project_ids)::uuid[]) AS project_id, unnest(sqlc.arg(member_ids)::uuid[]) AS id) r
  ON m.project_id = r.project_id AND m.id = r.id
HAVING count(*) > 0;

-- name: WakeCancelThread :many
-- Closing a thread: its share of every undelivered wake goes; a wake left with nothing is
-- canceled. A dead letter loses the share too (a retry must not wake anyone about the
-- finished conversation) but stays dead for people to see, with count 0 when nothing is
-- left, which a retry refuses. The wake stays urgent only while an urgent message of the
-- part's is still unread and open since it began, or while it holds items that are not
-- messages (as WakeWithdrawAcked): the closed thread's deliveries are closed first, so
-- closing the thread that held the urgent message ends the rest's pass past the budget.
UPDATE wake SET
  count = greatest(count - COALESCE((thread_counts->>sqlc.arg(thread_id)::uuid::text)::integer, 0), 0),
  thread_counts = thread_counts - sqlc.arg(thread_id)::uuid::text,
  urgent = urgent AND (other_count > 0 OR EXISTS (SELECT 1 FROM delivery d
    JOIN message msg ON msg.project_id = d.project_id AND msg.id = d.message_id
    WHERE d.project_id = sqlc.arg(project_id) AND msg.project_id = sqlc.arg(project_id) AND d.member_id = wake.member_id
      AND d.read_at IS NULL AND d.open AND msg.urgent AND msg.created_at >= wake.created_at)),
  status = CASE WHEN status <> 'dead' AND count - COALESCE((thread_counts->>sqlc.arg(thread_id)::uuid::text)::integer, 0) <= 0
                THEN 'canceled' ELSE status END,
  lease_until = CASE WHEN count - COALESCE((thread_counts->>sqlc.arg(thread_id)::uuid::text)::integer, 0) <= 0
                THEN NULL ELSE lease_until END,
  updated_at = sqlc.arg(now)::timestamptz
WHERE project_id = sqlc.arg(project_id) AND status IN ('pending', 'claimed', 'sending', 'dead')
  AND jsonb_exists(thread_counts, sqlc.arg(thread_id)::uuid::text)
RETURNING id, status;

-- name: MembershipResumeParked :execrows
-- The sweep: parts whose park ran out are unparked on the first tick past resetAt. Their
-- pending wakes become deliverable by that alone.
UPDATE membership SET parked_until = NULL, updated_at = sqlc.arg(now)::timestamptz
WHERE parked_until IS NOT NULL AND parked_until <= sqlc.arg(now)::timestamptz;

-- name: WakeListWebhookProjects :many
-- Projects with pending wakes of the agents given (those with a webhook): the dispatch's
-- candidates, read from every shard without locks (wake_agent_idx), a page at a time in
-- project order after `after`. Without an order and a cursor the page was the same set
-- on every call: when it was full of projects whose wakes were all held (parked, over
-- budget, online), the wakes of the others were never dispatched.
SELECT DISTINCT w.project_id FROM wake w
WHERE w.agent_id = ANY (sqlc.arg(agent_ids)::uuid[]) AND w.status = 'pending'
  AND w.project_id > sqlc.arg(after)::uuid
ORDER BY w.project_id
LIMIT sqlc.arg(max_rows)::integer;

-- name: WakeTakeWebhook :many
-- A project's deliverable wakes of the agents given (those with a webhook; not parked,
-- within budget or urgent), charged and marked sending for the delivery job enqueued in
-- the same transaction. Every subquery names the project itself: on Citus the statement
-- is then a router query, which FOR UPDATE needs. The budget counts every wake charged in
-- the hour, canceled ones too: a wake closed or acked after it was handed out was spent.
WITH c AS (
  SELECT w.project_id, w.id
  FROM wake w
  JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
  WHERE w.project_id = sqlc.arg(project_id)::uuid AND w.agent_id = ANY (sqlc.arg(agent_ids)::uuid[])
    AND w.status = 'pending'
    AND m.parked_until IS NULL -- parked until the sweep's first tick past resetAt clears it
    -- online: it sees the work itself; the wake waits (coalescing) until it has been quiet
    -- for the online window, unless acks or a close withdraw it first
    AND (m.last_seen_at IS NULL OR m.last_seen_at <= sqlc.arg(online_since)::timestamptz)
    -- one delivery a part at a time: while one is being sent (and retried), newer work
    -- gathers in the pending wake, sent once that delivery settles. Taken as well, a
    -- stalling receiver got a delivery per wake, each holding a delivery worker.
    AND NOT EXISTS (SELECT 1 FROM wake s WHERE s.project_id = sqlc.arg(project_id)::uuid
                    AND s.member_id = w.member_id AND s.status = 'sending')
    -- a host's part, or a guest's under an active agreement (tenancy.Scope.Admitted)
    AND (m.org_id = (SELECT p.host_org_id FROM project p WHERE p.id = sqlc.arg(project_id)::uuid)
         OR EXISTS (SELECT 1 FROM agreement ag WHERE ag.project_id = sqlc.arg(project_id)::uuid
                    AND ag.guest_org_id = m.org_id AND ag.status = 'active'))
    AND (w.urgent OR w.charged_at IS NOT NULL
         OR (SELECT count(*) FROM wake x WHERE x.project_id = sqlc.arg(project_id)::uuid AND x.member_id = w.member_id
             AND x.charged_at > sqlc.arg(since)::timestamptz)
            < (SELECT rr_wake_budget(p.settings) FROM project p WHERE p.id = sqlc.arg(project_id)::uuid))
  ORDER BY w.created_at
  LIMIT sqlc.arg(max_rows)::integer
  FOR UPDATE OF w SKIP LOCKED
)
UPDATE wake w SET status = 'sending', charged_at = COALESCE(w.charged_at, sqlc.arg(now)::timestamptz),
  updated_at = sqlc.arg(now)::timestamptz
FROM c WHERE w.project_id = sqlc.arg(project_id)::uuid AND w.project_id = c.project_id AND w.id = c.id
RETURNING w.project_id, w.id;

-- name: WakeGetForDelivery :one
-- The wake a delivery job sends; its webhook is read apart (WakeTargetGet): wake_target is
-- sharded by organisation, wake by project, and Citus joins only within one group.
-- admitted is read at every attempt, as when the wake was taken (WakeTakeWebhook): a
-- retry after the guest's agreement was revoked must not post the wake.
SELECT w.project_id, w.id, w.member_id, w.agent_id, w.part, w.status, w.urgent, w.sources,
  w.count, w.thread_counts, w.other_count, w.last_item_id, w.created_at, w.attempts,
  m.parked_until, a.org_id AS agent_org_id, a.slug AS agent_slug, o.slug AS org_slug, p.name AS project_name,
  (m.org_id = p.host_org_id OR EXISTS (SELECT 1 FROM agreement ag WHERE ag.project_id = sqlc.arg(project_id)
     AND ag.guest_org_id = m.org_id AND ag.status = 'active'))::boolean AS admitted
FROM wake w
JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
JOIN agent a ON a.id = w.agent_id
JOIN organisation o ON o.id = a.org_id
JOIN project p ON p.id = w.project_id
WHERE w.project_id = sqlc.arg(project_id) AND w.id = sqlc.arg(id);

-- name: WakeTargetGet :one
-- An agent's webhook, for a delivery.
SELECT url, secret_enc FROM wake_target WHERE org_id = sqlc.arg(org_id) AND agent_id = sqlc.arg(agent_id);

-- name: WakeFinishSend :execrows
-- The webhook's outcome: delivered, dead, back to pending (parked meanwhile) or still sending.
UPDATE wake SET status = sqlc.arg(status)::text, attempts = attempts + sqlc.arg(attempted)::integer,
  last_error = sqlc.narg(last_error),
  delivered_at = CASE WHEN sqlc.arg(status)::text = 'delivered' THEN sqlc.arg(now)::timestamptz END,
  updated_at = sqlc.arg(now)::timestamptz
WHERE project_id = sqlc.arg(project_id) AND id = sqlc.arg(id) AND status = 'sending';

-- name: WakeMergeSendingIntoPending :execrows
-- A sending wake going back to pending (its part was parked, its webhook removed, its
-- agreement paused meanwhile) while newer work opened another pending wake for the part:
-- its items join that wake (counts and thread shares added, sources and urgency joined,
-- the earlier start kept, so an ack recounts from it) instead of being dropped. The
-- caller cancels the sending wake first, in the same transaction (which locks it and
-- proves it was still sending), so nothing changes it between its reading and its end.
UPDATE wake p SET
  count = p.count + o.count,
  -- At most max_threads threads named, as in WakeEventFold.
  thread_counts = (SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb)
    FROM (SELECT k, n, row_number() OVER (ORDER BY named DESC, n DESC, k) AS r
          FROM (SELECT k, sum(v::integer) AS n, bool_or(named) AS named
                FROM (SELECT key AS k, value AS v, true AS named FROM jsonb_each_text(p.thread_counts)
                      UNION ALL SELECT key, value, false FROM jsonb_each_text(o.thread_counts)) kv
                GROUP BY k) g) s
    WHERE r <= sqlc.arg(max_threads)::integer),
  other_count = p.other_count + o.other_count + (SELECT coalesce(sum(n), 0)::integer
    FROM (SELECT k, n, row_number() OVER (ORDER BY named DESC, n DESC, k) AS r
          FROM (SELECT k, sum(v::integer) AS n, bool_or(named) AS named
                FROM (SELECT key AS k, value AS v, true AS named FROM jsonb_each_text(p.thread_counts)
                      UNION ALL SELECT key, value, false FROM jsonb_each_text(o.thread_counts)) kv
                GROUP BY k) g) s
    WHERE r > sqlc.arg(max_threads)::integer),
  sources = ARRAY(SELECT DISTINCT x FROM unnest(p.sources || o.sources) AS x ORDER BY x),
  urgent = p.urgent OR o.urgent,
  created_at = least(p.created_at, o.created_at),
  updated_at = sqlc.arg(now)::timestamptz
FROM wake o
WHERE o.project_id = sqlc.arg(project_id) AND o.id = sqlc.arg(id)
  AND p.project_id = sqlc.arg(project_id) AND p.member_id = o.member_id AND p.status = 'pending';

-- name: WakeListStaleSending :many
-- Wakes left sending longer than any live delivery leaves one (wake.SendingStaleAfter):
-- their job ended without settling them (its replica was killed on the last attempt, or
-- the last write failed). wake_sending_idx; on Citus every shard is read.
SELECT project_id, id FROM wake
WHERE status = 'sending' AND updated_at < sqlc.arg(before)::timestamptz
ORDER BY updated_at
LIMIT sqlc.arg(max_rows)::integer;

-- name: WakeListAgentProjects :many
-- The pager's candidates: the agent's projects with wake events to fold or wakes to claim
-- (pending, or claimed with the lease run out), the oldest first. The pager's request
-- names no project, so this reads every shard (wake_agent_idx, wake_event_agent_idx),
-- without locks; the fold and the claim then run per project (router statements).
SELECT c.project_id FROM (
  SELECT w.project_id, min(w.created_at) AS oldest FROM wake w
  WHERE w.agent_id = sqlc.arg(agent_id)
    AND (w.status = 'pending' OR (w.status = 'claimed' AND w.lease_until <= sqlc.arg(now)::timestamptz))
  GROUP BY w.project_id
  UNION ALL
  SELECT e.project_id, min(e.created_at) FROM wake_event e WHERE e.agent_id = sqlc.arg(agent_id)
  GROUP BY e.project_id
) c
GROUP BY c.project_id
ORDER BY min(c.oldest), c.project_id
LIMIT sqlc.arg(max_rows)::integer;

-- name: WakeClaim :one
-- The pager: the agent's oldest deliverable wake in a project (not parked, within budget
-- or urgent, the agreement active for a guest's part: one raised before a revocation
-- waits, like a parked one), or one whose lease ran out (replay, not charged again).
-- Every subquery names the project itself: a router query on Citus.
WITH c AS (
  SELECT w.project_id, w.id
  FROM wake w
  JOIN membership m ON m.project_id = w.project_id AND m.id = w.member_id
  WHERE w.project_id = sqlc.arg(project_id)::uuid AND w.agent_id = sqlc.arg(agent_id)
    AND (w.status = 'pending' OR (w.status = 'claimed' AND w.lease_until <= sqlc.arg(now)::timestamptz))
    AND m.parked_until IS NULL -- parked until the sweep's first tick past resetAt clears it
    -- online: it sees the work itself; the wake waits (coalescing) until it has been quiet
    -- for the online window, unless acks or a close withdraw it first
    AND (m.last_seen_at IS NULL OR m.last_seen_at <= sqlc.arg(online_since)::timestamptz)
    -- a host's part, or a guest's under an active agreement (tenancy.Scope.Admitted)
    AND (m.org_id = (SELECT p.host_org_id FROM project p WHERE p.id = sqlc.arg(project_id)::uuid)
         OR EXISTS (SELECT 1 FROM agreement ag WHERE ag.project_id = sqlc.arg(project_id)::uuid
                    AND ag.guest_org_id = m.org_id AND ag.status = 'active'))
    AND (w.urgent OR w.charged_at IS NOT NULL
         OR (SELECT count(*) FROM wake x WHERE x.project_id = sqlc.arg(project_id)::uuid AND x.member_id = w.member_id
             AND x.charged_at > sqlc.arg(since)::timestamptz)
            < (SELECT rr_wake_budget(p.settings) FROM project p WHERE p.id = sqlc.arg(project_id)::uuid))
  ORDER BY w.created_at
  LIMIT 1
  FOR UPDATE OF w SKIP LOCKED
)
UPDATE wake w SET status = 'claimed', lease_until = sqlc.arg(lease_until)::timestamptz,
  charged_at = COALESCE(w.charged_at, sqlc.arg(now)::timestamptz),
  attempts = w.attempts + 1, updated_at = sqlc.arg(now)::timestamptz
FROM c WHERE w.project_id = sqlc.arg(project_id)::uuid AND w.project_id = c.project_id AND w.id = c.id
RETURNING w.project_id, w.id, w.part, w.urgent, w.sources, w.count, w.thread_counts,
  w.other_count, w.last_item_id, w.created_at, w.attempts, w.lease_until,
  (SELECT p.name FROM project p WHERE p.id = sqlc.arg(project_id)::uuid)::text AS project_name;

-- name: WakeAck :one
UPDATE wake SET status = 'delivered', delivered_at = sqlc.arg(now)::timestamptz, lease_until = NULL,
  updated_at = sqlc.arg(now)::timestamptz
WHERE agent_id = sqlc.arg(agent_id) AND id = sqlc.arg(id) AND status = 'claimed'
RETURNING project_id;

-- name: WakeGetAgentStatus :one
SELECT status FROM wake WHERE agent_id = sqlc.arg(agent_id) AND id = sqlc.arg(id);

-- name: AgentGetByRef :one
SELECT a.id, a.org_id, a.kind FROM agent a JOIN organisation o ON o.id = a.org_id
WHERE o.slug = sqlc.arg(org_slug) AND a.slug = sqlc.arg(agent_slug);

-- name: WakeTargetUpsert :exec
INSERT INTO wake_target (org_id, agent_id, url, secret_enc, created_at, updated_at)
VALUES (sqlc.arg(org_id), sqlc.arg(agent_id), sqlc.arg(url), sqlc.arg(secret_enc), now(), now())
ON CONFLICT (org_id, agent_id) DO UPDATE SET url = EXCLUDED.url, secret_enc = EXCLUDED.secret_enc,
  updated_at = excluded.updated_at;

-- name: WakeTargetDelete :execrows
DELETE FROM wake_target WHERE org_id = sqlc.arg(org_id) AND agent_id = sqlc.arg(agent_id);

-- name: WakeTargetList :many
SELECT o.slug AS org_slug, a.slug AS agent_slug, t.url, t.created_at, t.updated_at
FROM wake_target t JOIN agent a ON a.id = t.agent_id JOIN organisation o ON o.id = t.org_id
ORDER BY o.slug, a.slug;

-- name: WakeList :many
-- For people: wakes by status (dead letters first of all), newest first.
SELECT w.project_id, p.slug AS project_slug, w.id, w.part, o.slug AS org_slug, a.slug AS agent_slug,
  w.status, w.urgent, w.sources, w.count, w.attempts, w.last_error, w.created_at, w.updated_at,
  w.delivered_at
FROM wake w
JOIN project p ON p.id = w.project_id
JOIN agent a ON a.id = w.agent_id
JOIN organisation o ON o.id = a.org_id
WHERE (sqlc.narg(status)::text IS NULL OR w.status = sqlc.narg(status)::text)
ORDER BY w.updated_at DESC
LIMIT sqlc.arg(max_rows)::integer;

-- name: WakeRetryDead :execrows
-- A person sends a dead letter again: it becomes pending (and is re-dispatched), unless
-- nothing is left in it (its threads were closed since: WakeCancelThread).
UPDATE wake SET status = 'pending', attempts = 0, last_error = NULL, updated_at = now()
WHERE wake.project_id = sqlc.arg(project_id) AND wake.id = sqlc.arg(id) AND wake.status = 'dead' AND wake.count > 0
  AND NOT EXISTS (SELECT 1 FROM wake o WHERE o.project_id = wake.project_id
                  AND o.member_id = wake.member_id AND o.status = 'pending');

-- name: WakeDeleteOld :execrows
-- The daily clean-up, in batches (each within the statement timeout).
DELETE FROM wake WHERE (project_id, id) IN (
  SELECT w.project_id, w.id FROM wake w
  WHERE w.status IN ('delivered', 'canceled') AND w.updated_at < sqlc.arg(before)::timestamptz
  LIMIT sqlc.arg(max_rows)::integer);

-- name: WakeEventWithdraw :exec
-- Acking a message withdraws it from the part's wakes not delivered yet, in three
-- statements sent in one round trip (wake.Service.Withdraw): its event, if not folded yet,
-- goes here; the part's pending wake is locked (WakeLockPending); then its share for the
-- message's thread is recounted (WakeWithdrawAcked). The event comes first, as in a fold
-- (events, then the wake), so the two never wait on each other in opposite orders.
DELETE FROM wake_event e
WHERE e.project_id = sqlc.arg(project_id) AND e.member_id = sqlc.arg(member_id) AND e.item_id = sqlc.arg(message_id)::uuid;

-- name: WakeLockPending :exec
-- The recount that follows starts once this lock is held, so its snapshot holds every
-- fold committed before it (their messages included), and no fold changes the wake
-- until the ack commits: a recount from an older snapshot applied to a newer row would
-- drop a share folded meanwhile, or leave count unequal to the shares.
SELECT 1 FROM wake WHERE project_id = sqlc.arg(project_id) AND member_id = sqlc.arg(member_id) AND status = 'pending'
FOR UPDATE;

-- name: WakeWithdrawAcked :exec
-- The pending wake's share for the acked message's thread is recounted from what is still
-- unread there since the wake began (never raised, so acking twice changes nothing), and a
-- wake left with nothing is canceled. thread_key is the thread's id as text (the key of
-- thread_counts), passed as such, and the new share is made into jsonb in the CTE: Citus
-- refuses a function that is not immutable (the uuid to text cast, to_jsonb) inside CASE.
-- The wake stays urgent only while an urgent message of the part's is still unread since
-- it began, or while it holds items that are not messages (a room's task, whose urgency
-- this cannot recount): acking the urgent message must not leave the rest passing the
-- budget on its account.
WITH w AS (
  SELECT x.project_id, x.id, x.had, least(x.unread, x.had) AS keep, to_jsonb(least(x.unread, x.had)) AS keep_json,
    x.urgent_left
  FROM (
    SELECT wk.project_id, wk.id, COALESCE((wk.thread_counts->>sqlc.arg(thread_key)::text)::integer, 0) AS had,
      (SELECT count(*)::integer FROM delivery d
       JOIN message msg ON msg.project_id = d.project_id AND msg.id = d.message_id
       WHERE d.project_id = sqlc.arg(project_id) AND msg.project_id = sqlc.arg(project_id) AND d.member_id = wk.member_id AND d.thread_id = sqlc.arg(thread_id)::uuid
         AND d.read_at IS NULL AND d.open AND msg.created_at >= wk.created_at) AS unread,
      (wk.other_count > 0 OR EXISTS (SELECT 1 FROM delivery d
       JOIN message msg ON msg.project_id = d.project_id AND msg.id = d.message_id
       WHERE d.project_id = sqlc.arg(project_id) AND msg.project_id = sqlc.arg(project_id) AND d.member_id = wk.member_id
         AND d.read_at IS NULL AND d.open AND msg.urgent AND msg.created_at >= wk.created_at)) AS urgent_left
    FROM wake wk
    WHERE wk.project_id = sqlc.arg(project_id) AND wk.member_id = sqlc.arg(member_id) AND wk.status = 'pending'
      AND jsonb_exists(wk.thread_counts, sqlc.arg(thread_key)::text)
  ) x
)
UPDATE wake SET
  thread_counts = CASE WHEN w.keep = 0 THEN wake.thread_counts - sqlc.arg(thread_key)::text
    ELSE jsonb_set(wake.thread_counts, ARRAY[sqlc.arg(thread_key)::text], w.keep_json) END,
  count = wake.count - w.had + w.keep,
  urgent = wake.urgent AND w.urgent_left,
  status = CASE WHEN wake.count - w.had + w.keep <= 0 THEN 'canceled' ELSE wake.status END,
  updated_at = sqlc.arg(now)::timestamptz
FROM w WHERE wake.project_id = sqlc.arg(project_id) AND wake.project_id = w.project_id AND wake.id = w.id
  AND wake.status = 'pending';
