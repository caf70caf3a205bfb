-- Lessons per agent per hour, counted across every project the agent works in (the
-- threads contract: 60 lessons per agent per hour). The knowledge table cannot answer that
-- without reading other projects' rows, so each recorded lesson also leaves a row here, in
-- the agent's own organisation's tenant. Rows older than an hour are deleted by the next
-- lesson of the same agent, so the table stays at most an hour of lessons per agent.
CREATE TABLE agent_lesson (
  org_id     uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  agent_id   uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  id         uuid NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (org_id, agent_id, id)
);
CREATE INDEX agent_lesson_recent_idx ON agent_lesson (org_id, agent_id, created_at);

ALTER TABLE agent_lesson ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_lesson FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON agent_lesson TO relayroom_app USING (org_id = rr_org());
DO $$
BEGIN
  EXECUTE format('CREATE POLICY operator ON agent_lesson TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON agent_lesson TO relayroom_app;

-- The per-project count it replaces.
DROP INDEX IF EXISTS knowledge_lesson_rate_idx;
