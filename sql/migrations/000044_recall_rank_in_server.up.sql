-- Recall's final ranking moves out of rr_recall (docs/performance.md, "Recall's ranking in
-- the server").
--
-- rr_recall ranked its candidates (up to 60 from each of three channels, about 60 in all at
-- 10,000 entries) by word_similarity(q, title || ' ' || body) × confidence: about half of
-- the function's Postgres CPU, most of it pg_trgm making the trigrams of each candidate's
-- text (a case fold through wide characters per word under the database's locale). The
-- server computes the same number for ASCII text in a few microseconds an entry
-- (knowledge.wordSimilarity, held to pg_trgm by TestWordSimilarityMatchesPgTrgm), so the
-- function now returns its candidates, and the caller's query (KnowledgeRecall) asks
-- pg_trgm only for the entries it cannot leave to the server: non-ASCII text, whose word
-- characters and case folding follow the database's locale. The server applies the
-- floor, the order (score, then id) and the limit exactly as the function did. The
-- candidate channels are 000036's, unchanged.
--
-- The arguments change (floor and lim are the server's now), so the function is dropped
-- and created again, with its grant. Citus: still one static query keyed by the project
-- variable (a router query).

DROP FUNCTION rr_recall(text, text, text, real, integer, timestamptz);

CREATE FUNCTION rr_recall(q text, title_q text, want_kind text, at timestamptz)
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
  SELECT k.* FROM cand JOIN knowledge k ON k.project_id = proj AND k.id = cand.id
  WHERE k.status = 'trusted';
END
$fn$;

REVOKE ALL ON FUNCTION rr_recall(text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_recall(text, text, text, timestamptz) TO relayroom_app;
