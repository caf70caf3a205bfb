-- Knowledge: entries agents propose (candidates) and people or CI make trusted, the recall
-- queries that returned them (for recall_used and the hit rate), and project CI tokens.

-- btree_gin lets a GIN index lead with project_id and carry words or trigrams after it:
-- a recall's index scans are driven by its own project's key and never return another
-- project's entries (a plain gin_trgm_ops index hands back every project's matches; see
-- docs/knowledge.md). Extensions are kept by the down migration, like pg_trgm.
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TABLE knowledge (
  project_id        uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id                uuid NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('fact', 'procedure', 'pitfall', 'decision')),
  title             text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
  body              text NOT NULL CHECK (length(body) BETWEEN 1 AND 5000),
  status            text NOT NULL DEFAULT 'candidate'
                    CHECK (status IN ('candidate', 'trusted', 'demoted', 'rejected', 'expired')),
  confidence        real NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
  -- learn (an agent's call) or lesson (written with close)
  source            text NOT NULL CHECK (source IN ('learn', 'lesson')),
  source_thread_id  uuid,
  author_member_id  uuid,
  author_agent_id   uuid,
  author_part       text,
  -- A near-duplicate of an existing entry is linked to it and reviewed with it.
  duplicate_of      uuid,
  contradictions    integer NOT NULL DEFAULT 0,
  expires_at        timestamptz,
  decided_by        text,
  decided_at        timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  -- recall's first stage: the entry's words (English stems), for a per-project GIN.
  tsv               tsvector GENERATED ALWAYS AS (to_tsvector('english', title || ' ' || body)) STORED,
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, duplicate_of) REFERENCES knowledge (project_id, id) ON DELETE SET NULL (duplicate_of)
);
-- recall, first stage: the project's trusted entries sharing a word with the query.
CREATE INDEX knowledge_trusted_fts_idx ON knowledge USING gin (project_id, tsv) WHERE status = 'trusted';
-- recall's second channel (titles close to the query, typos included) and the
-- near-duplicate check on write: the project's live entries, by title trigram.
CREATE INDEX knowledge_live_trgm_idx ON knowledge USING gin (project_id, title gin_trgm_ops)
  WHERE status IN ('candidate', 'trusted');
CREATE INDEX knowledge_review_idx ON knowledge (project_id, status, created_at);
-- 60 lessons per agent per hour.
CREATE INDEX knowledge_lesson_rate_idx ON knowledge (project_id, author_agent_id, created_at) WHERE source = 'lesson';
-- the expiry sweep, across projects.
CREATE INDEX knowledge_expiry_idx ON knowledge (expires_at) WHERE status IN ('candidate', 'trusted') AND expires_at IS NOT NULL;

-- rr_recall is recall's query. It runs as the tables' owner (SECURITY DEFINER) for one
-- reason: under row-level security PostgreSQL may not use a non-leakproof operator (@@,
-- %>) as an index condition, so the request role's recall could only filter the project's
-- rows one by one. The function takes no project argument: it reads exactly the
-- transaction's tenant, rr_project(), and returns nothing when it is unset.
-- Two bounded stages on indexes that lead with project_id: candidates are the project's
-- trusted, unexpired entries sharing a word with the query (full text, best ts_rank first)
-- plus those whose title is close to it by trigrams (typos; the caller sets
-- pg_trgm.word_similarity_threshold), at most 60 each (three times the largest limit); they are ranked by trigram word
-- similarity of the query to title and body × confidence, above the floor.
CREATE FUNCTION rr_recall(q text, title_q text, want_kind text, floor real, lim integer, at timestamptz)
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
REVOKE ALL ON FUNCTION rr_recall(text, text, text, real, integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_recall(text, text, text, real, integer, timestamptz) TO relayroom_app;

-- rr_near_duplicate finds the live entry of the transaction's project that a new entry
-- repeats, for the same reason and under the same rule as rr_recall (owner's rights so
-- the title trigram index is usable, rr_project() only).
CREATE FUNCTION rr_near_duplicate(new_title text, new_text text, min_title real, min_text real)
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
REVOKE ALL ON FUNCTION rr_near_duplicate(text, text, real, real) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_near_duplicate(text, text, real, real) TO relayroom_app;

CREATE TABLE recall_query (
  project_id  uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id          uuid NOT NULL,
  member_id   uuid,
  query       text NOT NULL,
  returned    uuid[] NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id)
);

CREATE TABLE recall_use (
  project_id    uuid NOT NULL,
  query_id      uuid NOT NULL,
  knowledge_id  uuid NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, query_id, knowledge_id),
  FOREIGN KEY (project_id, query_id) REFERENCES recall_query (project_id, id) ON DELETE CASCADE
);

-- CI tokens (qyt_ci_…) let a project's CI confirm candidates over HTTP. Stored hashed,
-- looked up by the public id like connect codes.
CREATE TABLE ci_token (
  project_id   uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id           uuid NOT NULL,
  token_id     text NOT NULL,
  secret_hash  bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz,
  PRIMARY KEY (project_id, id)
);
CREATE INDEX ci_token_lookup_idx ON ci_token (token_id);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['knowledge', 'recall_query', 'recall_use', 'ci_token'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO relayroom_app', t);
  END LOOP;
END
$$;
CREATE POLICY tenant ON knowledge TO relayroom_app USING (project_id = rr_project());
CREATE POLICY tenant ON recall_query TO relayroom_app USING (project_id = rr_project());
CREATE POLICY tenant ON recall_use TO relayroom_app USING (project_id = rr_project());
CREATE POLICY tenant ON ci_token TO relayroom_app USING (project_id = rr_project() OR token_id = ANY (rr_lookup()));
