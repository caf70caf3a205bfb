ALTER TABLE org_member DROP COLUMN deactivated_at;

DELETE FROM desk_token WHERE 'ingest:write' = ANY (scopes);
ALTER TABLE desk_token DROP CONSTRAINT desk_token_scopes_check;
ALTER TABLE desk_token ADD CONSTRAINT desk_token_scopes_check CHECK (scopes <@ ARRAY['conversations:read', 'inboxes:read',
  'saved_replies:read', 'reports:read', 'notes:write']::text[]);
