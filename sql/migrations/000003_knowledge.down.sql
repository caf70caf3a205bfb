DROP FUNCTION IF EXISTS rr_near_duplicate(text, text, real, real);
DROP FUNCTION IF EXISTS rr_recall(text, text, text, real, integer, timestamptz);
DROP TABLE IF EXISTS ci_token, recall_use, recall_query, knowledge;
-- btree_gin stays, like pg_trgm and vector: other schemas in the database may use it.
