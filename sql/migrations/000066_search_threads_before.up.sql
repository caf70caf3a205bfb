-- search pages with before (a thread id), as threads does: a part could not reach the
-- threads of other parts past the newest 50 that matched. The function gains the cursor
-- (the largest uuid for the first page); its body is 000016's otherwise, planned per call
-- with its values (EXECUTE), reading only rr_project(). 000067 grants it as the old one
-- was granted, 000068 drops the old one: one statement each, and each visible to sqlc.
CREATE FUNCTION rr_search_threads(member uuid, pattern text, lim integer, before uuid) RETURNS SETOF thread
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  proj uuid := rr_project();
BEGIN
  IF proj IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY EXECUTE
    'SELECT t.* FROM thread t
     WHERE t.project_id = $4 AND t.id < $5
       AND NOT EXISTS (SELECT 1 FROM participant p
                       WHERE p.project_id = $4 AND p.project_id = t.project_id AND p.thread_id = t.id
                         AND p.member_id = $1)
       AND (t.subject ILIKE $2 OR EXISTS (SELECT 1 FROM message m
                       WHERE m.project_id = $4 AND m.project_id = t.project_id AND m.thread_id = t.id
                         AND m.body ILIKE $2))
     ORDER BY t.id DESC
     LIMIT $3'
    USING member, pattern, lim, proj, before;
END
$fn$;
