-- Folds the accents of the search text stored before 000071, so that conversations
-- already there are found as new ones are. Each stored word goes through the unaccent
-- dictionary alone (the words are already lower-cased 'simple' lexemes; lower() again
-- because a few foldings yield a capital, as "ǅ" gives "Dz"), which is what desk_words
-- makes of it; a word the dictionary leaves as it is stays. Only rows with a letter
-- outside ASCII are rewritten (the others read once); updated_at is not touched.
UPDATE desk_conversation c
SET search = coalesce((
  SELECT array_to_tsvector(array_agg(DISTINCT w))
  FROM (SELECT lower(coalesce((ts_lexize('unaccent', l))[1], l)) AS w
        FROM unnest(tsvector_to_array(c.search)) AS l) f
  WHERE w <> ''), ''::tsvector)
WHERE c.search::text ~ '[^[:ascii:]]';
