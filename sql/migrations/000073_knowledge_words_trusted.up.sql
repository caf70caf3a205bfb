-- Recall's typo channel (knowledge_word, 000011) corrects a query word to the project's
-- closest words. It was fed every entry's words, candidates and rejected ones included:
-- a word found in the list is not corrected, so a part that learnt a candidate holding
-- "cloudfrnt" made another part's recall of "cloudfrnt" miss the trusted "cloudfront"
-- entry, and any part could test whether a word was in entries nobody confirmed, which
-- recall must never reveal. The trigger now adds the words of a trusted entry only (one
-- inserted trusted, or one whose title or body changes while trusted); an approval adds
-- them in its own transaction (KnowledgeWordsAdd), since the trigger does not fire on a
-- change of status and recreating it would need Citus's unsafe-trigger setting on a
-- distributed table. 000074 rebuilds the list from the trusted entries.
CREATE OR REPLACE FUNCTION rr_knowledge_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status <> 'trusted' THEN
    RETURN NULL;
  END IF;
  INSERT INTO knowledge_word (project_id, word)
  SELECT NEW.project_id, w
  FROM unnest(tsvector_to_array(to_tsvector('simple', NEW.title || ' ' || NEW.body))) AS w
  WHERE length(w) BETWEEN 4 AND 40 AND w ~ '^[[:alpha:]]+$'
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END
$$;
