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
