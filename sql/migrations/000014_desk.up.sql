-- The desk toolset's data (docs/desk.md): a helpdesk workspace is an organisation (its
-- plan and IANA timezone are the organisation's), its people are the organisation's
-- members (org_member, roles owner/admin/member).
--
-- Every table is org-scoped: org_id leads the primary key and every unique index, foreign
-- keys between them include org_id, and the only policy the request role has is
-- `org_id = rr_org()` (no subquery: Citus refuses them in policies). The one exception is
-- desk_token, which authentication reads by its public id before the workspace is known,
-- like agent_key.
--
-- Public ids are a kind prefix and a number counted per workspace (conv_12, inbox_2,
-- msg_40, note_41, reply_3): they tell nothing about any other workspace. desk_counter
-- hands the numbers out.

-- The words of a search as a query: every word must match, as a prefix of a word of the
-- text ("import" finds "imports"), case-insensitively, in any order. A query without
-- any word matches nothing.
CREATE FUNCTION desk_query(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_tsquery('simple', coalesce(string_agg(
           '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''':*', ' & '), ''))
  FROM unnest(to_tsvector('simple', q))
$$;

CREATE TABLE desk_counter (
  org_id  uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  kind    text NOT NULL CHECK (kind IN ('inbox', 'conversation', 'message', 'reply')),
  last    bigint NOT NULL CHECK (last >= 0),
  PRIMARY KEY (org_id, kind)
);

CREATE TABLE desk_inbox (
  org_id              uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id                  bigint NOT NULL CHECK (id > 0),
  slug                text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name                text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  -- true: only the members listed in desk_inbox_member (and owners and admins) see it.
  restricted          boolean NOT NULL DEFAULT false,
  -- Settings of the mail connection: stored, never returned by any tool. The secret is
  -- sealed (AES-GCM under RELAYROOM_SECRET_KEY, like webhook secrets) before it is stored.
  forwarding_address  text CHECK (length(forwarding_address) <= 320),
  connection_secret   bytea,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, id)
);
CREATE UNIQUE INDEX desk_inbox_slug_key ON desk_inbox (org_id, slug);

CREATE TABLE desk_inbox_member (
  org_id    uuid NOT NULL,
  inbox_id  bigint NOT NULL,
  user_id   uuid NOT NULL,
  PRIMARY KEY (org_id, inbox_id, user_id),
  FOREIGN KEY (org_id, inbox_id) REFERENCES desk_inbox (org_id, id) ON DELETE CASCADE,
  FOREIGN KEY (org_id, user_id) REFERENCES org_member (org_id, user_id) ON DELETE CASCADE
);

CREATE TABLE desk_conversation (
  org_id            uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id                bigint NOT NULL CHECK (id > 0),
  inbox_id          bigint NOT NULL,
  subject           text NOT NULL CHECK (length(subject) <= 1000),
  status            text NOT NULL CHECK (status IN ('open', 'pending', 'resolved')),
  assignee_user_id  uuid,
  customer_email    text NOT NULL CHECK (length(customer_email) BETWEEN 3 AND 320),
  customer_name     text NOT NULL DEFAULT '' CHECK (length(customer_name) <= 200),
  -- The sender's id of the conversation (ingest API, CSV import): one conversation per id.
  external_id       text CHECK (length(external_id) BETWEEN 1 AND 200),
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  resolved_at       timestamptz,
  -- The first public reply by a member (never a note or an automated notification).
  first_reply_at    timestamptz,
  -- Lexemes of the subject and of every public message (never a note), stripped of
  -- positions: what search matches, per conversation, so all the words of a query may
  -- come from different messages.
  search            tsvector NOT NULL DEFAULT ''::tsvector,
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, inbox_id) REFERENCES desk_inbox (org_id, id) ON DELETE CASCADE,
  FOREIGN KEY (org_id, assignee_user_id) REFERENCES org_member (org_id, user_id) ON DELETE SET NULL (assignee_user_id),
  -- Resolved conversations have their resolution time, except imported history that does
  -- not know it (left out of resolution reports rather than counted as instant).
  CHECK (status = 'resolved' OR resolved_at IS NULL)
);
CREATE UNIQUE INDEX desk_conversation_external_key ON desk_conversation (org_id, external_id) WHERE external_id IS NOT NULL;
-- Search's order and keyset (updated_at desc, id asc), with its filters.
CREATE INDEX desk_conversation_updated_idx ON desk_conversation (org_id, updated_at DESC, id);
CREATE INDEX desk_conversation_inbox_idx ON desk_conversation (org_id, inbox_id, status);
CREATE INDEX desk_conversation_search_idx ON desk_conversation USING gin (search);
-- Reports read conversations by the time of the event they count.
CREATE INDEX desk_conversation_created_idx ON desk_conversation (org_id, created_at);
CREATE INDEX desk_conversation_first_reply_idx ON desk_conversation (org_id, first_reply_at) WHERE first_reply_at IS NOT NULL;
CREATE INDEX desk_conversation_resolved_idx ON desk_conversation (org_id, resolved_at) WHERE resolved_at IS NOT NULL;

CREATE TABLE desk_message (
  org_id           uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id               bigint NOT NULL CHECK (id > 0),
  conversation_id  bigint NOT NULL,
  -- customer: from the customer; reply: a member's public reply; note: private, internal;
  -- automated: a notification the system sent.
  type             text NOT NULL CHECK (type IN ('customer', 'reply', 'note', 'automated')),
  body             text NOT NULL CHECK (length(body) <= 100000),
  -- The member who wrote a reply or a note; kept when they leave the workspace.
  author_user_id   uuid REFERENCES app_user (id) ON DELETE SET NULL,
  -- Attachments as metadata only: [{"filename": …, "size": …}].
  attachments      jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(attachments) = 'array'),
  external_id      text CHECK (length(external_id) BETWEEN 1 AND 200),
  created_at       timestamptz NOT NULL,
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, conversation_id) REFERENCES desk_conversation (org_id, id) ON DELETE CASCADE
);
CREATE INDEX desk_message_conversation_idx ON desk_message (org_id, conversation_id, created_at, id);
CREATE UNIQUE INDEX desk_message_external_key ON desk_message (org_id, external_id) WHERE external_id IS NOT NULL;

CREATE TABLE desk_saved_reply (
  org_id      uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id          bigint NOT NULL CHECK (id > 0),
  slug        text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  title       text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
  body        text NOT NULL CHECK (length(body) BETWEEN 1 AND 20000),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, id)
);
CREATE UNIQUE INDEX desk_saved_reply_slug_key ON desk_saved_reply (org_id, slug);
CREATE INDEX desk_saved_reply_title_idx ON desk_saved_reply (org_id, title, id);

-- relaydesk_add_private_note's idempotency_key: scoped to the member and the workspace,
-- remembered 24 hours. Inserted in the note's own transaction, so a key exists exactly
-- when its note does; a concurrent duplicate waits on the primary key and then replays.
CREATE TABLE desk_note_key (
  org_id       uuid NOT NULL,
  user_id      uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
  key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 128),
  -- SHA-256 of the call's arguments (conversation and body), compared on reuse.
  fingerprint  bytea NOT NULL CHECK (octet_length(fingerprint) = 32),
  message_id   bigint NOT NULL,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (org_id, user_id, key),
  FOREIGN KEY (org_id, message_id) REFERENCES desk_message (org_id, id) ON DELETE CASCADE
);
CREATE INDEX desk_note_key_created_idx ON desk_note_key (created_at);

-- Personal access tokens (qyt_pt_…): a person's credential for /desk/mcp, fixed to one
-- workspace, with scopes and an expiry. Stored as the SHA-256 of the token, found by its
-- public id. It references the person, not the membership: a token whose holder left the
-- workspace still verifies, and is answered AUTH_REQUIRED (the grant no longer stands).
CREATE TABLE desk_token (
  org_id        uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  id            uuid NOT NULL,
  user_id       uuid NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
  token_id      text NOT NULL,
  secret_hash   bytea NOT NULL,
  scopes        text[] NOT NULL CHECK (scopes <@ ARRAY['conversations:read', 'inboxes:read', 'saved_replies:read',
                                                      'reports:read', 'notes:write']::text[]),
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz,
  PRIMARY KEY (org_id, id)
);
CREATE INDEX desk_token_lookup_idx ON desk_token (token_id);
CREATE INDEX desk_token_user_idx ON desk_token (org_id, user_id);

-- Rate-limit counters of the desk tools (docs/desk.md): one fixed window per subject
-- (a member's reads, a member's writes, the workspace's reads, its writes), shared by every
-- replica. UNLOGGED like auth_throttle: a crash only starts the windows over.
CREATE UNLOGGED TABLE desk_rate (
  org_id        uuid NOT NULL REFERENCES organisation (id) ON DELETE CASCADE,
  subject       text NOT NULL CHECK (length(subject) <= 100),
  window_start  timestamptz NOT NULL,
  hits          integer NOT NULL CHECK (hits > 0),
  PRIMARY KEY (org_id, subject)
);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['desk_counter', 'desk_inbox', 'desk_inbox_member', 'desk_conversation', 'desk_message',
                           'desk_saved_reply', 'desk_note_key', 'desk_token', 'desk_rate'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    IF t <> 'desk_token' THEN
      EXECUTE format('CREATE POLICY tenant ON %I TO relayroom_app USING (org_id = rr_org())', t);
    END IF;
    EXECUTE format('CREATE POLICY operator ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO relayroom_app', t);
  END LOOP;
END
$$;
-- Authentication reads a token by the public id it presents, before the workspace is known.
CREATE POLICY tenant ON desk_token TO relayroom_app USING (org_id = rr_org() OR token_id = ANY (rr_lookup()))
  WITH CHECK (org_id = rr_org());
