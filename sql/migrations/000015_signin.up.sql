-- People's sign-in and the OAuth 2.1 authorization server (docs/auth.md).
--
-- Three service tables belong to no tenant: a browser session (a person spans
-- organisations), an OAuth client (registered anonymously, before anyone signs in) and a
-- pending authorization request (made before anyone signs in). Like auth_throttle they are
-- exempt from the tenant-column rules and held to the RLS ones
-- (internal/pg/catalog_test.go): the request role sees exactly the rows whose public id a
-- transaction names in app.lookup, as authentication does for agent keys.
--
-- Grants (what a person consented to: a client acting at one resource as one agent, part
-- or workspace) and their tokens are org-scoped: org_id leads every key, and the request
-- role sees its organisation's rows or the row whose public id it names (a code, a token).

CREATE TABLE web_session (
  session_id   text PRIMARY KEY CHECK (length(session_id) <= 64),
  secret_hash  bytea NOT NULL,
  user_id      uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL
);
CREATE INDEX web_session_expires_idx ON web_session (expires_at);
CREATE INDEX web_session_user_idx ON web_session (user_id);

CREATE TABLE oauth_client (
  client_id      text PRIMARY KEY CHECK (length(client_id) BETWEEN 1 AND 2048),
  client_name    text NOT NULL DEFAULT '' CHECK (length(client_name) <= 200),
  redirect_uris  text[] NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 20),
  source         text NOT NULL CHECK (source IN ('registration', 'metadata_document')),
  -- A client ID metadata document is fetched again after this (its HTTP caching headers).
  fetched_until  timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  last_used_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at     timestamptz
);
CREATE INDEX oauth_client_last_used_idx ON oauth_client (last_used_at);

CREATE TABLE oauth_auth_request (
  id              text PRIMARY KEY CHECK (length(id) <= 64),
  client_id       text NOT NULL REFERENCES oauth_client (client_id) ON DELETE CASCADE,
  redirect_uri    text NOT NULL,
  state           text NOT NULL DEFAULT '',
  code_challenge  text NOT NULL,
  resource        text NOT NULL,
  scopes          text[] NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL
);
CREATE INDEX oauth_auth_request_expires_idx ON oauth_auth_request (expires_at);

CREATE TABLE oauth_grant (
  org_id           uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id               uuid NOT NULL,
  client_id        text NOT NULL REFERENCES oauth_client (client_id) ON DELETE CASCADE,
  user_id          uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
  resource         text NOT NULL,
  -- Who the tokens act as: an agent (rooms, threads with its part) or, for the desk, the
  -- person in the workspace (org_id) with the granted scopes.
  agent_id         uuid REFERENCES agent (id) ON DELETE CASCADE,
  part             text,
  scopes           text[] NOT NULL DEFAULT '{}',
  -- The authorization code (single use, short-lived), then kept to recognise a replay.
  code_id          text NOT NULL,
  code_hash        bytea NOT NULL,
  code_challenge   text NOT NULL,
  redirect_uri     text NOT NULL,
  code_expires_at  timestamptz NOT NULL,
  code_used_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  revoked_at       timestamptz,
  PRIMARY KEY (org_id, id)
);
CREATE INDEX oauth_grant_code_idx ON oauth_grant (code_id);
CREATE INDEX oauth_grant_user_idx ON oauth_grant (org_id, user_id);

CREATE TABLE oauth_token (
  org_id       uuid NOT NULL,
  token_id     text NOT NULL,
  grant_id     uuid NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('access', 'refresh')),
  secret_hash  bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  -- A refresh token's first use (its successor was issued then); it stays accepted until
  -- the successor is used, then its reuse revokes the grant.
  used_at      timestamptz,
  revoked_at   timestamptz,
  PRIMARY KEY (org_id, token_id),
  FOREIGN KEY (org_id, grant_id) REFERENCES oauth_grant (org_id, id) ON DELETE CASCADE
);
-- Not unique by constraint (a unique index must lead with org_id): the id is 48 random
-- bits and verification checks the hash of every row it finds, as for agent keys.
CREATE INDEX oauth_token_lookup_idx ON oauth_token (token_id);
CREATE INDEX oauth_token_grant_idx ON oauth_token (org_id, grant_id);
CREATE INDEX oauth_token_expires_idx ON oauth_token (expires_at);

ALTER TABLE web_session ENABLE ROW LEVEL SECURITY;
ALTER TABLE web_session FORCE ROW LEVEL SECURITY;
CREATE POLICY lookup ON web_session TO relayroom_app USING (session_id = ANY (rr_lookup()));

ALTER TABLE oauth_client ENABLE ROW LEVEL SECURITY;
ALTER TABLE oauth_client FORCE ROW LEVEL SECURITY;
-- A client is also visible through a pending request named in app.lookup (the consent page
-- shows its name) and through its organisation's grants (tokens end with their client).
CREATE POLICY lookup ON oauth_client TO relayroom_app USING (
  client_id = ANY (rr_lookup())
  OR EXISTS (SELECT 1 FROM oauth_auth_request r WHERE r.client_id = oauth_client.client_id AND r.id = ANY (rr_lookup()))
  OR EXISTS (SELECT 1 FROM oauth_grant g WHERE g.client_id = oauth_client.client_id AND g.org_id = rr_org())
);

ALTER TABLE oauth_auth_request ENABLE ROW LEVEL SECURITY;
ALTER TABLE oauth_auth_request FORCE ROW LEVEL SECURITY;
CREATE POLICY lookup ON oauth_auth_request TO relayroom_app USING (id = ANY (rr_lookup()));

ALTER TABLE oauth_grant ENABLE ROW LEVEL SECURITY;
ALTER TABLE oauth_grant FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON oauth_grant TO relayroom_app USING (org_id = rr_org() OR code_id = ANY (rr_lookup()));

ALTER TABLE oauth_token ENABLE ROW LEVEL SECURITY;
ALTER TABLE oauth_token FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON oauth_token TO relayroom_app USING (org_id = rr_org() OR token_id = ANY (rr_lookup()));

-- Signing in reads the person by the email typed (named in app.lookup); a session names
-- its person and that person's organisations. Nothing else of app_user or org_member
-- becomes visible through them.
CREATE POLICY signin ON app_user TO relayroom_app USING (
  email = ANY (rr_lookup())
  OR EXISTS (SELECT 1 FROM web_session s WHERE s.user_id = app_user.id AND s.session_id = ANY (rr_lookup()))
);
CREATE POLICY signin ON org_member TO relayroom_app USING (
  EXISTS (SELECT 1 FROM web_session s WHERE s.user_id = org_member.user_id AND s.session_id = ANY (rr_lookup()))
);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['web_session', 'oauth_client', 'oauth_auth_request', 'oauth_grant', 'oauth_token'] LOOP
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON web_session, oauth_client, oauth_auth_request, oauth_grant, oauth_token TO relayroom_app;
