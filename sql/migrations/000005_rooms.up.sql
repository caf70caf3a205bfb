-- Rooms: shared memory (with vectors per embedder), tasks with attachments, and the room
-- conversation (messages plus the cards memory writes and tasks leave in it).
-- Every table is project-scoped: project_id leads the primary key and every unique index.

CREATE TABLE memory_entry (
  project_id     uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id             uuid NOT NULL,
  org_id         uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  agent_id       uuid REFERENCES agent (id) ON DELETE SET NULL,
  model          text NOT NULL DEFAULT '',
  content        text NOT NULL CHECK (length(content) BETWEEN 1 AND 20000),
  tags           text[] NOT NULL DEFAULT '{}',
  category       text,
  is_decision    boolean NOT NULL DEFAULT false,
  is_private     boolean NOT NULL DEFAULT false,
  deprecated_at  timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  tsv            tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
  PRIMARY KEY (project_id, id)
);
CREATE INDEX memory_entry_tsv_idx ON memory_entry USING gin (tsv);
CREATE INDEX memory_entry_trgm_idx ON memory_entry USING gin (content gin_trgm_ops);
CREATE INDEX memory_entry_recent_idx ON memory_entry (project_id, created_at DESC);

-- One row per (entry, embedder) once the entry has been embedded by that embedder; a NULL
-- embedding means the embedder found no semantic signal (stored so it is not retried).
-- Vectors of different embedders are never compared: every query filters on embedder.
CREATE TABLE memory_vector (
  project_id  uuid NOT NULL,
  memory_id   uuid NOT NULL,
  embedder    text NOT NULL,
  embedding   vector,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, memory_id, embedder),
  FOREIGN KEY (project_id, memory_id) REFERENCES memory_entry (project_id, id) ON DELETE CASCADE
);
-- HNSW (cosine) for the default embedder's 100 dimensions. An index needs a fixed
-- dimension, so it is an expression index restricted to that embedder; other embedders
-- are searched exactly within the project until an index is added for them.
CREATE INDEX memory_vector_builtin_hnsw ON memory_vector
  USING hnsw ((embedding::vector(100)) vector_cosine_ops)
  WHERE embedder = 'builtin-glove100-v1' AND embedding IS NOT NULL;

CREATE TABLE room_task (
  project_id           uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id                   uuid NOT NULL,
  from_agent_id        uuid REFERENCES agent (id) ON DELETE SET NULL,
  from_org_id          uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  to_member_id         uuid NOT NULL,
  to_agent_id          uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  to_org_id            uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  goal                 text NOT NULL CHECK (length(goal) BETWEEN 1 AND 5000),
  priority             text NOT NULL DEFAULT 'normal' CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  deadline             timestamptz,
  memory_refs          uuid[] NOT NULL DEFAULT '{}',
  acceptance_criteria  text,
  verification_method  text,
  status               text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'in_progress', 'input_required', 'done', 'failed', 'rejected', 'canceled')),
  result               text,
  responded_at         timestamptz,
  review               text CHECK (review IN ('accepted', 'rejected')),
  review_comment       text,
  reviewed_at          timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, to_member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
);
CREATE INDEX room_task_inbox_idx ON room_task (project_id, to_agent_id, status, id);

CREATE TABLE task_attachment (
  project_id          uuid NOT NULL,
  id                  uuid NOT NULL,
  task_id             uuid NOT NULL,
  uploaded_by_org_id  uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  uploaded_by_agent   uuid REFERENCES agent (id) ON DELETE SET NULL,
  filename            text NOT NULL CHECK (length(filename) BETWEEN 1 AND 255),
  content_type        text NOT NULL,
  size_bytes          bigint NOT NULL,
  sha256              text NOT NULL,
  content             bytea NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, task_id) REFERENCES room_task (project_id, id) ON DELETE CASCADE
);
CREATE INDEX task_attachment_task_idx ON task_attachment (project_id, task_id, id);

-- The room's conversation. kind 'message' is a post; 'memory' and 'task' are the cards a
-- memory write, a task and a task's response leave. ids are UUIDv7: ordering by id is
-- ordering by time.
CREATE TABLE room_message (
  project_id      uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id              uuid NOT NULL,
  kind            text NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'memory', 'task')),
  author_agent_id uuid REFERENCES agent (id) ON DELETE SET NULL,
  author_user_id  uuid REFERENCES app_user (id) ON DELETE SET NULL,
  author_org_id   uuid REFERENCES organisation (id) ON DELETE SET NULL,
  author_model    text NOT NULL DEFAULT '',
  content         text NOT NULL CHECK (length(content) BETWEEN 1 AND 20000),
  ref_id          uuid,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id)
);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['memory_entry', 'memory_vector', 'room_task', 'task_attachment', 'room_message'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant ON %I TO relayroom_app USING (project_id = rr_project())', t);
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON memory_entry, memory_vector, room_task, task_attachment,
  room_message TO relayroom_app;

-- The lexical half of read_memory. Under row-level security Postgres does not use a
-- non-leakproof operator (tsvector @@ tsquery, ILIKE) as an index condition, so as the
-- request role every lexical search would scan the room's whole memory. This function
-- runs as its owner (whose operator policy is USING (true)) so the GIN indexes work, and
-- applies the tenant itself from the same transaction settings the policies read: the
-- caller's project (rr_project(), never an argument) and its organisation's visibility
-- (rr_org()). Unset settings are NULL and match nothing, as the policies do.
-- Three branches, each able to use its own index:
--   exact      the whole query as a substring (trigram index): names, ids, words that
--              neither the stemmer nor the embedder know;
--   allterms   full text with every word, ranked by cover density (queries of at most
--              four words: intersecting the posting lists of many common words costs
--              more than it finds — a longer question is served by the other halves);
--   someterms  full text with any word (a question rarely has every word in one entry).
-- A full-text branch ranks at most the newest 200 matches: ranking reads each candidate's
-- tsvector, and a query of common words matches most of a room.
CREATE FUNCTION rr_memory_lexical(q text, pattern text, cat text, tagf text[], lim int)
RETURNS TABLE (id uuid, score float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  proj uuid := rr_project();
  org  uuid := rr_org();
  tand tsquery := plainto_tsquery('english', q);
  tor  tsquery := replace(plainto_tsquery('english', q)::text, ' & ', ' | ')::tsquery;
BEGIN
  IF proj IS NULL OR org IS NULL THEN
    RETURN;
  END IF;
  -- EXECUTE plans each call with the actual values: a cached generic plan cannot tell a
  -- selective query from one matching most of the room.
  RETURN QUERY EXECUTE $q$
  WITH exact AS (
    SELECT e.id, 3.0::float8 AS score FROM memory_entry e
    WHERE $5::text IS NOT NULL AND e.project_id = $1 AND e.content ILIKE $5
      AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
      AND ($6::text IS NULL OR e.category = $6) AND (coalesce(cardinality($7::text[]), 0) = 0 OR e.tags && $7)
    ORDER BY e.id DESC LIMIT $8),
  allterms AS (
    SELECT c.id, 2.0 + ts_rank_cd(c.tsv, $3)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE $9 AND e.project_id = $1 AND e.tsv @@ $3
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
            AND ($6::text IS NULL OR e.category = $6) AND (coalesce(cardinality($7::text[]), 0) = 0 OR e.tags && $7)
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY score DESC LIMIT $8),
  someterms AS (
    SELECT c.id, ts_rank_cd(c.tsv, $4)::float8 AS score
    FROM (SELECT e.id, e.tsv FROM memory_entry e
          WHERE e.project_id = $1 AND e.tsv @@ $4
            AND e.deprecated_at IS NULL AND (NOT e.is_private OR e.org_id = $2)
            AND ($6::text IS NULL OR e.category = $6) AND (coalesce(cardinality($7::text[]), 0) = 0 OR e.tags && $7)
          ORDER BY e.id DESC LIMIT 200) c
    ORDER BY score DESC LIMIT $8)
  SELECT u.id, max(u.score) AS score
  FROM (SELECT * FROM exact UNION ALL SELECT * FROM allterms UNION ALL SELECT * FROM someterms) u
  GROUP BY u.id ORDER BY 2 DESC, 1 DESC LIMIT $8
  $q$ USING proj, org, tand, tor, pattern, cat, tagf, lim, numnode(tand) BETWEEN 1 AND 7;
END
$fn$;
REVOKE ALL ON FUNCTION rr_memory_lexical(text, text, text, text[], int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_memory_lexical(text, text, text, text[], int) TO relayroom_app;
