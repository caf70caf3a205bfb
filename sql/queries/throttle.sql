-- Failed authentication counters (docs/auth-limits.md). AuthThrottleRecordFailures runs as the
-- request role under app.lookup naming its subjects; the prune runs as the owner.

-- name: AuthThrottleRecordFailures :many
-- Counts one refused authentication against each subject. A subject's window restarts when
-- it has ended; seconds_left is what remains of the window, which is how long a subject
-- over its limit stays blocked. Subjects are locked in order, so two concurrent refusals
-- naming the same subjects cannot deadlock.
INSERT INTO auth_throttle AS t (subject, window_start, failures)
SELECT s, now(), 1 FROM unnest(sqlc.arg(subjects)::text[]) AS s ORDER BY s
ON CONFLICT (subject) DO UPDATE SET
  window_start = CASE WHEN t.window_start + make_interval(secs => sqlc.arg(window_seconds)::float8) <= now()
                      THEN now() ELSE t.window_start END,
  failures = CASE WHEN t.window_start + make_interval(secs => sqlc.arg(window_seconds)::float8) <= now()
                  THEN 1 ELSE t.failures + 1 END
RETURNING subject, failures,
  extract(epoch FROM t.window_start + make_interval(secs => sqlc.arg(window_seconds)::float8) - now())::float8 AS seconds_left;

-- name: AuthThrottlePrune :execrows
DELETE FROM auth_throttle
WHERE window_start + make_interval(secs => sqlc.arg(window_seconds)::float8) < now();

-- name: AuthThrottleFailures :many
-- The live counts of the subjects, read before an unknown credential is checked: a
-- subject at its limit on another replica is refused here too, without checking anything.
SELECT subject, failures,
  extract(epoch FROM window_start + make_interval(secs => sqlc.arg(window_seconds)::float8) - now())::float8 AS seconds_left
FROM auth_throttle
WHERE subject = ANY (sqlc.arg(subjects)::text[])
  AND window_start + make_interval(secs => sqlc.arg(window_seconds)::float8) > now();

-- name: AuthVerifiedRecord :exec
-- Records an agent key the database has just accepted, for every replica, until
-- verified_until (sqlc.arg(seconds) from now); run under app.lookup naming its subject.
INSERT INTO auth_verified AS v (subject, credential_hash, verified_until)
VALUES (sqlc.arg(subject)::text, sqlc.arg(credential_hash)::bytea, now() + make_interval(secs => sqlc.arg(seconds)::float8))
ON CONFLICT (subject, credential_hash) DO UPDATE SET verified_until = excluded.verified_until;

-- name: AuthVerifiedList :many
-- The credentials of the blocked key ids verified by any replica and still live, read when
-- a replica learns the blocks: their holders pass the blocks here too.
SELECT subject, credential_hash,
  extract(epoch FROM verified_until - now())::float8 AS seconds_left
FROM auth_verified
WHERE subject = ANY (sqlc.arg(subjects)::text[]) AND verified_until > now();

-- name: AuthVerifiedPrune :execrows
DELETE FROM auth_verified WHERE verified_until < now();
