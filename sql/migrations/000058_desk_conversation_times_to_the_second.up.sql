-- A conversation's times as answers show them, to the second: lists sort on the stored
-- times, then by id, and a finer stored time ordered two conversations of one shown
-- second by fractions no client sees. The service stores whole seconds from now on
-- (desk.stamp); this truncates what it stored before. The functions are the immutable
-- forms (timestamp without time zone), which Citus runs on distributed tables.
UPDATE desk_conversation SET
  created_at = date_trunc('second', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
  updated_at = date_trunc('second', updated_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
  resolved_at = date_trunc('second', resolved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
  first_reply_at = date_trunc('second', first_reply_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
  first_resolved_at = date_trunc('second', first_resolved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
WHERE created_at <> date_trunc('second', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
   OR updated_at <> date_trunc('second', updated_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
   OR resolved_at <> date_trunc('second', resolved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
   OR first_reply_at <> date_trunc('second', first_reply_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
   OR first_resolved_at <> date_trunc('second', first_resolved_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
