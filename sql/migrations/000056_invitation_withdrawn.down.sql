ALTER TABLE org_invitation DROP COLUMN IF EXISTS withdrawn_at;
