DROP FUNCTION IF EXISTS rr_search_threads(uuid, text, integer);
DROP TABLE IF EXISTS usage_daily, composing, activity_event, delivery, participant, message, thread;
-- btree_gin stays, like pg_trgm and vector: other schemas in the database may use it.
