-- The functions as migrations 000002, 000003, 000011 and 000013 left them.

CREATE OR REPLACE FUNCTION rr_recall(q text, title_q text, want_kind text, floor real, lim integer, at timestamptz)
RETURNS SETOF knowledge
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  WITH fixed AS (
    SELECT to_tsquery('english', string_agg(quote_literal(f.word), ' | ')) AS tsq
    FROM (SELECT DISTINCT lower(qw) AS qw FROM regexp_split_to_table(title_q, '[^[:alpha:]]+') AS qw
          WHERE length(qw) BETWEEN 4 AND 40) qws,
    LATERAL (SELECT w.word FROM knowledge_word w
             WHERE w.project_id = rr_project() AND w.word % qws.qw AND w.word <> qws.qw
             ORDER BY similarity(w.word, qws.qw) DESC, w.word
             LIMIT 3) f
  ),
  cand AS (
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = rr_project() AND k.status = 'trusted'
       AND k.tsv @@ replace(plainto_tsquery('english', q)::text, '&', '|')::tsquery
       AND (k.expires_at IS NULL OR k.expires_at > at)
       AND (want_kind IS NULL OR k.kind = want_kind)
     ORDER BY ts_rank(k.tsv, replace(plainto_tsquery('english', q)::text, '&', '|')::tsquery) DESC
     LIMIT 60)
    UNION
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = rr_project() AND k.status = 'trusted' AND k.title %> title_q
       AND (k.expires_at IS NULL OR k.expires_at > at)
       AND (want_kind IS NULL OR k.kind = want_kind)
     ORDER BY word_similarity(title_q, k.title) DESC
     LIMIT 60)
    UNION
    (SELECT k.id FROM knowledge k, fixed
     WHERE fixed.tsq IS NOT NULL
       AND k.project_id = rr_project() AND k.status = 'trusted' AND k.tsv @@ fixed.tsq
       AND (k.expires_at IS NULL OR k.expires_at > at)
       AND (want_kind IS NULL OR k.kind = want_kind)
     ORDER BY ts_rank(k.tsv, fixed.tsq) DESC
     LIMIT 60)
  )
  SELECT (s.k).* FROM (
    SELECT k, word_similarity(q, k.title || ' ' || k.body) * k.confidence AS score
    FROM cand JOIN knowledge k ON k.project_id = rr_project() AND k.id = cand.id
    WHERE k.status = 'trusted'
    OFFSET 0
  ) s
  WHERE s.score >= floor
  ORDER BY s.score DESC, (s.k).id
  LIMIT lim
$$;
ALTER FUNCTION rr_recall(text, text, text, real, integer, timestamptz) SET pg_trgm.similarity_threshold = 0.5;

CREATE OR REPLACE FUNCTION rr_near_duplicate(new_title text, new_text text, min_title real, min_text real)
RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT k.id FROM knowledge k
  WHERE k.project_id = rr_project() AND k.status IN ('candidate', 'trusted')
    AND k.title % new_title
    AND similarity(k.title, new_title) >= min_title
    AND similarity(k.title || ' ' || k.body, new_text) >= min_text
  ORDER BY similarity(k.title || ' ' || k.body, new_text) DESC, k.id
  LIMIT 1
$$;

CREATE OR REPLACE FUNCTION rr_search_threads(member uuid, pattern text, lim integer) RETURNS SETOF thread
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
  RETURN QUERY EXECUTE
    'SELECT t.* FROM thread t
     WHERE t.project_id = rr_project()
       AND NOT EXISTS (SELECT 1 FROM participant p
                       WHERE p.project_id = t.project_id AND p.thread_id = t.id AND p.member_id = $1)
       AND (t.subject ILIKE $2 OR EXISTS (SELECT 1 FROM message m
                       WHERE m.project_id = t.project_id AND m.thread_id = t.id AND m.body ILIKE $2))
     ORDER BY t.id DESC
     LIMIT $3'
    USING member, pattern, lim;
END
$$;

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
    SELECT p.host_org_id = org OR EXISTS (SELECT 1 FROM agreement ag
             WHERE ag.project_id = p.id AND ag.guest_org_id = org AND ag.status = 'active')
      INTO admitted FROM project p WHERE p.id = proj;
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
  PERFORM set_config('app.orgs', coalesce(orgs::text, ''), true),
    set_config('app.projects', coalesce(projects::text, ''), true),
    set_config('app.agents', coalesce(agents::text, ''), true),
    set_config('app.users', coalesce(users::text, ''), true);
END
$fn$;
