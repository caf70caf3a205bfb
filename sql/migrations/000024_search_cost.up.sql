-- Recall and learn's near-duplicate check, cheaper at the same results (docs/performance.md,
-- "Search and memory rows"). Both stay PL/pgSQL with every query keyed by the project as
-- a parameter, so Citus still routes them to the project's shard group (000016).
--
-- rr_recall:
-- * The typo channel looks up corrections only for a query word the project does not
--   hold: a word that is in knowledge_word is spelt as some entry spells it, and the word
--   channel already finds that entry by its stem. With realistic text every query word is
--   known, and the channel's trigram scan of the project's vocabulary (three words, each
--   rechecking hundreds of trigram neighbours) was the largest part of a recall.
-- * Each channel hands over at most three times the requested limit (it was three times
--   the largest limit, 20): the final ranking computes word_similarity over the whole
--   entry for every candidate, about 100 µs each, and that was the rest of the cost.
-- * pg_trgm.similarity_threshold is 0.5 for the function (its SET clause), so the
--   typo channel's `%` narrows the words inside the index; the explicit
--   similarity() >= 0.5 stays, for Citus workers, which do not see the clause.
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

-- rr_near_duplicate: the title index is searched at the title similarity the check
-- requires (min_title, 0.6 by default), not at pg_trgm's default 0.3, at which nearly
-- every title of ordinary words (sharing "the", "and", "for") was fetched and rechecked.
-- set_config(…, true) inside a function with a SET clause for the same setting lasts until
-- the function returns. Citus workers keep 0.3 and the explicit similarity() conditions,
-- so the answer is the same everywhere.
CREATE OR REPLACE FUNCTION rr_near_duplicate(new_title text, new_text text, min_title real, min_text real)
RETURNS uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET pg_trgm.similarity_threshold = 0.3 AS $fn$
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
