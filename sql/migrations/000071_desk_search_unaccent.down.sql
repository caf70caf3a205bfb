-- Back to 'simple' (000052's desk_query, 000053's desk_search_add). The search text 000072
-- folded stays folded: a query with an accent no longer finds such a word.
DO $do$
BEGIN
  EXECUTE $fn$
CREATE OR REPLACE FUNCTION desk_query(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
           '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''':*', ' & '), '')::tsquery
  FROM unnest(to_tsvector('simple', q))
$$
$fn$;
  EXECUTE $fn$
CREATE OR REPLACE FUNCTION desk_search_add(cur tsvector, body text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN cur || strip(to_tsvector('simple', body));
EXCEPTION WHEN program_limit_exceeded THEN
  RETURN cur;
END
$$
$fn$;
END
$do$;
