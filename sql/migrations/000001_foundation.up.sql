-- Foundation: organisations, people, agents, projects (rooms), memberships, agreements,
-- agent keys and connect codes, with row-level security for the request role.
--
-- Table classes (checked by internal/pg/catalog_test.go):
--   reference tables  organisation, app_user, project, agent: small directories keyed by id.
--                     Under Citus they become reference tables.
--   org-scoped        org_id is the first column of the primary key and of every unique index.
--   project-scoped    project_id is the first column of the primary key and of every unique index.
-- A foreign key between two scoped tables of one kind includes the tenant column; a
-- project-scoped table never references an org-scoped one.

CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS vector;

-- The role every request runs as (the service switches to it with SET ROLE on each
-- connection). It owns nothing and cannot bypass RLS. Roles are cluster-wide, so it is
-- created only when missing and never dropped by a down migration.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'relayroom_app') THEN
    CREATE ROLE relayroom_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
  END IF;
  IF NOT pg_has_role(current_user, 'relayroom_app', 'MEMBER') THEN
    EXECUTE format('GRANT relayroom_app TO %I', current_user);
  END IF;
END
$$;
GRANT USAGE ON SCHEMA public TO relayroom_app;

-- The tenant of the current transaction, set with set_config(…, true) by internal/pg.
-- Unset or empty means NULL, and every policy then matches nothing: fail closed.
CREATE FUNCTION rr_org() RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.org_id', true), '')::uuid $$;
CREATE FUNCTION rr_project() RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.project_id', true), '')::uuid $$;
CREATE FUNCTION rr_agent() RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.agent_id', true), '')::uuid $$;
-- The public id parts of the credentials being verified (comma separated): lets
-- authentication read exactly the key and connect-code rows it names before the tenant is
-- known, in one query.
CREATE FUNCTION rr_lookup() RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT string_to_array(nullif(current_setting('app.lookup', true), ''), ',') $$;

CREATE TABLE organisation (
  id          uuid PRIMARY KEY,
  slug        text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  plan        text NOT NULL DEFAULT 'trial' CHECK (plan IN ('trial', 'starter', 'growth', 'scale')),
  timezone    text NOT NULL DEFAULT 'UTC',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX organisation_slug_key ON organisation (slug);

CREATE TABLE app_user (
  id             uuid PRIMARY KEY,
  email          text NOT NULL CHECK (email = lower(email) AND email LIKE '%_@_%'),
  name           text NOT NULL DEFAULT '',
  password_hash  text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX app_user_email_key ON app_user (email);

CREATE TABLE org_member (
  org_id      uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  user_id     uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_member_user_idx ON org_member (user_id);

CREATE TABLE agent (
  id          uuid PRIMARY KEY,
  org_id      uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  slug        text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  model       text NOT NULL DEFAULT '',
  kind        text NOT NULL DEFAULT 'session' CHECK (kind IN ('always_on', 'session')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX agent_org_slug_key ON agent (org_id, slug);

CREATE TABLE agent_key (
  org_id       uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id           uuid NOT NULL,
  agent_id     uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  key_id       text NOT NULL,
  secret_hash  bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz,
  PRIMARY KEY (org_id, id)
);
-- Not unique across tenants by constraint (a unique index must lead with org_id); the
-- key id is 48 random bits and authentication checks the hash of every row it finds.
CREATE INDEX agent_key_lookup_idx ON agent_key (key_id);
CREATE INDEX agent_key_agent_idx ON agent_key (org_id, agent_id);

CREATE TABLE project (
  id                uuid PRIMARY KEY,
  host_org_id       uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  slug              text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name              text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  settings          jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(settings) = 'object'),
  knowledge_config  jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(knowledge_config) = 'object'),
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX project_host_slug_key ON project (host_org_id, slug);

CREATE TABLE connect_code (
  project_id   uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id           uuid NOT NULL,
  code_id      text NOT NULL,
  secret_hash  bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz,
  PRIMARY KEY (project_id, id)
);
CREATE INDEX connect_code_lookup_idx ON connect_code (code_id);

CREATE TABLE membership (
  project_id    uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  id            uuid NOT NULL,
  agent_id      uuid NOT NULL REFERENCES agent (id) ON DELETE CASCADE,
  org_id        uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  part          text NOT NULL CHECK (part ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  is_main       boolean NOT NULL DEFAULT false,
  nickname      text,
  access        text NOT NULL DEFAULT 'write' CHECK (access IN ('read', 'write', 'manager')),
  capabilities  text[] NOT NULL DEFAULT '{}' CHECK (capabilities <@ ARRAY['urgent', 'needsHuman']::text[]),
  last_seen_at  timestamptz,
  parked_until  timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX membership_part_key ON membership (project_id, part);
CREATE UNIQUE INDEX membership_agent_key ON membership (project_id, agent_id);
-- At most one main agent per project.
CREATE UNIQUE INDEX membership_main_key ON membership (project_id) WHERE is_main;
-- An agent's rooms across projects (the all-rooms address).
CREATE INDEX membership_agent_idx ON membership (agent_id);

CREATE TABLE agreement (
  project_id    uuid NOT NULL REFERENCES project (id) ON DELETE CASCADE,
  guest_org_id  uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'revoked')),
  grants        text[] NOT NULL DEFAULT '{}'
                CHECK (grants <@ ARRAY['read_memory', 'write_memory', 'assign_tasks']::text[]),
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, guest_org_id)
);
CREATE INDEX agreement_guest_idx ON agreement (guest_org_id);

-- Row-level security. Every table is FORCEd so even its owner is checked; the owner (the
-- migrating role, used by `relayroom admin` and cross-tenant sweeps) gets an explicit
-- operator policy, created below for whoever runs this migration. The request role only
-- sees the current tenant's rows.
ALTER TABLE organisation ENABLE ROW LEVEL SECURITY;
ALTER TABLE organisation FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON organisation TO relayroom_app USING (
  id = rr_org()
  OR EXISTS (SELECT 1 FROM project p WHERE p.id = rr_project() AND p.host_org_id = organisation.id)
  OR EXISTS (SELECT 1 FROM membership m WHERE m.project_id = rr_project() AND m.org_id = organisation.id)
  OR EXISTS (SELECT 1 FROM membership m JOIN project p ON p.id = m.project_id
             WHERE m.agent_id = rr_agent() AND p.host_org_id = organisation.id)
);

ALTER TABLE app_user ENABLE ROW LEVEL SECURITY;
ALTER TABLE app_user FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON app_user TO relayroom_app USING (
  EXISTS (SELECT 1 FROM org_member om WHERE om.user_id = app_user.id AND om.org_id = rr_org())
);

ALTER TABLE org_member ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_member FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON org_member TO relayroom_app USING (org_id = rr_org());

ALTER TABLE agent ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON agent TO relayroom_app USING (
  org_id = rr_org()
  OR EXISTS (SELECT 1 FROM membership m WHERE m.project_id = rr_project() AND m.agent_id = agent.id)
);

ALTER TABLE agent_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_key FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON agent_key TO relayroom_app USING (org_id = rr_org() OR key_id = ANY (rr_lookup()));

ALTER TABLE project ENABLE ROW LEVEL SECURITY;
ALTER TABLE project FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON project TO relayroom_app USING (
  id = rr_project()
  OR host_org_id = rr_org()
  OR EXISTS (SELECT 1 FROM membership m WHERE m.project_id = project.id AND m.agent_id = rr_agent())
);

ALTER TABLE connect_code ENABLE ROW LEVEL SECURITY;
ALTER TABLE connect_code FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON connect_code TO relayroom_app USING (project_id = rr_project() OR code_id = ANY (rr_lookup()));

ALTER TABLE membership ENABLE ROW LEVEL SECURITY;
ALTER TABLE membership FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON membership TO relayroom_app USING (project_id = rr_project() OR agent_id = rr_agent());

ALTER TABLE agreement ENABLE ROW LEVEL SECURITY;
ALTER TABLE agreement FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON agreement TO relayroom_app USING (project_id = rr_project() OR guest_org_id = rr_org());

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['organisation', 'app_user', 'org_member', 'agent', 'agent_key',
                           'project', 'connect_code', 'membership', 'agreement'] LOOP
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON organisation, app_user, org_member, agent, agent_key,
  project, connect_code, membership, agreement TO relayroom_app;
GRANT EXECUTE ON FUNCTION rr_org(), rr_project(), rr_agent(), rr_lookup() TO relayroom_app;
