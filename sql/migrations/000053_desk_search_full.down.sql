DROP FUNCTION IF EXISTS desk_search_add(tsvector, text);
