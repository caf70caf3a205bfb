-- The search function without a cursor (000016) is replaced by 000066's.
DROP FUNCTION IF EXISTS rr_search_threads(uuid, text, integer);
