-- The desk's search text (desk_search_add, each public message's words) and its queries
-- (desk_query) use desk_words (000070): accents are folded on both sides, so a word is
-- found whichever way it was written or typed. The statements that write a conversation's
-- first search text and the saved-reply search say desk_words themselves
-- (sql/queries/desk.sql); 000072 folds the search text already stored.
DO $do$
BEGIN
  EXECUTE $fn$
CREATE OR REPLACE FUNCTION desk_query(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
           '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''':*', ' & '), '')::tsquery
  FROM unnest(to_tsvector('desk_words', q))
$$
$fn$;
  EXECUTE $fn$
CREATE OR REPLACE FUNCTION desk_search_add(cur tsvector, body text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN cur || strip(to_tsvector('desk_words', body));
EXCEPTION WHEN program_limit_exceeded THEN
  RETURN cur;
END
$$
$fn$;
END
$do$;
