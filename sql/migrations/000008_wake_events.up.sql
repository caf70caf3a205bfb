-- Wake events: queueing a wake appends one row per part and message instead of updating
-- the part's one pending wake (docs/wakes.md, docs/performance.md). Concurrent senders to
-- one part then insert side by side; before, each waited for the previous sender's row
-- lock on that wake until its commit (32 senders to one part: 0.07× a raw INSERT loop).
--
-- Events are folded into the pending wake (count, threads, sources, urgent, last item:
-- the coalescing) by whoever is about to deliver: a pager's claim folds its agent's
-- events, the webhook dispatch folds those of agents with a webhook, and the 30 s sweep
-- folds the rest, so the table stays small and the pending wake stays the one nudge a
-- part gets. A fold takes events with FOR UPDATE SKIP LOCKED: two folders never wait on
-- each other or fold an event twice, and no sender ever waits on a folder.
CREATE TABLE wake_event (
  project_id  uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id          uuid NOT NULL,
  member_id   uuid NOT NULL,
  -- agent_id and part are copied from the membership when the event is queued, so the
  -- pager's fold (agent tenant) needs no join.
  agent_id    uuid NOT NULL,
  part        text NOT NULL,
  source      text NOT NULL,
  urgent      boolean NOT NULL DEFAULT false,
  thread_id   uuid,
  item_id     uuid,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (project_id, id),
  FOREIGN KEY (project_id, member_id) REFERENCES membership (project_id, id) ON DELETE CASCADE
);
-- The pager's fold and the webhook dispatch's: an agent's events.
CREATE INDEX wake_event_agent_idx ON wake_event (agent_id);
-- Closing a thread deletes its events not folded yet.
CREATE INDEX wake_event_thread_idx ON wake_event (project_id, thread_id) WHERE thread_id IS NOT NULL;

ALTER TABLE wake_event ENABLE ROW LEVEL SECURITY;
ALTER TABLE wake_event FORCE ROW LEVEL SECURITY;
-- As for wake: a project's requests queue (and a closing thread deletes) its events; the
-- pager (agent tenant) folds its own.
CREATE POLICY tenant ON wake_event TO relayroom_app USING (project_id = rr_project() OR agent_id = rr_agent());
DO $$
BEGIN
  EXECUTE format('CREATE POLICY operator ON wake_event TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;
-- UPDATE only because a fold locks the events it takes (FOR UPDATE); nothing updates them.
GRANT SELECT, INSERT, UPDATE, DELETE ON wake_event TO relayroom_app;
