-- rr_near_duplicate as 000024 and 000037 left it (its query run with EXECUTE), and the
-- title trigram index with GIN's default fast update.
CREATE OR REPLACE FUNCTION rr_near_duplicate(new_title text, new_text text, min_title real, min_text real)
RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET pg_trgm.similarity_threshold = 0.3
  SET cpu_operator_cost = 0.25 AS $fn$
DECLARE
  proj uuid := rr_project();
  found uuid;
BEGIN
  IF proj IS NULL THEN
    RETURN NULL;
  END IF;
  -- A hair below min_title, so that float rounding never drops a title the explicit
  -- condition below would accept.
  PERFORM set_config('pg_trgm.similarity_threshold', greatest(least(min_title - 0.001, 1), 0)::text, true);
  EXECUTE $q$
  SELECT k.id FROM knowledge k
  WHERE k.project_id = $1 AND k.status IN ('candidate', 'trusted')
    AND k.title % $2
    AND similarity(k.title, $2) >= $4
    AND similarity(k.title || ' ' || k.body, $3) >= $5
  ORDER BY similarity(k.title || ' ' || k.body, $3) DESC, k.id
  LIMIT 1
  $q$ INTO found USING proj, new_title, new_text, min_title, min_text;
  RETURN found;
END
$fn$;

-- Run through EXECUTE: on a distributed database Citus sends an index's ALTER to the
-- workers as the text of the command that held it, and this file is one multi-statement
-- command ("cannot insert multiple commands into a prepared statement" on every worker).
-- EXECUTE gives the ALTER a text of its own.
DO $do$ BEGIN EXECUTE 'ALTER INDEX knowledge_live_trgm_idx RESET (fastupdate)'; END $do$;
