-- read_memory's lexical half plans once per connection instead of once per call, as
-- rr_recall does since 000036 (docs/performance.md, "Planning the search functions once").
--
-- rr_memory_lexical ran its query with EXECUTE, which parses and plans it on every call
-- with the call's values; at 10,000 entries its planning cost about three times its
-- execution. Each branch is served by its own index whatever the words (memory_entry_tsv_idx
-- for both full-text branches, memory_entry_trgm_idx for the substring; the "selective
-- versus common query" choice EXECUTE was kept for never changed the plan), so it is a
-- static PL/pgSQL query, prepared on a connection's first call, with plan_cache_mode =
-- force_generic_plan so the cached plan is kept. Same query, same parameters, same
-- answers (compared old against new on the load test's 10,000 entries: see
-- docs/performance.md). ORDER BY 2 instead of `score`: in static PL/pgSQL that name is
-- also the function's output column.
--
-- This form was taken out once (000036) after a Citus coordinator failed CI's plan test
-- with "cache lookup failed for type N": that came from auto_explain's EXPLAIN reading
-- PL/pgSQL parameters' types before they are set (citusdata/citus#7596), not from the
-- function, which the plan test now checks from the Citus planner's messages. A
-- coordinator cannot make a generic plan of a router query, so `relayroom migrate citus`
-- resets plan_cache_mode on every function that forces it (pg.Distribute,
-- docs/scale.md), this one included.

CREATE OR REPLACE FUNCTION rr_memory_lexical(q text, pattern text, cat text, tagf text[], lim int)
RETURNS TABLE (id uuid, score float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp
  SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  proj uuid := rr_project();
  org  uuid := rr_org();
  tand tsquery := plainto_tsquery('english', q);
  tor  tsquery := replace(plainto_tsquery('english', q)::text, ' & ', ' | ')::tsquery;
  -- Long questions skip the all-words branch (docs/performance.md).
  allwords boolean := numnode(tand) BETWEEN 1 AND 7;
BEGIN
  IF proj IS NULL OR org IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY
  WITH exact AS (
    SELECT e.id, 3.0::float8 AS score FROM memory_entry e
    WHERE pattern IS NOT NULL AND e.project_id = proj AND e.content ILIKE pattern
      AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = org)
      AND (cat IS NULL OR e.category = cat) AND (coalesce(cardinality(tagf), 0) = 0 OR e.tags && tagf)
    ORDER BY e.id DESC LIMIT lim),
  allterms AS (
    SELECT c.id, 2.0 + ts_rank_cd(c.tsv, tand)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE allwords AND e.project_id = proj AND e.tsv @@ tand
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = org)
            AND (cat IS NULL OR e.category = cat) AND (coalesce(cardinality(tagf), 0) = 0 OR e.tags && tagf)
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY 2 DESC LIMIT lim),
  someterms AS (
    SELECT c.id, ts_rank_cd(c.tsv, tor)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE e.project_id = proj AND e.tsv @@ tor
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = org)
            AND (cat IS NULL OR e.category = cat) AND (coalesce(cardinality(tagf), 0) = 0 OR e.tags && tagf)
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY 2 DESC LIMIT lim)
  SELECT u.id, max(u.score) AS score
  FROM (SELECT * FROM exact UNION ALL SELECT * FROM allterms UNION ALL SELECT * FROM someterms) u
  GROUP BY u.id ORDER BY 2 DESC, 1 DESC LIMIT lim;
END
$fn$;
