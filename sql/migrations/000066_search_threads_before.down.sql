DROP FUNCTION rr_search_threads(uuid, text, integer, uuid);
