-- The refresh token each refresh token was rotated from. Rotation's grace ends for a
-- token's own predecessor only (its siblings, issued to two refreshers at once, both stay
-- live), and a used token presented after its grace whose successors were never used gets
-- a new successor instead of revoking the grant (docs/auth.md, "rotation with grace").
-- Tokens issued before have none, and keep the rules they were issued under.
ALTER TABLE oauth_token ADD COLUMN parent_id text;
