-- rr_recall as 000024 left it: its query runs with EXECUTE, planned on every call
-- (CREATE OR REPLACE also drops 000036's SET clauses).

CREATE OR REPLACE FUNCTION rr_recall(q text, title_q text, want_kind text, floor real, lim integer, at timestamptz)
RETURNS SETOF knowledge
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET pg_trgm.similarity_threshold = 0.5 AS $fn$
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
               AND NOT EXISTS (SELECT 1 FROM knowledge_word known
                               WHERE known.project_id = $1 AND known.word = qws.qw)
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
     LIMIT $8)
    UNION
    (SELECT k.id FROM knowledge k
     WHERE k.project_id = $1 AND k.status = 'trusted' AND k.title %> $3
       AND (k.expires_at IS NULL OR k.expires_at > $7)
       AND ($4::text IS NULL OR k.kind = $4)
     ORDER BY word_similarity($3, k.title) DESC
     LIMIT $8)
    UNION
    (SELECT k.id FROM knowledge k, fixed
     WHERE fixed.tsq IS NOT NULL
       AND k.project_id = $1 AND k.status = 'trusted' AND k.tsv @@ fixed.tsq
       AND (k.expires_at IS NULL OR k.expires_at > $7)
       AND ($4::text IS NULL OR k.kind = $4)
     ORDER BY ts_rank(k.tsv, fixed.tsq) DESC
     LIMIT $8)
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
  $q$ USING proj, q, title_q, want_kind, floor, lim, at, 60;
END
$fn$;
