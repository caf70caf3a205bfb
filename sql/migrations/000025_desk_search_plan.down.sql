CREATE INDEX IF NOT EXISTS desk_conversation_created_idx ON desk_conversation (org_id, created_at);
CREATE INDEX IF NOT EXISTS desk_conversation_first_reply_idx ON desk_conversation (org_id, first_reply_at) WHERE first_reply_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS desk_conversation_resolved_idx ON desk_conversation (org_id, resolved_at) WHERE resolved_at IS NOT NULL;
DROP INDEX IF EXISTS desk_conversation_created_report_idx;
DROP INDEX IF EXISTS desk_conversation_first_reply_report_idx;
DROP INDEX IF EXISTS desk_conversation_resolved_report_idx;
DROP FUNCTION IF EXISTS rr_desk_search_candidates(text, text, bigint, timestamptz, bigint, integer);
DROP FUNCTION IF EXISTS desk_matches(tsvector, tsquery);
DROP FUNCTION IF EXISTS desk_index_first(tsvector);
