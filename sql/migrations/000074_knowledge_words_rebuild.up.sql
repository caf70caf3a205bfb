-- The typo channel's words of entries nobody confirmed are taken out (000073): a word that
-- no trusted entry of its project holds is deleted (the trusted entries' words are read
-- once, as 000011 reads them, and anti-joined).
DELETE FROM knowledge_word w
WHERE NOT EXISTS (
  SELECT 1
  FROM knowledge k, unnest(tsvector_to_array(to_tsvector('simple', k.title || ' ' || k.body))) AS t(word)
  WHERE k.project_id = w.project_id AND k.status = 'trusted' AND t.word = w.word);
