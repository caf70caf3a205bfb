-- The audit trail (docs/dashboard.md, "Audit"), and invitations (below): who changed
-- what, when, shown on the page of the object. One row per change, written by the service in the transaction of the
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
  -- The actor's organisation's name when it acted: a reader's directory may not show
  -- that organisation (a host does not see an invited company with no parts in its room).
  actor_org_name text NOT NULL DEFAULT '',
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

-- People invited by email from the dashboard's People page: a one-time link (a
-- credential like the others, `qyt_iv_…`, stored as its SHA-256 and found by its public
-- id) that the invited person opens to join the organisation with the role given,
-- creating their account when they have none. Org-scoped; read and written by the admin
-- service (the operator's pool), by the public id only when the link is opened.
CREATE TABLE org_invitation (
  org_id              uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id                  uuid NOT NULL,
  invite_id           text NOT NULL CHECK (length(invite_id) = 8),
  secret_hash         bytea NOT NULL,
  email               text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 320),
  role                text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  invited_by_user_id  uuid REFERENCES app_user (id) ON DELETE SET NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  expires_at          timestamptz NOT NULL,
  accepted_at         timestamptz,
  accepted_user_id    uuid REFERENCES app_user (id) ON DELETE SET NULL,
  PRIMARY KEY (org_id, id)
);
CREATE INDEX org_invitation_invite_idx ON org_invitation (invite_id);

ALTER TABLE org_invitation ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_invitation FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON org_invitation TO relayroom_app USING (org_id = rr_org());
CREATE POLICY operator ON org_invitation TO CURRENT_USER USING (true) WITH CHECK (true);
GRANT SELECT, INSERT, UPDATE ON org_invitation TO relayroom_app;
