-- People's sign-in (internal/web, docs/auth.md). Runs as the request role: the email typed
-- or the session id is named in app.lookup, which is all the service tables' and
-- app_user's sign-in policies show.

-- name: PersonGetByEmail :one
SELECT id, password_hash FROM app_user WHERE email = sqlc.arg(email)::text;

-- name: WebSessionInsert :exec
INSERT INTO web_session (session_id, secret_hash, user_id, expires_at)
VALUES (sqlc.arg(session_id), sqlc.arg(secret_hash), sqlc.arg(user_id), sqlc.arg(expires_at));

-- name: WebSessionRows :many
-- A session and its person; the hash is compared in Go.
SELECT s.secret_hash, s.user_id, u.email, u.name
FROM web_session s JOIN app_user u ON u.id = s.user_id
WHERE s.session_id = sqlc.arg(session_id)::text AND s.expires_at > now();

-- name: WebSessionDelete :exec
DELETE FROM web_session WHERE session_id = sqlc.arg(session_id)::text;

-- name: WebSessionListOrgs :many
-- The organisations of a session's person (the session named in app.lookup). The session
-- is a scalar subquery, not a join: on Citus, joining org_member (sharded) with
-- web_session (a table of the coordinator) crashed the coordinator's backend (signal 11,
-- Citus 13.2.2), while the subquery is planned on its own first. A deactivated membership
-- is listed, marked, so that its pages can say why they refuse the person.
SELECT om.org_id, om.role, (om.deactivated_at IS NOT NULL)::boolean AS deactivated FROM org_member om
WHERE om.user_id = (SELECT s.user_id FROM web_session s WHERE s.session_id = sqlc.arg(session_id)::text)
ORDER BY om.created_at, om.org_id;

-- name: WebSessionPrune :execrows
DELETE FROM web_session WHERE expires_at < now();
