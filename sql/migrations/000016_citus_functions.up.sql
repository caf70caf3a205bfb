-- The SECURITY DEFINER search functions, in a form Citus can run (docs/scale.md). Same
-- results on plain PostgreSQL; what changes is how the project reaches the queries:
--
-- * Citus cannot plan a LANGUAGE sql function's statements that use its parameters
--   ("could not create distributed plan … parameters in SQL functions"): rr_recall and
--   rr_near_duplicate failed outright on a coordinator. They are PL/pgSQL now.
-- * A shard is chosen from a constant or a parameter compared with the distribution
--   column, never from a function call: `project_id = rr_project()` read every shard.
--   Each function reads rr_project() once into a variable and passes it as a parameter
--   (EXECUTE … USING), so its queries are router queries on the project's shard group;
--   a correlated subquery pins its own project id too (Citus routes it only then).
-- * A function's SET clause is a setting of the coordinator's session only, and the
--   workers run the statements: rr_recall's pg_trgm.similarity_threshold = 0.5 (for the
--   `%` of its typo channel) becomes an explicit similarity() >= 0.5 beside the `%`, so
--   the index still narrows the words and the cut-off is the same on every node.
-- * Citus sends the workers a transaction's SET LOCAL commands and nothing set_config
--   does (internal/pg sets the tenant that way on Citus): rr_set_directory (000013) sets
--   the directory lists with SET LOCAL too, so a query joining a directory table with a
--   sharded one sees them on the worker that runs it. On plain PostgreSQL, SET LOCAL and
--   set_config(…, true) are the same thing.
-- * Citus refuses a correlated subquery over a sharded table (agreement) from a reference
--   table (project): rr_set_directory reads the agreement by the project id itself.
-- EXECUTE also plans each call with its values, as rr_search_threads and
-- rr_memory_lexical already did (a generic plan cannot tell a rare word from a common one).

CREATE OR REPLACE FUNCTION rr_recall(q text, title_q text, want_kind text, floor real, lim integer, at timestamptz)
RETURNS SETOF knowledge
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  proj uuid := rr_project();
BEGIN
  IF proj IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY EXECUTE $q$
  WITH fixed AS (
    SELECT to_tsquery('english', string_agg(quote_literal(f.word), ' | ')) AS tsq
    FROM (SELECT DISTINCT lower(qw) AS qw FROM regexp_split_to_table($3, '[^[:alpha:]]+') AS qw
          WHERE length(qw) BETWEEN 4 AND 40) qws,
    LATERAL (SELECT w.word FROM knowledge_word w
             WHERE w.project_id = $1 AND w.word % qws.qw AND similarity(w.word, qws.qw) >= 0.5
               AND w.word <> qws.qw
             ORDER BY similarity(w.word, qws.qw) DESC, w.word
             LIMIT 3) f
  ),
  cand AS (
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = $1 AND k.status = 'trusted'
       AND k.tsv @@ replace(plainto_tsquery('english', $2)::text, '&', '|')::tsquery
       AND (k.expires_at IS NULL OR k.expires_at > $7)
       AND ($4::text IS NULL OR k.kind = $4)
     ORDER BY ts_rank(k.tsv, replace(plainto_tsquery('english', $2)::text, '&', '|')::tsquery) DESC
     LIMIT 60)
    UNION
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = $1 AND k.status = 'trusted' AND k.title %> $3
       AND (k.expires_at IS NULL OR k.expires_at > $7)
       AND ($4::text IS NULL OR k.kind = $4)
     ORDER BY word_similarity($3, k.title) DESC
     LIMIT 60)
    UNION
    (SELECT k.id FROM knowledge k, fixed
     WHERE fixed.tsq IS NOT NULL
       AND k.project_id = $1 AND k.status = 'trusted' AND k.tsv @@ fixed.tsq
       AND (k.expires_at IS NULL OR k.expires_at > $7)
       AND ($4::text IS NULL OR k.kind = $4)
     ORDER BY ts_rank(k.tsv, fixed.tsq) DESC
     LIMIT 60)
  )
  SELECT (s.k).* FROM (
    SELECT k, word_similarity($2, k.title || ' ' || k.body) * k.confidence AS score
    FROM cand JOIN knowledge k ON k.project_id = $1 AND k.id = cand.id
    WHERE k.status = 'trusted'
    OFFSET 0
  ) s
  WHERE s.score >= $5
  ORDER BY s.score DESC, (s.k).id
  LIMIT $6
  $q$ USING proj, q, title_q, want_kind, floor, lim, at;
END
$fn$;
-- (CREATE OR REPLACE replaces the SET clauses too: 000011's similarity threshold is gone.)

CREATE OR REPLACE FUNCTION rr_near_duplicate(new_title text, new_text text, min_title real, min_text real)
RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  proj uuid := rr_project();
  found uuid;
BEGIN
  IF proj IS NULL THEN
    RETURN NULL;
  END IF;
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

CREATE OR REPLACE FUNCTION rr_search_threads(member uuid, pattern text, lim integer) RETURNS SETOF thread
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
$fn$;

CREATE OR REPLACE FUNCTION rr_set_directory() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  org  uuid := rr_org();
  proj uuid := rr_project();
  agt  uuid := rr_agent();
  admitted boolean := false;
  orgs uuid[];
  projects uuid[];
  agents uuid[];
  users uuid[];
BEGIN
  -- A tenant of a project and no organisation (a project's CI token, a signed download
  -- link) acts for the project itself and sees its members, as before.
  IF proj IS NOT NULL AND org IS NULL THEN
    admitted := true;
  ELSIF proj IS NOT NULL THEN
    SELECT p.host_org_id = org INTO admitted FROM project p WHERE p.id = proj;
    IF FOUND AND NOT admitted THEN
      admitted := EXISTS (SELECT 1 FROM agreement ag
                          WHERE ag.project_id = proj AND ag.guest_org_id = org AND ag.status = 'active');
    END IF;
  END IF;
  SELECT array_agg(DISTINCT x.o ORDER BY x.o) INTO orgs FROM (
    SELECT p.host_org_id AS o FROM project p WHERE admitted AND p.id = proj
    UNION ALL
    SELECT m.org_id FROM membership m WHERE admitted AND m.project_id = proj
    UNION ALL
    SELECT p.host_org_id FROM membership m JOIN project p ON p.id = m.project_id WHERE m.agent_id = agt) x;
  IF admitted THEN
    SELECT array_agg(m.agent_id ORDER BY m.agent_id) INTO agents FROM membership m WHERE m.project_id = proj;
  END IF;
  SELECT array_agg(m.project_id ORDER BY m.project_id) INTO projects FROM membership m WHERE m.agent_id = agt;
  SELECT array_agg(om.user_id ORDER BY om.user_id) INTO users FROM org_member om WHERE om.org_id = org;
  EXECUTE format('SET LOCAL app.orgs = %L', coalesce(orgs::text, ''));
  EXECUTE format('SET LOCAL app.projects = %L', coalesce(projects::text, ''));
  EXECUTE format('SET LOCAL app.agents = %L', coalesce(agents::text, ''));
  EXECUTE format('SET LOCAL app.users = %L', coalesce(users::text, ''));
END
$fn$;
