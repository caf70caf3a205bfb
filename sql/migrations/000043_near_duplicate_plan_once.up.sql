-- learn's near-duplicate check plans once per connection, and the title trigram index
-- keeps no pending list (docs/performance.md, "learn's near-duplicate check, and the
-- write rows' Postgres time").
--
-- rr_near_duplicate ran its query with EXECUTE, planned on every call with the call's
-- values; pg_trgm's estimator for `title % $2` evaluates similarity() over the title
-- column's statistics sample on every planning, which cost about as much as running the
-- query. It is now a static PL/pgSQL query with plan_cache_mode = force_generic_plan,
-- as rr_recall (000036) and rr_memory_lexical (000038): the same query, the same
-- parameters, the same answers. The settings 000024 and 000037 gave it stay
-- (pg_trgm.similarity_threshold raised to min_title inside, cpu_operator_cost = 0.25).
-- enable_seqscan = off: a connection keeps the plan it made on its first call, and one
-- made while the table was empty (a new database, statistics of no rows) was a
-- sequential scan, kept while thousands of entries arrived, each check then computing
-- similarity() against every title. With the sequential scan priced out the plan is the
-- title trigram index at any size, which is the only reasonable way to run this query.
-- `relayroom migrate citus` resets plan_cache_mode on every function that forces it;
-- Citus does not call this function anyway (KnowledgeFindNearDuplicateAsCaller).
--
-- knowledge_live_trgm_idx: GIN's fast update appends each new entry's keys to a pending
-- list that every search of the index then reads whole and compares key by key, until a
-- vacuum or a 4 MB list moves it into the tree. Every learn searches this index right
-- before it inserts, so under a stream of learns each check read all the entries learned
-- since the last vacuum (1,500 pending entries doubled the check's CPU). Without it each
-- insert puts its title's trigrams in the tree itself.
CREATE OR REPLACE FUNCTION rr_near_duplicate(new_title text, new_text text, min_title real, min_text real)
RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET pg_trgm.similarity_threshold = 0.3
  SET cpu_operator_cost = 0.25 SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
  proj uuid := rr_project();
  found uuid;
BEGIN
  IF proj IS NULL THEN
    RETURN NULL;
  END IF;
  -- A hair below min_title, so that float rounding never drops a title the explicit
  -- condition below would accept. The operator reads the setting when it runs, so the
  -- cached plan serves every threshold.
  PERFORM set_config('pg_trgm.similarity_threshold', greatest(least(min_title - 0.001, 1), 0)::text, true);
  SELECT k.id INTO found FROM knowledge k
  WHERE k.project_id = proj AND k.status IN ('candidate', 'trusted')
    AND k.title % new_title
    AND similarity(k.title, new_title) >= min_title
    AND similarity(k.title || ' ' || k.body, new_text) >= min_text
  ORDER BY similarity(k.title || ' ' || k.body, new_text) DESC, k.id
  LIMIT 1;
  RETURN found;
END
$fn$;

-- Run through EXECUTE: on a distributed database Citus sends an index's ALTER to the
-- workers as the text of the command that held it, and this file is one multi-statement
-- command ("cannot insert multiple commands into a prepared statement" on every worker).
-- EXECUTE gives the ALTER a text of its own.
DO $do$ BEGIN EXECUTE 'ALTER INDEX knowledge_live_trgm_idx SET (fastupdate = off)'; END $do$;
