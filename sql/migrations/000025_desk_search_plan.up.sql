-- Desk search and reports at 100k conversations / 1M messages (docs/desk.md, Benchmarks).
--
-- Under row-level security PostgreSQL never uses a non-leakproof operator (tsvector @@
-- tsquery) as an index condition, so the request role's search could only walk the
-- workspace's conversations by updated_at and test each one: instant for a common term,
-- a scan of the workspace for a rare one. rr_desk_search_candidates runs as the tables'
-- owner (SECURITY DEFINER, like rr_recall) for that one reason and reads exactly the
-- transaction's workspace, rr_org() (nothing when it is unset). It returns at most
-- cap + 1 matching conversations (with the conversation's own filters and the keyset), in
-- no order; DeskConversationSearch decides which of its plans answers (sql/queries/desk.sql).
-- Visibility (restricted inboxes) stays with the caller's statement, under RLS. Its SET
-- clauses: a plan this cheap gains nothing from JIT compilation or parallel workers, and
-- starting either costs more than the search (Citus workers do not see the clauses; the
-- answer is the same).
--
-- desk_index_first is always true and declared expensive. The planner cannot estimate a
-- prefix tsquery's matches (it assumes 2 % of the rows when the column's statistics hold
-- fewer than 100 words, whatever the term), so with a LIMIT it may prefer reading the
-- workspace's rows in any order to the full-text index.
-- A filter's declared cost is charged for every row a plan reads: the full-text index
-- reads only the matches, any other plan every row of the workspace, so the index wins
-- whatever the estimate. It runs once per candidate returned (at most cap + 1).
CREATE FUNCTION desk_index_first(tsvector) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000 AS $$
BEGIN
  RETURN true;
END
$$;

-- desk_matches is search @@ q where the plan must walk conversations in order: PostgreSQL
-- takes a plain @@ on a prefix query for rare (0.04 % for two words) and would read and
-- sort every match rather than walk; a function it cannot look into counts as matching a
-- third of the rows, which makes the ordered walk with its LIMIT the cheaper plan.
-- DeskConversationSearch uses it only when it has seen that the term matches many rows.
CREATE FUNCTION desk_matches(search tsvector, q tsquery) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  RETURN search @@ q;
END
$$;

CREATE FUNCTION rr_desk_search_candidates(q text, want_status text, want_inbox bigint, after_updated timestamptz,
  after_id bigint, cap integer)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp
  SET jit = off SET max_parallel_workers_per_gather = 0 AS $fn$
DECLARE
  org uuid := rr_org();
BEGIN
  IF org IS NULL THEN
    RETURN;
  END IF;
  -- Keyed by the workspace as a parameter, so that Citus routes it to the workspace's
  -- shard group.
  RETURN QUERY EXECUTE $q$
  SELECT c.id FROM desk_conversation c
  WHERE c.org_id = $1
    AND c.search @@ desk_query($2)
    AND desk_index_first(c.search)
    AND ($3::text IS NULL OR c.status = $3)
    AND ($4::bigint IS NULL OR c.inbox_id = $4)
    AND ($5::timestamptz IS NULL OR c.updated_at < $5 OR (c.updated_at = $5 AND c.id > $6))
  LIMIT $7 + 1
  $q$ USING org, q, want_status, want_inbox, after_updated, after_id, cap;
END
$fn$;
REVOKE ALL ON FUNCTION rr_desk_search_candidates(text, text, bigint, timestamptz, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_desk_search_candidates(text, text, bigint, timestamptz, bigint, integer) TO relayroom_app;

-- Reports. A 31-day report reads every conversation created, first answered or resolved
-- in the range (about 8,500 of a 100k workspace's); the indexes it reads them by also
-- carry the columns it computes with, so the heap is not visited (an index-only scan,
-- once vacuum has marked the pages all-visible, as autovacuum does).
CREATE INDEX desk_conversation_created_report_idx ON desk_conversation (org_id, created_at) INCLUDE (inbox_id);
CREATE INDEX desk_conversation_first_reply_report_idx ON desk_conversation (org_id, first_reply_at) INCLUDE (created_at, inbox_id)
  WHERE first_reply_at IS NOT NULL;
CREATE INDEX desk_conversation_resolved_report_idx ON desk_conversation (org_id, resolved_at) INCLUDE (created_at, inbox_id)
  WHERE resolved_at IS NOT NULL;
DROP INDEX desk_conversation_created_idx;
DROP INDEX desk_conversation_first_reply_idx;
DROP INDEX desk_conversation_resolved_idx;
