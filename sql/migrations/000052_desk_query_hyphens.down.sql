-- Restores 000014's desk_query, which found nothing for a word with a hyphen in it.
CREATE OR REPLACE FUNCTION desk_query(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_tsquery('simple', coalesce(string_agg(
           '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''':*', ' & '), ''))
  FROM unnest(to_tsvector('simple', q))
$$;
