-- read_memory's category and tag filters match in any case, as its decision category
-- already did ("Decision" sets is_decision; a filter of "decision" did not find it). The
-- function is 000038's but for its three filter lines; the semantic half's filter is the
-- same expression (rooms.visible).

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
      AND (cat IS NULL OR lower(e.category) = lower(cat))
      AND (coalesce(cardinality(tagf), 0) = 0 OR EXISTS (SELECT 1 FROM unnest(e.tags) t, unnest(tagf) f WHERE lower(t) = lower(f)))
    ORDER BY e.id DESC LIMIT lim),
  allterms AS (
    SELECT c.id, 2.0 + ts_rank_cd(c.tsv, tand)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE allwords AND e.project_id = proj AND e.tsv @@ tand
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = org)
            AND (cat IS NULL OR lower(e.category) = lower(cat))
            AND (coalesce(cardinality(tagf), 0) = 0 OR EXISTS (SELECT 1 FROM unnest(e.tags) t, unnest(tagf) f WHERE lower(t) = lower(f)))
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY 2 DESC LIMIT lim),
  someterms AS (
    SELECT c.id, ts_rank_cd(c.tsv, tor)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE e.project_id = proj AND e.tsv @@ tor
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = org)
            AND (cat IS NULL OR lower(e.category) = lower(cat))
            AND (coalesce(cardinality(tagf), 0) = 0 OR EXISTS (SELECT 1 FROM unnest(e.tags) t, unnest(tagf) f WHERE lower(t) = lower(f)))
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY 2 DESC LIMIT lim)
  SELECT u.id, max(u.score) AS score
  FROM (SELECT * FROM exact UNION ALL SELECT * FROM allterms UNION ALL SELECT * FROM someterms) u
  GROUP BY u.id ORDER BY 2 DESC, 1 DESC LIMIT lim;
END
$fn$;
