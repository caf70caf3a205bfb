-- desk_words: the text search configuration of the desk's search text and queries. It is
-- 'simple' (every word as it is, lower-cased, no stemming, no stop words: a helpdesk is
-- searched in any language) with accents folded first, so that a customer who wrote
-- "café" is found by an agent typing "cafe", and "Élan" by "ELAN". Every token type that
-- may hold a letter outside ASCII is mapped; numbers and ASCII words are as in 'simple'.
-- One statement (docs/scale.md): the two commands through EXECUTE.
DO $do$
BEGIN
  EXECUTE 'CREATE TEXT SEARCH CONFIGURATION desk_words (COPY = pg_catalog.simple)';
  EXECUTE 'ALTER TEXT SEARCH CONFIGURATION desk_words ALTER MAPPING FOR word, numword, hword, numhword,
    hword_part, hword_numpart, email, url, host, url_path, file WITH unaccent, simple';
END
$do$;
