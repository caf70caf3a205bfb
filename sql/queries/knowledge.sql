-- Knowledge base. Every query is bounded by the project_id from the Scope (or, for the
-- operator's commands and sweeps, by the project they name).

-- name: ProjectGetKnowledgeSettings :one
-- Read on every decision: no caching, so a change takes effect on the next call.
SELECT knowledge_config, settings FROM project WHERE id = @project_id;

-- name: AgentLessonLock :exec
-- Makes an agent's lessons take turns from count to record (until the transaction ends),
-- so closes running at once cannot all count 59 and all record past the hourly limit.
-- A transaction-scoped advisory lock on the agent (class 7275, apart from every other
-- advisory lock): it blocks nothing else, and only the agent's own concurrent lessons
-- wait. On Citus it is taken on the coordinator, which every replica shares.
SELECT pg_advisory_xact_lock(7275, hashtext(sqlc.arg(agent_id)::uuid::text));

-- name: KnowledgeTitleLock :exec
-- Makes writes of one title in a project take turns from the near-duplicate check to
-- commit, so that of two identical learns (or lessons) at once the second finds the
-- first. A transaction-scoped advisory lock (class 7276) on the project and the title's
-- letters and digits (knowledge.titleKey): different titles never wait for each other.
SELECT pg_advisory_xact_lock(7276, hashtext(sqlc.arg(project_id)::uuid::text || '/' || sqlc.arg(title_key)::text));

-- name: AgentLessonCount :one
-- An agent's lessons since a time, in every project (agent_lesson is in the agent's
-- organisation's tenant).
SELECT count(*) FROM agent_lesson
WHERE org_id = @org_id AND agent_id = @agent_id AND created_at > @since;

-- name: AgentLessonRecord :exec
-- Counts a recorded lesson for its agent and forgets the agent's lessons older than the
-- window, in one statement.
WITH expired AS (
  DELETE FROM agent_lesson old
  WHERE old.org_id = @org_id AND old.agent_id = @agent_id AND old.created_at <= @since::timestamptz
)
INSERT INTO agent_lesson (org_id, agent_id, id, created_at) VALUES (@org_id, @agent_id, @id, @now);

-- name: KnowledgeFindNearDuplicate :one
-- rr_near_duplicate (migration 000003) searches the transaction's project only.
-- No row when there is none.
SELECT d.id::uuid AS id FROM (SELECT rr_near_duplicate(@title::text, @text::text, @min_title::real, @min_text::real) AS id) d
WHERE d.id IS NOT NULL;

-- name: KnowledgeFindNearDuplicateAsCaller :one
-- rr_near_duplicate's query run as the request role, for Citus: after the transaction wrote
-- to the project's shards as the request role (a close writes the thread before its
-- lesson), Citus refuses a read of them as the function's owner ("cannot perform query on
-- placements that were modified in this transaction by a different user"). Same rows and
-- order; under row-level security the title's trigram index cannot serve the similarity
-- operator, so the project's live entries are compared one by one.
SELECT k.id FROM knowledge k
WHERE k.project_id = @project_id AND k.status IN ('candidate', 'trusted')
  AND similarity(k.title, @title::text) >= @min_title::real
  AND similarity(k.title || ' ' || k.body, @text::text) >= @min_text::real
ORDER BY similarity(k.title || ' ' || k.body, @text::text) DESC, k.id
LIMIT 1;

-- name: KnowledgeFindTurnedDownTwin :one
-- A demoted or rejected entry of the project with this exact title and a near-duplicate
-- text, the newest first (knowledge_turned_down_title_idx). Run as the request role:
-- equality on the title is leakproof, so the index serves it under row-level security.
SELECT k.id FROM knowledge k
WHERE k.project_id = @project_id AND k.status IN ('demoted', 'rejected') AND k.title = @title::text
  AND similarity(k.title || ' ' || k.body, @text::text) >= @min_text::real
ORDER BY k.updated_at DESC, k.id
LIMIT 1;

-- name: KnowledgeInsert :exec
INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source, source_thread_id,
  author_member_id, author_agent_id, author_part, duplicate_of, expires_at, created_at, updated_at)
VALUES (@project_id, @id, @kind, @title, @body, 'candidate', @confidence, @source, sqlc.narg(source_thread_id),
  sqlc.narg(author_member_id), sqlc.narg(author_agent_id), sqlc.narg(author_part), sqlc.narg(duplicate_of),
  sqlc.narg(expires_at), @now, @now);

-- name: KnowledgeRecall :many
-- rr_recall (migrations 000003, 000044) reads only rr_project(), the transaction's tenant,
-- and returns its candidates; the server ranks them (Service.Recall). Its full-text
-- channel searches @search, the query with the compounds of its adjacent words added
-- (knowledge.searchText); the similarity is always the query's as sent. pg_trgm's similarity
-- is computed here only where the server cannot compute it: the query or the entry is not
-- ASCII (then ascii is false). The project_id argument is checked against the tenant, so a
-- mismatch returns nothing.
SELECT k.id, k.kind, k.title, k.body, k.confidence, k.expires_at, k.created_at, c.ascii,
  (CASE WHEN c.ascii THEN 0 ELSE word_similarity(@query::text, k.title || ' ' || k.body) END)::real AS similarity,
  k.source, k.author_part, k.source_thread_id, k.decided_at
FROM rr_recall(@search::text, @title_query::text, sqlc.narg(kind)::text, @now::timestamptz) AS k,
  LATERAL (SELECT octet_length(@query::text) = char_length(@query::text) AND octet_length(k.title) = char_length(k.title)
    AND octet_length(k.body) = char_length(k.body) AS ascii) c
WHERE k.project_id = @project_id::uuid;

-- name: RecallQueryInsert :exec
INSERT INTO recall_query (project_id, id, member_id, query, returned, created_at)
VALUES (@project_id, @id, @member_id, @query, @returned::uuid[], @now);

-- name: RecallQueryGet :one
SELECT id, member_id, returned FROM recall_query WHERE project_id = @project_id AND id = @id;

-- name: RecallUseInsert :execrows
INSERT INTO recall_use (project_id, query_id, knowledge_id, created_at)
VALUES (@project_id, @query_id, @knowledge_id, @now)
ON CONFLICT DO NOTHING;

-- name: KnowledgeContradict :one
-- One contradiction demotes a candidate or trusted entry and lowers its confidence; an
-- entry already demoted counts the contradiction and stays demoted.
UPDATE knowledge SET
  confidence = greatest(confidence - @penalty::real, 0),
  contradictions = contradictions + 1,
  status = 'demoted',
  updated_at = @now
WHERE project_id = @project_id AND id = @id AND status IN ('candidate', 'trusted', 'demoted')
RETURNING id, status, confidence;

-- name: KnowledgeList :many
-- With the state of the entry each one is a near-duplicate of: the dashboard links only to
-- an original it shows, and says when the original was turned down.
SELECT k.id, k.kind, k.title, k.body, k.status, k.confidence, k.source, k.source_thread_id, k.author_part, k.duplicate_of,
  o.status AS duplicate_of_status, k.contradictions, k.expires_at, k.decided_by, k.decided_at, k.created_at
FROM knowledge k LEFT JOIN knowledge o ON o.project_id = k.project_id AND o.id = k.duplicate_of
WHERE k.project_id = @project_id AND (sqlc.narg(status)::text IS NULL OR k.status = sqlc.narg(status)::text)
ORDER BY k.created_at DESC, k.id DESC
LIMIT @lim;

-- name: KnowledgeDecide :one
-- A person or CI moves a candidate (or a demoted entry) to trusted or rejected. An entry
-- past its expiry is not made trusted: recall would never return it, and the approval
-- would answer a success that does nothing. Nor is a near-duplicate of a trusted entry:
-- recall would return the same thing twice, and a person decides it once (the original).
UPDATE knowledge k SET status = @status, confidence = CASE WHEN @status = 'trusted' THEN greatest(k.confidence, @confidence::real) ELSE k.confidence END,
  decided_by = @decided_by, decided_at = @now, updated_at = @now
WHERE k.project_id = @project_id AND k.id = @id AND k.status = ANY(@from_status::text[])
  AND (@status <> 'trusted' OR k.expires_at IS NULL OR k.expires_at > @now)
  AND (@status <> 'trusted' OR k.duplicate_of IS NULL OR NOT EXISTS (SELECT 1 FROM knowledge o
    WHERE o.project_id = @project_id AND o.id = k.duplicate_of AND o.status = 'trusted'))
RETURNING k.id, k.status, k.confidence;

-- name: KnowledgeWordsAdd :exec
-- The words of an entry just made trusted join recall's typo channel (knowledge_word),
-- as rr_knowledge_words adds those of an entry stored trusted (migration 000073).
INSERT INTO knowledge_word (project_id, word)
SELECT k.project_id, w
FROM knowledge k, unnest(tsvector_to_array(to_tsvector('simple', k.title || ' ' || k.body))) AS w
WHERE k.project_id = @project_id AND k.id = @id AND k.status = 'trusted'
  AND length(w) BETWEEN 4 AND 40 AND w ~ '^[[:alpha:]]+$'
ON CONFLICT DO NOTHING;

-- name: KnowledgeGetStatus :one
-- An entry's state, its expiry, its writer, and the entry it is a near-duplicate of with
-- that one's state: why a decision found no row to change, and whether learn may name it.
SELECT k.status, k.expires_at, k.author_agent_id, k.duplicate_of, o.status AS original_status
FROM knowledge k LEFT JOIN knowledge o ON o.project_id = k.project_id AND o.id = k.duplicate_of
WHERE k.project_id = @project_id AND k.id = @id;

-- name: KnowledgeExpire :execrows
-- Cross-tenant (operator): entries past their expiry are retired.
UPDATE knowledge SET status = 'expired', updated_at = @now
WHERE status IN ('candidate', 'trusted') AND expires_at IS NOT NULL AND expires_at <= @now;

-- name: RecallQueryHitRate :one
SELECT
  coalesce((SELECT sum(cardinality(q.returned)) FROM recall_query q WHERE q.project_id = @project_id AND q.created_at >= @since), 0)::bigint AS returned,
  (SELECT count(*) FROM recall_use u JOIN recall_query q ON q.project_id = u.project_id AND q.id = u.query_id
    WHERE u.project_id = @project_id AND q.created_at >= @since)::bigint AS used;

-- name: CITokenInsert :exec
INSERT INTO ci_token (project_id, id, token_id, secret_hash) VALUES (@project_id, @id, @token_id, @secret_hash);

-- name: CITokenFind :many
SELECT project_id, id, secret_hash FROM ci_token WHERE token_id = @token_id AND revoked_at IS NULL;

-- name: CITokenList :many
-- Operator: a project's CI tokens, newest first, never their secrets.
SELECT id, token_id, created_at, revoked_at FROM ci_token WHERE project_id = @project_id ORDER BY created_at DESC, id DESC;

-- name: CITokenRevoke :execrows
-- Operator: refused from its next confirmation on; 0 when revoked already or unknown.
UPDATE ci_token SET revoked_at = now() WHERE project_id = @project_id AND id = @id AND revoked_at IS NULL;

-- name: CITokenExists :one
SELECT EXISTS (SELECT 1 FROM ci_token WHERE project_id = @project_id AND id = @id);

-- name: ProjectGetHost :one
-- Operator: the organisation whose history a project's changes are recorded in.
SELECT host_org_id FROM project WHERE id = @id;

-- name: ProjectGetIDBySlug :one
-- Operator: the project "host/slug" names.
SELECT p.id FROM project p JOIN organisation o ON o.id = p.host_org_id
WHERE o.slug = @host_slug AND p.slug = @project_slug;

-- name: KnowledgeRetitle :exec
-- A person edits a candidate's (or a demoted entry's) title before approving it, in the
-- approval's transaction; the stored tsv and the word list follow the title.
UPDATE knowledge SET title = @title, updated_at = @now
WHERE project_id = @project_id AND id = @id AND status IN ('candidate', 'demoted');

-- name: KnowledgeDemoteTrusted :one
-- A person takes a trusted entry out of recall; it can be approved again later.
UPDATE knowledge SET status = 'demoted', decided_by = @decided_by, decided_at = @now, updated_at = @now
WHERE project_id = @project_id AND id = @id AND status = 'trusted'
RETURNING id, status, confidence;

-- name: KnowledgeSetExpiry :one
-- A person sets when a trusted entry stops being recalled; an expiry not after now
-- retires it at once (recall already excludes it from that instant) and records who did;
-- a later expiry keeps the approval's decided_by, which the trusted list shows.
UPDATE knowledge SET expires_at = @expires_at,
  status = CASE WHEN @expires_at::timestamptz <= @now::timestamptz THEN 'expired' ELSE status END,
  decided_by = CASE WHEN @expires_at::timestamptz <= @now::timestamptz THEN @decided_by::text ELSE decided_by END,
  decided_at = CASE WHEN @expires_at::timestamptz <= @now::timestamptz THEN @now::timestamptz ELSE decided_at END,
  updated_at = @now
WHERE project_id = @project_id AND id = @id AND status = 'trusted'
RETURNING id, status, confidence;

-- name: KnowledgeGetCitation :one
-- The thread a lesson cites (source_thread_id), with the entry: no row when the entry
-- is not in the project or cites no thread of it.
SELECT k.id AS knowledge_id, k.title, k.status AS knowledge_status, t.id AS thread_id, t.subject, t.status, t.created_at
FROM knowledge k JOIN thread t ON t.project_id = k.project_id AND t.id = k.source_thread_id
WHERE k.project_id = @project_id AND k.id = @id;

-- name: RecallQueryDailyHitRate :many
-- The Learning panel's series: entries returned and used per UTC day since a time (a
-- use counts on the day of the query that returned it, as RecallQueryHitRate counts it).
SELECT q.day::timestamptz AS day, q.returned::bigint AS returned, coalesce(u.used, 0)::bigint AS used
FROM (SELECT date_trunc('day', rq.created_at, 'UTC') AS day, sum(cardinality(rq.returned)) AS returned
      FROM recall_query rq WHERE rq.project_id = @project_id AND rq.created_at >= @since GROUP BY 1) q
LEFT JOIN (SELECT date_trunc('day', rq.created_at, 'UTC') AS day, count(*) AS used
      FROM recall_use ru JOIN recall_query rq ON rq.project_id = ru.project_id AND rq.id = ru.query_id
      WHERE ru.project_id = @project_id AND rq.created_at >= @since GROUP BY 1) u ON u.day = q.day
ORDER BY q.day;

-- name: RecallQueryListEmpty :many
-- The queries that returned nothing since a time, most recent first, each once with how
-- often it was asked.
SELECT query, count(*)::bigint AS times, max(created_at)::timestamptz AS last_at
FROM recall_query
WHERE project_id = @project_id AND created_at >= @since AND cardinality(returned) = 0
GROUP BY query
ORDER BY last_at DESC, query
LIMIT @lim;

-- name: ProjectMergeKnowledgeSettings :execrows
-- The knowledge settings page saves by merging: knowledge_config || patch keeps every
-- key it does not name (a distillOnClose set by SQL stays), and redactionRules is
-- replaced inside settings without touching its other keys (jsonb_set, immutable: Citus
-- refuses a function that is not, such as jsonb_build_object, inside a CASE).
UPDATE project SET knowledge_config = knowledge_config || @config_patch::jsonb,
  settings = CASE WHEN @rules::jsonb IS NULL THEN settings ELSE jsonb_set(settings, '{redactionRules}', @rules::jsonb) END
WHERE id = @project_id;
