DROP FUNCTION IF EXISTS rr_desk_search_candidates(text, text, bigint, timestamptz, bigint, integer);
DROP FUNCTION IF EXISTS desk_matches(tsvector, tsquery);
DROP FUNCTION IF EXISTS desk_index_first(tsvector);
