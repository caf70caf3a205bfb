-- 000016's search function, and its grants. One statement, the DDL through EXECUTE.
DO $do$
BEGIN
  EXECUTE $ddl$
CREATE FUNCTION rr_search_threads(member uuid, pattern text, lim integer) RETURNS SETOF thread
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  proj uuid := rr_project();
BEGIN
  IF proj IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY EXECUTE
    'SELECT t.* FROM thread t
     WHERE t.project_id = $4
       AND NOT EXISTS (SELECT 1 FROM participant p
                       WHERE p.project_id = $4 AND p.project_id = t.project_id AND p.thread_id = t.id
                         AND p.member_id = $1)
       AND (t.subject ILIKE $2 OR EXISTS (SELECT 1 FROM message m
                       WHERE m.project_id = $4 AND m.project_id = t.project_id AND m.thread_id = t.id
                         AND m.body ILIKE $2))
     ORDER BY t.id DESC
     LIMIT $3'
    USING member, pattern, lim, proj;
END
$fn$
$ddl$;
  EXECUTE 'REVOKE ALL ON FUNCTION rr_search_threads(uuid, text, integer) FROM PUBLIC';
  EXECUTE 'GRANT EXECUTE ON FUNCTION rr_search_threads(uuid, text, integer) TO relayroom_app';
END
$do$;
