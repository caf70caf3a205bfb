ALTER TABLE oauth_token DROP COLUMN IF EXISTS parent_id;
