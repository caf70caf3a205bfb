-- Threads between the parts of a project: threads, their messages, who takes part, each
-- recipient's inbox row, activity events, the composing indicator and daily usage.
-- Every table is project-scoped: project_id leads the primary key and every unique index.

-- btree_gin: GIN indexes that lead with project_id (search; knowledge in 000003). Kept by
-- the down migration, like pg_trgm.
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TABLE thread (
  project_id       uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id               uuid NOT NULL,
  subject          text NOT NULL CHECK (length(subject) BETWEEN 1 AND 200),
  status           text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed', 'canceled')),
  created_by       uuid,
  -- A message with needsHuman from a part holding the capability flags the thread for people.
  needs_human      boolean NOT NULL DEFAULT false,
  last_message_at  timestamptz NOT NULL DEFAULT now(),
  closed_at        timestamptz,
  -- agent (close tool), idle (the auto-close job) or person (canceled by a person)
  closed_by        text CHECK (closed_by IN ('agent', 'idle', 'person')),
  closed_by_member uuid,
  -- The lesson of the thread, once decided: the outcome code (recorded or a refusal).
  lesson_outcome   text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, created_by) REFERENCES membership (project_id, id) ON DELETE SET NULL (created_by),
  CHECK ((status = 'open') = (closed_at IS NULL))
);
CREATE INDEX thread_subject_trgm_idx ON thread USING gin (project_id, subject gin_trgm_ops);
-- The idle auto-close sweep, across projects.
CREATE INDEX thread_idle_idx ON thread (last_message_at) WHERE status = 'open';

CREATE TABLE message (
  project_id   uuid NOT NULL,
  id           uuid NOT NULL,
  thread_id    uuid NOT NULL,
  sender_id    uuid,
  from_part    text NOT NULL,
  body         text NOT NULL CHECK (length(body) BETWEEN 1 AND 20000),
  urgent       boolean NOT NULL DEFAULT false,
  needs_human  boolean NOT NULL DEFAULT false,
  broadcast    boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, thread_id) REFERENCES thread (project_id, id) ON DELETE CASCADE,
  FOREIGN KEY (project_id, sender_id) REFERENCES membership (project_id, id) ON DELETE SET NULL (sender_id)
);
CREATE INDEX message_thread_idx ON message (project_id, thread_id, id);
-- search: substrings of bodies and subjects, by project then trigram.
CREATE INDEX message_body_trgm_idx ON message USING gin (project_id, body gin_trgm_ops);

-- The parts that take part in a thread: its sender, its recipients, whoever replied.
CREATE TABLE participant (
  project_id  uuid NOT NULL,
  thread_id   uuid NOT NULL,
  member_id   uuid NOT NULL,
  joined_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, thread_id, member_id),
  FOREIGN KEY (project_id, thread_id) REFERENCES thread (project_id, id) ON DELETE CASCADE,
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
);
CREATE INDEX participant_member_idx ON participant (project_id, member_id, thread_id DESC);

-- One inbox row per recipient and message. open turns false when the thread ends, so the
-- message leaves the inbox; read_at is set by ack, and by close for every participant.
CREATE TABLE delivery (
  project_id  uuid NOT NULL,
  member_id   uuid NOT NULL,
  message_id  uuid NOT NULL,
  thread_id   uuid NOT NULL,
  open        boolean NOT NULL DEFAULT true,
  read_at     timestamptz,
  PRIMARY KEY (project_id, member_id, message_id),
  FOREIGN KEY (project_id, message_id) REFERENCES message (project_id, id) ON DELETE CASCADE,
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
);
-- inbox: newest first, open only; the unread variant for unreadOnly.
CREATE INDEX delivery_inbox_idx ON delivery (project_id, member_id, message_id DESC) WHERE open;
CREATE INDEX delivery_unread_idx ON delivery (project_id, member_id, message_id DESC) WHERE open AND read_at IS NULL;
CREATE INDEX delivery_thread_idx ON delivery (project_id, thread_id);

-- Activity: every event an agent records except composing.
CREATE TABLE activity_event (
  project_id  uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id          uuid NOT NULL,
  member_id   uuid,
  type        text NOT NULL CHECK (type ~ '^[a-z][a-z0-9_.-]{0,39}$'),
  detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
  usage       jsonb,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE SET NULL (member_id)
);

-- The live "composing" indicator: one row per part and thread, shown until expires_at.
CREATE TABLE composing (
  project_id  uuid NOT NULL,
  thread_id   uuid NOT NULL,
  member_id   uuid NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (project_id, thread_id, member_id),
  FOREIGN KEY (project_id, thread_id) REFERENCES thread (project_id, id) ON DELETE CASCADE,
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
);

-- Usage per project, part, model and UTC day, for the dashboard's charts.
CREATE TABLE usage_daily (
  project_id     uuid NOT NULL,
  member_id      uuid NOT NULL,
  model          text NOT NULL,
  day            date NOT NULL,
  events         bigint NOT NULL DEFAULT 0,
  input_tokens   bigint NOT NULL DEFAULT 0,
  output_tokens  bigint NOT NULL DEFAULT 0,
  cache_tokens   bigint NOT NULL DEFAULT 0,
  cost_usd       numeric(18, 6) NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, member_id, model, day),
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
);

-- rr_search_threads is search's query: threads of the transaction's project (rr_project(),
-- never an argument) that member does not take part in, whose subject or any message
-- contains pattern (ILIKE). It runs as the tables' owner because under row-level security
-- PostgreSQL never uses a non-leakproof operator (ILIKE) as an index condition, which
-- would leave search to read every message of the project; and it plans each call with
-- its pattern (EXECUTE … USING), so a rare text uses the trigram indexes and a common one
-- walks threads newest first and stops at the limit.
CREATE FUNCTION rr_search_threads(member uuid, pattern text, lim integer) RETURNS SETOF thread
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
REVOKE ALL ON FUNCTION rr_search_threads(uuid, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_search_threads(uuid, text, integer) TO relayroom_app;

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['thread', 'message', 'participant', 'delivery', 'activity_event',
                           'composing', 'usage_daily'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant ON %I TO relayroom_app USING (project_id = rr_project())', t);
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO relayroom_app', t);
  END LOOP;
END
$$;
