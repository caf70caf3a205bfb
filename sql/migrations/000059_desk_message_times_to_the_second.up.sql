-- A message's time as answers show it, to the second (as 000058 for conversations): a
-- conversation's messages sort by time, then by id.
UPDATE desk_message SET created_at = date_trunc('second', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
WHERE created_at <> date_trunc('second', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
