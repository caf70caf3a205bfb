-- Recall's typo channel for body words. The title channel finds a misspelt title word by
-- trigrams, but a word that occurs only in an entry's body was reached by full text alone,
-- which needs the exact stem ("cloudfrnt" found nothing though "cloudfront" was in the
-- body). knowledge_word holds every distinct word of a project's entries; recall maps each
-- query word to the project's closest words by trigram similarity and searches those
-- words' stems by full text, on the same per-project index as the word channel.
CREATE TABLE knowledge_word (
  project_id uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  word       text NOT NULL,
  PRIMARY KEY (project_id, word)
);
CREATE INDEX knowledge_word_trgm_idx ON knowledge_word USING gin (project_id, word gin_trgm_ops);

ALTER TABLE knowledge_word ENABLE ROW LEVEL SECURITY;
ALTER TABLE knowledge_word FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON knowledge_word TO relayroom_app USING (project_id = rr_project());
DO $$
BEGIN
  EXECUTE format('CREATE POLICY operator ON knowledge_word TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge_word TO relayroom_app;

-- Words of 4 to 40 letters: shorter ones are too close to everything by trigrams, longer
-- ones are identifiers that a typo search does not help with. A word is never removed:
-- one that no entry holds any more only adds a search term that matches nothing.
CREATE FUNCTION rr_knowledge_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO knowledge_word (project_id, word)
  SELECT NEW.project_id, w
  FROM unnest(tsvector_to_array(to_tsvector('simple', NEW.title || ' ' || NEW.body))) AS w
  WHERE length(w) BETWEEN 4 AND 40 AND w ~ '^[[:alpha:]]+$'
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END
$$;
CREATE TRIGGER knowledge_words AFTER INSERT OR UPDATE OF title, body ON knowledge
  FOR EACH ROW EXECUTE FUNCTION rr_knowledge_words();

INSERT INTO knowledge_word (project_id, word)
SELECT DISTINCT k.project_id, w
FROM knowledge k, unnest(tsvector_to_array(to_tsvector('simple', k.title || ' ' || k.body))) AS w
WHERE length(w) BETWEEN 4 AND 40 AND w ~ '^[[:alpha:]]+$'
ON CONFLICT DO NOTHING;

-- rr_recall gains the third channel; the first two are unchanged (see migration 000003).
-- Each query word of 4+ letters is replaced by at most 3 project words at trigram
-- similarity >= 0.5, and entries holding their stems are candidates, best ts_rank first.
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
