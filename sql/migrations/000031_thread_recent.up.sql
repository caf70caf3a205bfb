-- The dashboard's thread list (ThreadListForPeople) shows a project's threads most
-- recently active first, 100 at a time: without this index it read and sorted every
-- thread of the project (100k threads: a sequential scan and a top-N sort). The thread's
-- own partial index on last_message_at (open threads, for the idle close) does not serve
-- closed and canceled threads. ThreadTouch already moves last_message_at at most once a
-- second per thread and is not a HOT update (that partial index), so this index adds one
-- entry per touch.
CREATE INDEX thread_recent_idx ON thread (project_id, last_message_at DESC, id DESC);
