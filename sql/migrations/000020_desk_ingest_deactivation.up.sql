-- The desk's ingest API, sealed inbox secrets and member deactivation (docs/desk.md).
--
-- ingest:write lets a personal access token of an owner or admin write a workspace's
-- conversations and messages through POST /api/desk/…; it is not an MCP scope.
ALTER TABLE desk_token DROP CONSTRAINT desk_token_scopes_check;
ALTER TABLE desk_token ADD CONSTRAINT desk_token_scopes_check CHECK (scopes <@ ARRAY['conversations:read', 'inboxes:read',
  'saved_replies:read', 'reports:read', 'notes:write', 'ingest:write']::text[]);

-- A deactivated member keeps their membership (role, restricted inboxes, assignments)
-- and everything they wrote, but no credential of theirs is honoured in the workspace:
-- their tokens verify and are answered AUTH_REQUIRED from the next call on.
ALTER TABLE org_member ADD COLUMN deactivated_at timestamptz;
