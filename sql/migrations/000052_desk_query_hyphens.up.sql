-- desk_query finds words with a hyphen, a dot or a slash in them ("add-on", "e-mail",
-- "acme.test/help").
--
-- It built its query as text and handed it to to_tsquery, whose parser reads a quoted
-- lexeme again: 'add-on':* became the phrase 'add-on':* <-> 'add':* <-> 'on':*, and a
-- phrase never matches the conversations' search text, which is stripped of positions.
-- So a query with such a word found nothing. The text is now cast to tsquery, which
-- takes each quoted lexeme as it is (they are already lexemes of the simple
-- configuration: lower-cased, nothing more). Every word must still match, as a prefix.
CREATE OR REPLACE FUNCTION desk_query(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
           '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''':*', ' & '), '')::tsquery
  FROM unnest(to_tsvector('simple', q))
$$;
