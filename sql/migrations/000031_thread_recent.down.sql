DROP INDEX IF EXISTS thread_recent_idx;
