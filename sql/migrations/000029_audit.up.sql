-- The audit trail (docs/dashboard.md, "Audit"): who changed what, when, shown on the page
-- of the object. One row per change, written by the service in the transaction of the
-- change itself (audit.Record), so a change that fails leaves no row and a row never
-- describes a change that did not happen. Never updated or deleted: the request role may
-- only read and insert.
--
-- Org-scoped: org_id is the organisation that owns the object (a project's host for
-- anything in a room, the organisation itself for its agents, people and clients).
-- actor_org_id is the organisation the actor acted for (a guest's person acting in the
-- host's room), party_org_id the other company an object concerns (the guest of an
-- agreement), who may read that object's history too.
CREATE TABLE audit_event (
  org_id uuid NOT NULL REFERENCES organisation (id),
  id uuid NOT NULL,
  at timestamptz NOT NULL DEFAULT now(),
  actor_org_id uuid NOT NULL REFERENCES organisation (id),
  actor_user_id uuid REFERENCES app_user (id), -- NULL: the operator's CLI or the service itself
  actor_name text NOT NULL CHECK (length(actor_name) BETWEEN 1 AND 200),
  party_org_id uuid REFERENCES organisation (id),
  project_id uuid REFERENCES project (id),
  object_kind text NOT NULL CHECK (object_kind ~ '^[a-z][a-z_]{0,39}$'),
  object_id text NOT NULL CHECK (length(object_id) BETWEEN 1 AND 200),
  action text NOT NULL CHECK (action ~ '^[a-z][a-z_]{0,39}$'),
  detail jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object' AND octet_length(detail::text) <= 4096),
  PRIMARY KEY (org_id, id)
);

-- An object's history, newest first (audit.History).
CREATE INDEX audit_event_object ON audit_event (org_id, object_kind, object_id, at DESC);

ALTER TABLE audit_event ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_event FORCE ROW LEVEL SECURITY;
-- Read: the owner's rows, the rows of what one's organisation did, and the history of
-- objects it is a party to. Write: only as one's own organisation, into its own history
-- or into the history of the room the transaction is admitted to (a guest's person
-- accepting a result in the host's room); rr_project() is set only after admission.
CREATE POLICY tenant ON audit_event TO relayroom_app
  USING (org_id = rr_org() OR actor_org_id = rr_org() OR party_org_id = rr_org())
  WITH CHECK (actor_org_id = rr_org() AND (org_id = rr_org() OR project_id = rr_project()));
CREATE POLICY operator ON audit_event TO CURRENT_USER USING (true) WITH CHECK (true);
GRANT SELECT, INSERT ON audit_event TO relayroom_app;
