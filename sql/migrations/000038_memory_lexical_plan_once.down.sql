-- rr_memory_lexical as 000005 made it: its query runs with EXECUTE, planned on every call
-- (CREATE OR REPLACE also drops 000038's SET plan_cache_mode).

CREATE OR REPLACE FUNCTION rr_memory_lexical(q text, pattern text, cat text, tagf text[], lim int)
RETURNS TABLE (id uuid, score float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  proj uuid := rr_project();
  org  uuid := rr_org();
  tand tsquery := plainto_tsquery('english', q);
  tor  tsquery := replace(plainto_tsquery('english', q)::text, ' & ', ' | ')::tsquery;
BEGIN
  IF proj IS NULL OR org IS NULL THEN
    RETURN;
  END IF;
  -- EXECUTE plans each call with the actual values: a cached generic plan cannot tell a
  -- selective query from one matching most of the room.
  RETURN QUERY EXECUTE $q$
  WITH exact AS (
    SELECT e.id, 3.0::float8 AS score FROM memory_entry e
    WHERE $5::text IS NOT NULL AND e.project_id = $1 AND e.content ILIKE $5
      AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
      AND ($6::text IS NULL OR e.category = $6) AND (coalesce(cardinality($7::text[]), 0) = 0 OR e.tags && $7)
    ORDER BY e.id DESC LIMIT $8),
  allterms AS (
    SELECT c.id, 2.0 + ts_rank_cd(c.tsv, $3)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE $9 AND e.project_id = $1 AND e.tsv @@ $3
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
            AND ($6::text IS NULL OR e.category = $6) AND (coalesce(cardinality($7::text[]), 0) = 0 OR e.tags && $7)
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY score DESC LIMIT $8),
  someterms AS (
    SELECT c.id, ts_rank_cd(c.tsv, $4)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE e.project_id = $1 AND e.tsv @@ $4
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
            AND ($6::text IS NULL OR e.category = $6) AND (coalesce(cardinality($7::text[]), 0) = 0 OR e.tags && $7)
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY score DESC LIMIT $8)
  SELECT u.id, max(u.score) AS score
  FROM (SELECT * FROM exact UNION ALL SELECT * FROM allterms UNION ALL SELECT * FROM someterms) u
  GROUP BY u.id ORDER BY 2 DESC, 1 DESC LIMIT $8
  $q$ USING proj, org, tand, tor, pattern, cat, tagf, lim, numnode(tand) BETWEEN 1 AND 7;
END
$fn$;
