-- rr_recall as migration 000003 made it (ALTER FUNCTION … RESET drops the setting).
CREATE OR REPLACE FUNCTION rr_recall(q text, title_q text, want_kind text, floor real, lim integer, at timestamptz)
RETURNS SETOF knowledge
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  WITH cand AS (
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
ALTER FUNCTION rr_recall(text, text, text, real, integer, timestamptz) RESET pg_trgm.similarity_threshold;
DROP TRIGGER IF EXISTS knowledge_words ON knowledge;
DROP FUNCTION IF EXISTS rr_knowledge_words();
DROP TABLE IF EXISTS knowledge_word;
