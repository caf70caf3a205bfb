-- Wakes: a stored nudge telling an idle part that work is waiting (docs/wakes.md), and
-- each agent's webhook target.
--
-- A wake moves through:
--   pending    waiting for delivery. It is deliverable when the part is not parked and
--              (the wake is urgent, or the part has spent less than its budget in the
--              last hour); both are checked when a pager claims it or the dispatcher
--              hands it to a webhook, so the sweep never rewrites pending wakes.
--   claimed    taken by `relayroom pager` with a lease; replayed when the lease runs out
--   sending    handed to the webhook delivery job
--   delivered  acknowledged by the pager or accepted (2xx) by the webhook
--   canceled   its thread closed before delivery
--   dead       the webhook refused it, or every attempt failed (visible to people)
-- A wake is charged to its part's budget (charged_at) when first claimed or sent. At most
-- one pending wake per part: new work coalesces into it (count).

-- A project's wake budget per part per hour: settings.wakeBudgetPerHour, default 12; a
-- value that is not a non-negative number falls back to the default rather than failing a send.
CREATE FUNCTION rr_wake_budget(settings jsonb) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN jsonb_typeof(settings->'wakeBudgetPerHour') = 'number'
                AND (settings->>'wakeBudgetPerHour')::numeric BETWEEN 0 AND 100000
           THEN floor((settings->>'wakeBudgetPerHour')::numeric)::integer ELSE 12 END $$;

CREATE TABLE wake (
  project_id     uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id             uuid NOT NULL,
  member_id      uuid NOT NULL,
  agent_id       uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  part           text NOT NULL,
  status         text NOT NULL CHECK (status IN ('pending', 'claimed', 'sending', 'delivered', 'canceled', 'dead')),
  urgent         boolean NOT NULL DEFAULT false,
  sources        text[] NOT NULL DEFAULT '{}',
  -- count = sum of thread_counts values + other_count: the items that asked for this wake.
  count          integer NOT NULL DEFAULT 0 CHECK (count >= 0),
  thread_counts  jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(thread_counts) = 'object'),
  other_count    integer NOT NULL DEFAULT 0 CHECK (other_count >= 0),
  last_item_id   uuid,
  charged_at     timestamptz,
  lease_until    timestamptz,
  attempts       integer NOT NULL DEFAULT 0,
  last_error     text,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  delivered_at   timestamptz,
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
) WITH (fillfactor = 80);
-- Coalescing rewrites a pending wake on every message; no index covers the columns it
-- changes (count, thread_counts, updated_at, …) so those updates stay HOT, and the
-- fillfactor leaves them room on the page.
-- Coalescing: one pending wake per part.
CREATE UNIQUE INDEX wake_open_key ON wake (project_id, member_id) WHERE status = 'pending';
-- The pager's claim and the webhook dispatch: an agent's deliverable wakes, oldest first
-- (and claimed ones, whose lease may have run out).
CREATE INDEX wake_agent_idx ON wake (agent_id, created_at) WHERE status IN ('pending', 'claimed');
-- The budget: wakes charged to a part in the last hour.
CREATE INDEX wake_charge_idx ON wake (project_id, member_id, charged_at) WHERE charged_at IS NOT NULL;
-- Dead letters, for people (on created_at, never updated, so coalescing stays HOT).
CREATE INDEX wake_dead_idx ON wake (created_at) WHERE status = 'dead';
-- The sweep's resume: parked parts.
CREATE INDEX membership_parked_idx ON membership (parked_until) WHERE parked_until IS NOT NULL;

-- An agent's webhook: the secret is AES-256-GCM ciphertext (nonce first) under the
-- server's RELAYROOM_SECRET_KEY, never plaintext at rest.
CREATE TABLE wake_target (
  org_id      uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  agent_id    uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  url         text NOT NULL CHECK (url ~ '^https?://'),
  secret_enc  bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, agent_id)
);
CREATE INDEX wake_target_agent_idx ON wake_target (agent_id);

ALTER TABLE wake ENABLE ROW LEVEL SECURITY;
ALTER TABLE wake FORCE ROW LEVEL SECURITY;
-- A project's requests queue and cancel its wakes; the pager (agent tenant) claims its own.
CREATE POLICY tenant ON wake TO relayroom_app USING (project_id = rr_project() OR agent_id = rr_agent());

ALTER TABLE wake_target ENABLE ROW LEVEL SECURITY;
ALTER TABLE wake_target FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON wake_target TO relayroom_app USING (org_id = rr_org());

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['wake', 'wake_target'] LOOP
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON wake, wake_target TO relayroom_app;
GRANT EXECUTE ON FUNCTION rr_wake_budget(jsonb) TO relayroom_app;
