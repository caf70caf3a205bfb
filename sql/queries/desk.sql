-- The desk toolset (internal/desk, docs/desk.md). Every statement names its workspace
-- (org_id) and runs in that workspace's tenant, except the token lookup, which runs under
-- app.lookup before the workspace is known, and the admin statements (owner's pool).
--
-- Visibility of an inbox to a member: owners and admins (sees_all) see every inbox; a
-- member sees an unrestricted inbox and a restricted one that lists them.

-- name: DeskTokenRows :many
-- The live tokens with a public id; hashes are compared in Go.
SELECT org_id, id, user_id, secret_hash, scopes, expires_at
FROM desk_token
WHERE token_id = sqlc.arg(token_id)::text AND revoked_at IS NULL;

-- name: DeskMemberGrant :one
-- What the workspace says about a verified token's holder: their role, whether they are
-- deactivated, and the workspace's plan, timezone and name (the dashboard's desk pages
-- name it). No row: the person is no longer a member.
SELECT m.role, (m.deactivated_at IS NOT NULL)::boolean AS deactivated, o.plan, o.timezone, o.name
FROM org_member m JOIN organisation o ON o.id = m.org_id
WHERE m.org_id = sqlc.arg(org_id) AND m.user_id = sqlc.arg(user_id);

-- name: DeskRateHit :many
-- Counts one call in the first subject's fixed window (a new window starts the count
-- over) and, only while that count is within first_max, in the second's: a member's calls
-- past its own limit are refused without spending its workspace's window, so one runaway
-- client cannot lock its team out. Returns the counts (the second's row only when it was
-- counted), in one statement; the first row is locked before the second.
WITH f AS (
  INSERT INTO desk_rate AS r (org_id, subject, window_start, hits)
  VALUES (sqlc.arg(org_id)::uuid, sqlc.arg(first)::text, sqlc.arg(window_start)::timestamptz, 1)
  ON CONFLICT (org_id, subject) DO UPDATE SET
    hits = CASE WHEN r.window_start >= EXCLUDED.window_start THEN r.hits + 1 ELSE 1 END,
    window_start = greatest(r.window_start, EXCLUDED.window_start)
  RETURNING subject, hits, window_start
), s AS (
  INSERT INTO desk_rate AS r (org_id, subject, window_start, hits)
  SELECT sqlc.arg(org_id)::uuid, sqlc.arg(second)::text, sqlc.arg(window_start)::timestamptz, 1
  FROM f WHERE f.hits <= sqlc.arg(first_max)::integer
  ON CONFLICT (org_id, subject) DO UPDATE SET
    hits = CASE WHEN r.window_start >= EXCLUDED.window_start THEN r.hits + 1 ELSE 1 END,
    window_start = greatest(r.window_start, EXCLUDED.window_start)
  RETURNING subject, hits, window_start
)
SELECT subject, hits, window_start FROM f
UNION ALL
SELECT subject, hits, window_start FROM s;

-- name: DeskCounterTake :one
-- Reserves n numbers of a kind in a workspace; returns the last of them.
INSERT INTO desk_counter AS c (org_id, kind, last) VALUES (sqlc.arg(org_id), sqlc.arg(kind), sqlc.arg(n)::bigint)
ON CONFLICT (org_id, kind) DO UPDATE SET last = c.last + EXCLUDED.last
RETURNING last;

-- name: DeskInboxList :many
-- A page of the inboxes the member sees, by name then id, after the keyset (after_name,
-- after_id), with each inbox's open conversations counted. Names compare in the
-- language-neutral ICU order ("billing", "Support", "Zeta", "Élan" as a person reads
-- them), not the database's (byte order under C.UTF-8: "Support" before "billing"), so
-- the order is the same on every deployment. The subqueries name the
-- organisation by value, not through i.org_id, so Citus routes them to the one shard.
SELECT i.id, i.name,
  (SELECT count(*) FROM desk_conversation c
   WHERE c.org_id = sqlc.arg(org_id) AND c.inbox_id = i.id AND c.status = 'open')::bigint AS open_count
FROM desk_inbox i
WHERE i.org_id = sqlc.arg(org_id)
  AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
        SELECT 1 FROM desk_inbox_member im
        WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id)))
  AND (sqlc.narg(after_name)::text IS NULL
       OR (i.name COLLATE "und-x-icu", i.id) > (sqlc.narg(after_name)::text COLLATE "und-x-icu", sqlc.arg(after_id)::bigint))
ORDER BY i.name COLLATE "und-x-icu", i.id
LIMIT sqlc.arg(lim);

-- name: DeskInboxVisible :one
-- Whether an inbox exists and the member sees it (false for both "absent" and "hidden").
SELECT EXISTS (
  SELECT 1 FROM desk_inbox i
  WHERE i.org_id = sqlc.arg(org_id) AND i.id = sqlc.arg(id)
    AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
          SELECT 1 FROM desk_inbox_member im
          WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id)))
)::bool AS visible;

-- name: DeskConversationSearch :many
-- A page of the conversations whose subject and public messages hold every word of the
-- query, in inboxes the member sees, filters AND-ed, by updated_at desc then id asc, after
-- the keyset (after_updated, after_id).
--
-- Three plans, one answer: each applies the same filters, order and keyset, and a later
-- one runs only when the earlier could not decide (their conditions are one-time
-- filters). PostgreSQL cannot estimate a prefix tsquery's matches, so the statement
-- decides by what it finds, `cap` rows of work at a time:
-- 1. head_page: the first `cap` conversations in the page's order, tested one by one
--    until a page is found. When they hold a page of visible matches (a common term), or
--    are all there is, that is the page.
-- 2. cand: otherwise the full-text index finds the matches (rr_desk_search_candidates,
--    migration 000025: under RLS the request role cannot use the index), at most cap + 1;
--    at most `cap` (a rare term) are sorted and the page cut from them.
-- 3. Otherwise (more than `cap` matches, fewer than a page in the first `cap` rows) the
--    walk by updated_at goes on until it has a page; desk_matches keeps the planner on
--    that walk (a plain @@ is estimated so rare that it would sort every match instead).
-- On Citus the caller passes the candidates, read first by DeskSearchCandidates: this
-- statement is a router query, sent whole to the workspace's shard, where the function's
-- own query on desk_conversation would be a distributed query run from a shard, which
-- Citus refuses. NULL (plain PostgreSQL) calls the function here, in the one round trip.
-- Every desk_inbox_member subquery names the organisation by value (as DeskInboxList):
-- correlated through i.org_id, Citus refused the statement for a member who does not see
-- every inbox ("correlated subqueries are not supported when the FROM clause contains a
-- CTE or subquery").
WITH head_page AS MATERIALIZED (
  SELECT h.id, h.updated_at
  FROM (SELECT c.id, c.inbox_id, c.updated_at, c.search FROM desk_conversation c
        WHERE c.org_id = sqlc.arg(org_id)
          AND (sqlc.narg(status)::text IS NULL OR c.status = sqlc.narg(status)::text)
          AND (sqlc.narg(inbox_id)::bigint IS NULL OR c.inbox_id = sqlc.narg(inbox_id)::bigint)
          AND (sqlc.narg(after_updated)::timestamptz IS NULL
               OR c.updated_at < sqlc.narg(after_updated)::timestamptz
               OR (c.updated_at = sqlc.narg(after_updated)::timestamptz AND c.id > sqlc.arg(after_id)::bigint))
        ORDER BY c.updated_at DESC, c.id
        LIMIT sqlc.arg(cap)::int) h
  -- Visibility as a condition, not a join, keeps the rows in order: the LIMIT stops
  -- reading as soon as it has a page.
  WHERE h.search @@ desk_query(sqlc.arg(query)::text)
    AND EXISTS (SELECT 1 FROM desk_inbox i WHERE i.org_id = sqlc.arg(org_id) AND i.id = h.inbox_id
      AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
            SELECT 1 FROM desk_inbox_member im
            WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id))))
  ORDER BY h.updated_at DESC, h.id
  LIMIT sqlc.arg(lim)
), walked AS MATERIALIZED (
  -- The second count runs only when the first does not decide.
  SELECT (SELECT count(*) FROM head_page) >= sqlc.arg(lim)
    OR (SELECT count(*) FROM (SELECT 1 FROM desk_conversation c
        WHERE c.org_id = sqlc.arg(org_id)
          AND (sqlc.narg(status)::text IS NULL OR c.status = sqlc.narg(status)::text)
          AND (sqlc.narg(inbox_id)::bigint IS NULL OR c.inbox_id = sqlc.narg(inbox_id)::bigint)
          AND (sqlc.narg(after_updated)::timestamptz IS NULL
               OR c.updated_at < sqlc.narg(after_updated)::timestamptz
               OR (c.updated_at = sqlc.narg(after_updated)::timestamptz AND c.id > sqlc.arg(after_id)::bigint))
        ORDER BY c.updated_at DESC, c.id
        LIMIT sqlc.arg(cap)::int) n) < sqlc.arg(cap)::int AS done
), cand AS MATERIALIZED (
  SELECT s.id::bigint AS id FROM (SELECT rr_desk_search_candidates(sqlc.arg(query)::text, sqlc.narg(status)::text,
    sqlc.narg(inbox_id)::bigint, sqlc.narg(after_updated)::timestamptz, sqlc.arg(after_id)::bigint, sqlc.arg(cap)::int) AS id) s
  WHERE sqlc.narg(candidates)::bigint[] IS NULL AND NOT (SELECT w.done FROM walked w)
  UNION ALL
  SELECT u.id FROM unnest(sqlc.narg(candidates)::bigint[]) u(id)
  WHERE NOT (SELECT w.done FROM walked w)
), few AS MATERIALIZED (
  SELECT count(*) <= sqlc.arg(cap)::int AS few FROM cand
)
SELECT p.id, p.subject, p.status, p.inbox_id, p.assignee_user_id, p.customer_email, p.customer_name,
  p.created_at, p.updated_at
FROM (
  (SELECT c.id, c.subject, c.status, c.inbox_id, c.assignee_user_id, c.customer_email, c.customer_name,
     c.created_at, c.updated_at
   FROM head_page hp JOIN desk_conversation c ON c.org_id = sqlc.arg(org_id) AND c.id = hp.id
   WHERE (SELECT w.done FROM walked w))
  UNION ALL
  (SELECT c.id, c.subject, c.status, c.inbox_id, c.assignee_user_id, c.customer_email, c.customer_name,
     c.created_at, c.updated_at
   FROM cand JOIN desk_conversation c ON c.org_id = sqlc.arg(org_id) AND c.id = cand.id
     JOIN desk_inbox i ON i.org_id = c.org_id AND i.id = c.inbox_id
   WHERE NOT (SELECT w.done FROM walked w) AND (SELECT f.few FROM few f)
     AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
           SELECT 1 FROM desk_inbox_member im
           WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id)))
   ORDER BY c.updated_at DESC, c.id
   LIMIT sqlc.arg(lim))
  UNION ALL
  (SELECT c.id, c.subject, c.status, c.inbox_id, c.assignee_user_id, c.customer_email, c.customer_name,
     c.created_at, c.updated_at
   FROM desk_conversation c JOIN desk_inbox i ON i.org_id = c.org_id AND i.id = c.inbox_id
   WHERE NOT (SELECT w.done FROM walked w) AND NOT (SELECT f.few FROM few f)
     AND c.org_id = sqlc.arg(org_id)
     AND desk_matches(c.search, desk_query(sqlc.arg(query)::text))
     AND (sqlc.narg(status)::text IS NULL OR c.status = sqlc.narg(status)::text)
     AND (sqlc.narg(inbox_id)::bigint IS NULL OR c.inbox_id = sqlc.narg(inbox_id)::bigint)
     AND (sqlc.narg(after_updated)::timestamptz IS NULL
          OR c.updated_at < sqlc.narg(after_updated)::timestamptz
          OR (c.updated_at = sqlc.narg(after_updated)::timestamptz AND c.id > sqlc.arg(after_id)::bigint))
     AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
           SELECT 1 FROM desk_inbox_member im
           WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id)))
   ORDER BY c.updated_at DESC, c.id
   LIMIT sqlc.arg(lim))
) p
ORDER BY p.updated_at DESC, p.id;

-- name: DeskSearchCandidates :many
-- DeskConversationSearch's full-text candidates as a statement of its own (Citus): the
-- coordinator runs the function, whose query it routes to the workspace's shard group.
SELECT c.id::bigint AS id
FROM rr_desk_search_candidates(sqlc.arg(query)::text, sqlc.narg(status)::text, sqlc.narg(inbox_id)::bigint,
  sqlc.narg(after_updated)::timestamptz, sqlc.arg(after_id)::bigint, sqlc.arg(cap)::int) c;

-- name: DeskConversationGet :one
-- One conversation, when the member sees its inbox (no row otherwise, as when absent).
SELECT c.id, c.subject, c.status, c.inbox_id, c.assignee_user_id, c.customer_email, c.customer_name,
  c.created_at, c.updated_at, c.resolved_at, c.first_reply_at
FROM desk_conversation c JOIN desk_inbox i ON i.org_id = c.org_id AND i.id = c.inbox_id
WHERE c.org_id = sqlc.arg(org_id) AND c.id = sqlc.arg(id)
  AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
        SELECT 1 FROM desk_inbox_member im
        WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id)));

-- name: DeskMessagePage :many
-- A page of a conversation's messages, oldest first, notes only when asked for.
SELECT m.id, m.type, m.body, m.author_user_id, m.attachments, m.created_at
FROM desk_message m
WHERE m.org_id = sqlc.arg(org_id) AND m.conversation_id = sqlc.arg(conversation_id)
  AND (sqlc.arg(include_notes)::bool OR m.type <> 'note')
  AND (sqlc.narg(after_created)::timestamptz IS NULL
       OR (m.created_at, m.id) > (sqlc.narg(after_created)::timestamptz, sqlc.arg(after_id)::bigint))
ORDER BY m.created_at, m.id
LIMIT sqlc.arg(lim);

-- name: DeskSavedReplyFind :many
-- A page of the saved replies whose title or body holds every word of the query, by title
-- (in ICU order, as DeskInboxList's names) then id, after the keyset (after_title, after_id).
SELECT r.id, r.title, r.body
FROM desk_saved_reply r
WHERE r.org_id = sqlc.arg(org_id)
  AND to_tsvector('desk_words', r.title || ' ' || r.body) @@ desk_query(sqlc.arg(query)::text)
  AND (sqlc.narg(after_title)::text IS NULL
       OR (r.title COLLATE "und-x-icu", r.id) > (sqlc.narg(after_title)::text COLLATE "und-x-icu", sqlc.arg(after_id)::bigint))
ORDER BY r.title COLLATE "und-x-icu", r.id
LIMIT sqlc.arg(lim);

-- name: DeskReport :many
-- One row per day of [start_date, end_date] in the workspace's timezone: how many
-- observations of the metric fall on that day and their mean in seconds. An observation
-- belongs to the day its event happened there: a conversation's creation (volume), its
-- first public reply by a member (first response), its first resolution (resolution time:
-- first_resolved_at, which a reopening leaves, so past days stay as reported).
-- A day is the local calendar day, 23 or 25 hours long across a DST change. The days'
-- starts are computed once (edges: each day's local midnight as an instant, then the
-- end's), and an event's day is found by a binary search of its time among them
-- (width_bucket), not by converting every event to local time and sorting by it.
WITH days AS (
  SELECT d::date AS day, (row_number() OVER (ORDER BY d))::int AS n
  FROM generate_series(sqlc.arg(start_date)::text::date, sqlc.arg(end_date)::text::date, interval '1 day') d
), edges AS (
  SELECT array_agg(days.day::timestamp AT TIME ZONE sqlc.arg(tz)::text ORDER BY days.day)
    || ((sqlc.arg(end_date)::text::date + 1)::timestamp AT TIME ZONE sqlc.arg(tz)::text) AS e
  FROM days
), bounds AS (
  SELECT e.e AS e, e.e[1] AS lo, e.e[array_length(e.e, 1)] AS hi FROM edges e
), obs AS (
  SELECT width_bucket(c.created_at, b.e) AS n, 0::float8 AS secs
  FROM desk_conversation c, bounds b
  WHERE sqlc.arg(metric)::text = 'conversation_volume' AND c.org_id = sqlc.arg(org_id)
    AND c.created_at >= b.lo AND c.created_at < b.hi
    AND (sqlc.narg(inbox_id)::bigint IS NULL OR c.inbox_id = sqlc.narg(inbox_id)::bigint)
  UNION ALL
  SELECT width_bucket(c.first_reply_at, b.e), extract(epoch FROM c.first_reply_at - c.created_at)::float8
  FROM desk_conversation c, bounds b
  WHERE sqlc.arg(metric)::text = 'first_response_time' AND c.org_id = sqlc.arg(org_id)
    AND c.first_reply_at >= b.lo AND c.first_reply_at < b.hi
    AND (sqlc.narg(inbox_id)::bigint IS NULL OR c.inbox_id = sqlc.narg(inbox_id)::bigint)
  UNION ALL
  SELECT width_bucket(c.first_resolved_at, b.e), extract(epoch FROM c.first_resolved_at - c.created_at)::float8
  FROM desk_conversation c, bounds b
  WHERE sqlc.arg(metric)::text = 'resolution_time' AND c.org_id = sqlc.arg(org_id)
    AND c.first_resolved_at >= b.lo AND c.first_resolved_at < b.hi
    AND (sqlc.narg(inbox_id)::bigint IS NULL OR c.inbox_id = sqlc.narg(inbox_id)::bigint)
), per_day AS (
  SELECT o.n, count(*) AS observations, avg(o.secs) AS mean_seconds FROM obs o GROUP BY o.n
)
SELECT to_char(d.day, 'YYYY-MM-DD')::text AS day, coalesce(p.observations, 0)::bigint AS observations,
  coalesce(p.mean_seconds, 0)::float8 AS mean_seconds
FROM days d LEFT JOIN per_day p ON p.n = d.n
ORDER BY d.day;

-- name: DeskNoteClaim :one
-- Adds a private note under an idempotency key, in one statement: the key is claimed
-- (inserted, or taken over when older than the retention) and the note inserted with the
-- message id given; a live key claims nothing and inserts nothing (0). A concurrent call
-- with the same key waits on the key's primary key until this one commits, then claims
-- nothing.
WITH claimed AS (
  INSERT INTO desk_note_key AS k (org_id, user_id, key, fingerprint, message_id, created_at)
  VALUES (sqlc.arg(org_id), sqlc.arg(user_id), sqlc.arg(key), sqlc.arg(fingerprint), sqlc.arg(message_id), sqlc.arg(created_at))
  ON CONFLICT (org_id, user_id, key) DO UPDATE SET
    fingerprint = EXCLUDED.fingerprint, message_id = EXCLUDED.message_id, created_at = EXCLUDED.created_at
  WHERE k.created_at <= sqlc.arg(expired_before)::timestamptz
  RETURNING k.message_id
), note AS (
  INSERT INTO desk_message (org_id, id, conversation_id, type, body, author_user_id, created_at)
  SELECT sqlc.arg(org_id), claimed.message_id, sqlc.arg(conversation_id), 'note', sqlc.arg(body), sqlc.arg(user_id), sqlc.arg(created_at)
  FROM claimed
  RETURNING id
)
SELECT count(*)::bigint AS created FROM note;

-- name: DeskNoteKeyGet :one
-- The live record of a note key and its note.
SELECT k.fingerprint, m.id AS message_id, m.conversation_id, m.body
FROM desk_note_key k JOIN desk_message m ON m.org_id = k.org_id AND m.id = k.message_id
WHERE k.org_id = sqlc.arg(org_id) AND k.user_id = sqlc.arg(user_id) AND k.key = sqlc.arg(key)
  AND k.created_at > sqlc.arg(expired_before)::timestamptz;

-- name: DeskNoteKeyDeleteExpired :execrows
-- The periodic clean-up, across workspaces (owner's pool), a bounded batch per statement.
DELETE FROM desk_note_key k
USING (SELECT o.org_id, o.user_id, o.key FROM desk_note_key o
       WHERE o.created_at <= sqlc.arg(expired_before) ORDER BY o.created_at LIMIT sqlc.arg(batch)) old
WHERE k.org_id = old.org_id AND k.user_id = old.user_id AND k.key = old.key;

-- Writing a workspace's data: admin apply, the ingest API, CSV import, the demo seed.

-- name: DeskInboxGetBySlug :one
SELECT id FROM desk_inbox WHERE org_id = sqlc.arg(org_id) AND slug = sqlc.arg(slug);

-- name: DeskInboxUpsert :one
-- id is used only when the slug is new. A null restricted, or forwarding_given false,
-- leaves an existing inbox's setting as it is (a new one: open, no address).
INSERT INTO desk_inbox AS i (org_id, id, slug, name, restricted, forwarding_address, connection_secret)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(slug), sqlc.arg(name), coalesce(sqlc.narg(restricted)::boolean, false),
        sqlc.narg(forwarding_address), sqlc.narg(connection_secret))
ON CONFLICT (org_id, slug) DO UPDATE SET name = EXCLUDED.name,
  restricted = coalesce(sqlc.narg(restricted)::boolean, i.restricted),
  forwarding_address = CASE WHEN sqlc.arg(forwarding_given)::boolean THEN EXCLUDED.forwarding_address ELSE i.forwarding_address END,
  connection_secret = coalesce(EXCLUDED.connection_secret, i.connection_secret)
RETURNING id;

-- name: DeskInboxMemberDeleteExcept :exec
-- Replacing the members an inbox is restricted to, first step: those not listed go. Two
-- statements, because Citus has no distributed plan for an INSERT under a DELETE's CTE.
DELETE FROM desk_inbox_member
WHERE org_id = sqlc.arg(org_id) AND inbox_id = sqlc.arg(inbox_id) AND NOT (user_id = ANY (sqlc.arg(user_ids)::uuid[]));

-- name: DeskInboxMemberInsert :exec
-- The second step: the listed members, those already there kept (ON CONFLICT also makes
-- Citus upsert on the worker, under the policies, rather than COPY into the shard).
INSERT INTO desk_inbox_member (org_id, inbox_id, user_id)
SELECT sqlc.arg(org_id), sqlc.arg(inbox_id), u FROM unnest(sqlc.arg(user_ids)::uuid[]) u
ON CONFLICT DO NOTHING;

-- name: DeskSavedReplyGetBySlug :one
SELECT id FROM desk_saved_reply WHERE org_id = sqlc.arg(org_id) AND slug = sqlc.arg(slug);

-- name: DeskSavedReplyUpsert :one
INSERT INTO desk_saved_reply AS r (org_id, id, slug, title, body)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(slug), sqlc.arg(title), sqlc.arg(body))
ON CONFLICT (org_id, slug) DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body
RETURNING id;

-- name: DeskConversationInsert :one
-- A new conversation; an external id already used in the workspace inserts nothing and
-- returns the existing conversation's id (created false).
WITH ins AS (
  INSERT INTO desk_conversation (org_id, id, inbox_id, subject, status, assignee_user_id, customer_email, customer_name,
    external_id, created_at, updated_at, resolved_at, first_resolved_at, search)
  VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(inbox_id), sqlc.arg(subject), sqlc.arg(status), sqlc.narg(assignee_user_id),
    sqlc.arg(customer_email), sqlc.arg(customer_name), sqlc.narg(external_id), sqlc.arg(created_at), sqlc.arg(created_at),
    sqlc.narg(resolved_at), sqlc.narg(resolved_at), strip(to_tsvector('desk_words', sqlc.arg(subject)::text)))
  ON CONFLICT (org_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
  RETURNING id
)
SELECT id, true AS created FROM ins
UNION ALL
SELECT c.id, false FROM desk_conversation c
WHERE c.org_id = sqlc.arg(org_id) AND c.external_id = sqlc.narg(external_id) AND NOT EXISTS (SELECT 1 FROM ins);

-- name: DeskMessageInsert :one
-- Appends a message and brings its conversation up to date in one statement: a public
-- message joins the search text (while it has room: desk_search_add) and moves updated_at; a member's reply may set the first
-- reply time. A note changes nothing of the conversation. An external id already used
-- in the workspace inserts nothing (created false).
WITH ins AS (
  INSERT INTO desk_message (org_id, id, conversation_id, type, body, author_user_id, attachments, external_id, created_at)
  VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(conversation_id), sqlc.arg(type), sqlc.arg(body), sqlc.narg(author_user_id),
    sqlc.arg(attachments), sqlc.narg(external_id), sqlc.arg(created_at))
  ON CONFLICT (org_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
  RETURNING id, type, body, created_at
), upd AS (
  UPDATE desk_conversation c SET
    search = desk_search_add(c.search, ins.body),
    updated_at = greatest(c.updated_at, ins.created_at),
    first_reply_at = CASE WHEN ins.type = 'reply' AND ins.created_at >= c.created_at
                          THEN least(coalesce(c.first_reply_at, ins.created_at), ins.created_at)
                          ELSE c.first_reply_at END
  FROM ins
  WHERE c.org_id = sqlc.arg(org_id) AND c.id = sqlc.arg(conversation_id) AND ins.type <> 'note'
  RETURNING c.id
)
-- (upd runs whether or not it is read, as every data-modifying WITH does.)
SELECT (SELECT count(*) FROM ins) > 0 AS created;

-- name: DeskConversationsKnown :many
-- Which of these external ids the workspace already holds (CSV import, a chunk at a time).
SELECT external_id::text AS external_id FROM desk_conversation
WHERE org_id = sqlc.arg(org_id) AND external_id = ANY (sqlc.arg(external_ids)::text[]);

-- name: DeskImportChunk :one
-- Stores a chunk of imported rows, each a conversation with its one customer message, in
-- one statement: the conversations as DeskConversationInsert and DeskMessageInsert would
-- leave them (search text of the subject and the message, updated_at the message's time,
-- no first reply), numbered by the caller. A row whose external id a concurrent import
-- stored meanwhile inserts nothing, nor its message; the count says how many were new.
WITH r AS (
  -- Set-returning functions side by side in a select list advance together: row i of
  -- every array. The arrays have one length (the caller builds them from one slice).
  SELECT unnest(sqlc.arg(conversation_ids)::bigint[]) AS conversation_id, unnest(sqlc.arg(message_ids)::bigint[]) AS message_id,
    unnest(sqlc.arg(external_ids)::text[]) AS external_id, unnest(sqlc.arg(subjects)::text[]) AS subject,
    unnest(sqlc.arg(statuses)::text[]) AS status, unnest(sqlc.arg(customer_emails)::text[]) AS customer_email,
    unnest(sqlc.arg(bodies)::text[]) AS body, unnest(sqlc.arg(created_ats)::timestamptz[]) AS created_at
), conv AS (
  INSERT INTO desk_conversation (org_id, id, inbox_id, subject, status, customer_email, external_id, created_at, updated_at, search)
  SELECT sqlc.arg(org_id), r.conversation_id, sqlc.arg(inbox_id), r.subject, r.status, r.customer_email, r.external_id,
    r.created_at, r.created_at, strip(to_tsvector('desk_words', r.subject)) || strip(to_tsvector('desk_words', r.body))
  FROM r
  ON CONFLICT (org_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
  RETURNING id
), msg AS (
  INSERT INTO desk_message (org_id, id, conversation_id, type, body, created_at)
  SELECT sqlc.arg(org_id), r.message_id, r.conversation_id, 'customer', r.body, r.created_at
  FROM r JOIN conv ON conv.id = r.conversation_id
  RETURNING id
)
SELECT (SELECT count(*) FROM conv)::bigint AS conversations, (SELECT count(*) FROM msg)::bigint AS messages;

-- name: DeskConversationSetStatus :exec
-- A status change by the ingest API or an import (never by a desk tool).
UPDATE desk_conversation SET status = sqlc.arg(status),
  resolved_at = CASE WHEN sqlc.arg(status)::text = 'resolved' THEN coalesce(resolved_at, sqlc.arg(at)::timestamptz) END,
  -- The first resolution stays through a reopening: the reports count it (000054).
  first_resolved_at = coalesce(first_resolved_at,
    CASE WHEN sqlc.arg(status)::text = 'resolved' THEN coalesce(resolved_at, sqlc.arg(at)::timestamptz) END),
  updated_at = greatest(updated_at, sqlc.arg(at)::timestamptz)
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id);

-- name: DeskConversationGetIDByExternal :one
SELECT id FROM desk_conversation WHERE org_id = sqlc.arg(org_id) AND external_id = sqlc.arg(external_id);

-- name: DeskMessageByExternal :one
-- The message an ingest call's external id names; its type and body tell a replay from a
-- conflict.
SELECT id, conversation_id, type, body FROM desk_message WHERE org_id = sqlc.arg(org_id) AND external_id = sqlc.arg(external_id);

-- Personal access tokens (relayroom admin desk token …).

-- name: DeskTokenInsert :exec
INSERT INTO desk_token (org_id, id, user_id, token_id, secret_hash, scopes, expires_at)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(user_id), sqlc.arg(token_id), sqlc.arg(secret_hash), sqlc.arg(scopes), sqlc.arg(expires_at));

-- name: DeskTokenList :many
SELECT t.id, u.email, t.token_id, t.scopes, t.created_at, t.expires_at, t.revoked_at
FROM desk_token t JOIN app_user u ON u.id = t.user_id
WHERE t.org_id = sqlc.arg(org_id)
ORDER BY t.created_at, t.id;

-- name: DeskTokenRevoke :many
-- The token's holder names the audit event, as its creation's does.
UPDATE desk_token SET revoked_at = sqlc.arg(at)
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id) AND revoked_at IS NULL
RETURNING user_id;

-- name: DeskMemberGetIDByEmail :one
SELECT m.user_id, m.role, (m.deactivated_at IS NOT NULL)::boolean AS deactivated FROM org_member m JOIN app_user u ON u.id = m.user_id
WHERE m.org_id = sqlc.arg(org_id) AND u.email = sqlc.arg(email);

-- name: DeskMemberSetDeactivated :execrows
-- Deactivates a member or reactivates one; a member already so is not written (0 rows),
-- so a deactivation keeps its first time and a repeat says it changed nothing.
UPDATE org_member SET deactivated_at = CASE WHEN sqlc.arg(deactivated)::boolean THEN sqlc.arg(at)::timestamptz END
WHERE org_id = sqlc.arg(org_id) AND user_id = sqlc.arg(user_id)
  AND (deactivated_at IS NOT NULL) <> sqlc.arg(deactivated)::boolean;

-- Inbox connection secrets (sealed by the service; never read by a tool).

-- name: DeskInboxSecretSet :execrows
UPDATE desk_inbox SET connection_secret = sqlc.narg(connection_secret)
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id);

-- name: DeskInboxSecretGet :one
SELECT connection_secret FROM desk_inbox WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id);

-- name: DeskInboxSecretsAll :many
-- Every stored secret of every workspace, for resealing under a new key (owner's pool).
-- The slugs name an inbox whose secret no key opens.
SELECT i.org_id, i.id, i.connection_secret, o.slug AS org_slug, i.slug AS inbox_slug
FROM desk_inbox i JOIN organisation o ON o.id = i.org_id
WHERE i.connection_secret IS NOT NULL ORDER BY i.org_id, i.id;
