-- Idempotency keys (docs/idempotency.md): a client's Idempotency-Key on a write tool call.
--
-- A row is inserted by the tool's own write transaction, pipelined before its COMMIT, so
-- the record that a key was used commits atomically with the write it guards: no write
-- without its record, no record without its write. The answer is stored right after, in
-- a second statement; a row without an answer older than a request can live means the
-- process died between the two (the write happened, its answer is lost).
--
-- Org-scoped: a key belongs to the calling agent (its organisation is the tenant, also
-- when it acts as a guest in another company's room), never to the room it writes in.
CREATE TABLE idempotency_key (
  org_id       uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  agent_id     uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  -- The rest of the principal: the endpoint and what its URL binds (project and part),
  -- so the same key used through two addresses or as two parts names two requests.
  principal    text NOT NULL CHECK (octet_length(principal) <= 300),
  key          text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
  -- SHA-256 of the canonical request: endpoint, tool, arguments (not the JSON-RPC id).
  fingerprint  bytea NOT NULL CHECK (octet_length(fingerprint) = 32),
  tool         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- The answer as sent (the encoded tool result), NULL until stored. bytea, not jsonb:
  -- a replay must be byte for byte the first answer, and jsonb reorders keys.
  response     bytea,
  answered_at  timestamptz,
  PRIMARY KEY (org_id, agent_id, principal, key)
);
-- The periodic clean-up of keys older than 24 h.
CREATE INDEX idempotency_key_created_idx ON idempotency_key (created_at);

ALTER TABLE idempotency_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_key FORCE ROW LEVEL SECURITY;
-- Only the agent that used a key sees it, within its organisation.
CREATE POLICY tenant ON idempotency_key TO relayroom_app
  USING (org_id = rr_org() AND agent_id = rr_agent());

DO $$
BEGIN
  EXECUTE format('CREATE POLICY operator ON idempotency_key TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_key TO relayroom_app;
