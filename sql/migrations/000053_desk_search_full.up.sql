-- A conversation whose search text is full still takes messages.
--
-- Each public message adds its words to its conversation's search text (a tsvector of
-- the distinct words, stripped of positions), and a tsvector holds at most 1 MB of words.
-- A conversation fed log dumps, stack traces or encoded data (many distinct words) filled
-- it after about ten long messages; from then on every message to it, a "thanks"
-- included, failed ("string is too long for tsvector") and the ingest answered INTERNAL,
-- so the mail gateway retried it forever. desk_search_add adds a message's words when
-- they fit and otherwise keeps the conversation's search text as it is: the message is
-- stored and shown, and the conversation is still found by the words it already holds.
CREATE FUNCTION desk_search_add(cur tsvector, body text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN cur || strip(to_tsvector('simple', body));
EXCEPTION WHEN program_limit_exceeded THEN
  RETURN cur;
END
$$;
