-- Policies and indexes go with their tables.
DROP POLICY IF EXISTS signin ON org_member;
DROP POLICY IF EXISTS signin ON app_user;
-- oauth_client's policy reads oauth_grant and oauth_auth_request: it goes first.
DROP POLICY IF EXISTS lookup ON oauth_client;
DROP TABLE IF EXISTS oauth_token;
DROP TABLE IF EXISTS oauth_grant;
DROP TABLE IF EXISTS oauth_auth_request;
DROP TABLE IF EXISTS oauth_client;
DROP TABLE IF EXISTS web_session;
