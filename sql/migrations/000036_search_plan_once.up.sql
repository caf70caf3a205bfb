-- Recall plans once per connection instead of once per call (docs/performance.md,
-- "Planning the search functions once").
--
-- rr_recall ran its query with EXECUTE, which parses and plans it on every call with the
-- call's values. At 10,000 entries the planning was most of its Postgres time: its plan
-- alone cost more CPU than running it, a quarter of that in estimating the title
-- channel's `title %> query` (pg_trgm's estimator runs word_similarity over the column's
-- whole statistics sample). Each branch of the query is served by its own index whatever
-- the words (the GIN indexes of the tsvectors and of the trigrams; the "rare versus
-- common word" choice EXECUTE was kept for never changed the plan), so it is now a static
-- PL/pgSQL query, prepared on a connection's first call, with plan_cache_mode =
-- force_generic_plan so the cached plan is kept. Same query, same parameters, same
-- answers (compared on 105 recall queries at 10,000 entries).
--
-- rr_memory_lexical was made static the same way on its branch (planning was about three
-- times its execution), and is left as it was: on a Citus coordinator its static form
-- failed CI's plan test with an internal error ("cache lookup failed for type"), which
-- EXECUTE's one-shot plans never met.
--
-- Citus: the query still reads the project from a variable that PL/pgSQL passes as a
-- parameter (Citus's own advice for functions with parameters). A coordinator cannot make
-- a generic plan of a router query, so `relayroom migrate citus` resets plan_cache_mode
-- there (pg.Distribute, docs/scale.md). The explicit similarity() >= 0.5 stays for the
-- workers, as in 000016.

CREATE OR REPLACE FUNCTION rr_recall(q text, title_q text, want_kind text, floor real, lim integer, at timestamptz)
RETURNS SETOF knowledge
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET pg_trgm.similarity_threshold = 0.5
  SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  proj uuid := rr_project();
  -- Each channel's candidates (the reasons are 000024's).
  candidates constant integer := 60;
BEGIN
  IF proj IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY
  WITH fixed AS (
    SELECT to_tsquery('english', string_agg(quote_literal(f.word), ' | ')) AS tsq
    FROM (SELECT DISTINCT lower(qw) AS qw FROM regexp_split_to_table(title_q, '[^[:alpha:]]+') AS qw
          WHERE length(qw) BETWEEN 4 AND 40) qws,
    LATERAL (SELECT w.word FROM knowledge_word w
             WHERE w.project_id = proj AND w.word % qws.qw AND similarity(w.word, qws.qw) >= 0.5
               AND w.word <> qws.qw
               AND NOT EXISTS (SELECT 1 FROM knowledge_word known
                               WHERE known.project_id = proj AND known.word = qws.qw)
             ORDER BY similarity(w.word, qws.qw) DESC, w.word
             LIMIT 3) f
  ),
  cand AS (
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = proj AND k.status = 'trusted'
       AND k.tsv @@ replace(plainto_tsquery('english', q)::text, '&', '|')::tsquery
       AND (k.expires_at IS NULL OR k.expires_at > at)
       AND (want_kind IS NULL OR k.kind = want_kind)
     ORDER BY ts_rank(k.tsv, replace(plainto_tsquery('english', q)::text, '&', '|')::tsquery) DESC
     LIMIT candidates)
    UNION
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = proj AND k.status = 'trusted' AND k.title %> title_q
       AND (k.expires_at IS NULL OR k.expires_at > at)
       AND (want_kind IS NULL OR k.kind = want_kind)
     ORDER BY word_similarity(title_q, k.title) DESC
     LIMIT candidates)
    UNION
    (SELECT k.id FROM knowledge k, fixed
     WHERE fixed.tsq IS NOT NULL
       AND k.project_id = proj AND k.status = 'trusted' AND k.tsv @@ fixed.tsq
       AND (k.expires_at IS NULL OR k.expires_at > at)
       AND (want_kind IS NULL OR k.kind = want_kind)
     ORDER BY ts_rank(k.tsv, fixed.tsq) DESC
     LIMIT candidates)
  )
  SELECT (s.k).* FROM (
    SELECT k, word_similarity(q, k.title || ' ' || k.body) * k.confidence AS score
    FROM cand JOIN knowledge k ON k.project_id = proj AND k.id = cand.id
    WHERE k.status = 'trusted'
    OFFSET 0
  ) s
  WHERE s.score >= floor
  ORDER BY s.score DESC, (s.k).id
  LIMIT lim;
END
$fn$;
